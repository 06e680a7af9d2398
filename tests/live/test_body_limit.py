"""A body over the limit is refused while it arrives: a real daphne, a 300 MB anonymous
upload streamed at it, and what the server stored of it measured from its open files."""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from clawboo.bodylimit import BodyLimitApp

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(120),
    # The limit is the ASGI layer's, before any view or query: the engine changes nothing.
    pytest.mark.backend_independent,
]

HUGE = 300 * 1024 * 1024
CHUNK = 64 * 1024


class SpoolWatch:
    """Samples the size of every file the server holds open under its temp dir."""

    def __init__(self, pid: int, spool: Path) -> None:
        self.pid, self.spool = pid, str(spool)
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        fds = Path(f"/proc/{self.pid}/fd")
        while not self.stop.is_set():
            total = 0
            for fd in list(fds.iterdir()):
                try:
                    if os.readlink(fd).startswith(self.spool):
                        total += os.stat(fd).st_size
                except OSError:
                    continue
            self.peak = max(self.peak, total)
            self.stop.wait(0.01)

    def __enter__(self) -> SpoolWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


def stream_upload(
    base: str, *, chunked: bool, expect: bool = False
) -> tuple[int, dict[str, Any], int]:
    """POST a 300 MB body, anonymously, until the server answers; (status, body, sent)."""
    url = urlsplit(base)
    sock = socket.create_connection((url.hostname, url.port), timeout=30)
    framing = "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {HUGE}\r\n"
    if expect:  # as curl asks before a large body
        framing += "Expect: 100-continue\r\n"
    sock.sendall(
        (
            f"POST /api/board/tasks HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Content-Type: application/json\r\n{framing}\r\n"
        ).encode()
    )
    piece = b"x" * CHUNK
    if chunked:
        piece = f"{CHUNK:x}\r\n".encode() + piece + b"\r\n"
    sent = 0
    answer = b""
    try:
        while sent < HUGE:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            sock.sendall(piece)
            sent += CHUNK
    except OSError:
        pass  # the server stopped reading: its answer is already waiting
    deadline = time.monotonic() + 10
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        if time.monotonic() > deadline:
            break
        data = sock.recv(65536)
        if not data:
            break
        answer += data
    sock.close()
    assert b"100 Continue" not in answer  # a refused body is never invited
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, json.loads(body), sent


@pytest.mark.parametrize(
    ("chunked", "expect"),
    [(False, False), (True, False), (False, True)],
    ids=["content-length", "chunked", "expect-100-continue"],
)
def test_a_300_mb_anonymous_body_is_refused_before_it_is_stored(
    daphne: Callable[..., str],
    tmp_path: Path,
    chunked: bool,
    expect: bool,
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    base = daphne(extra_env={"TMPDIR": str(spool)})
    pid = daphne.pid(base)  # type: ignore[attr-defined]
    with SpoolWatch(pid, spool) as watch:
        status, body, sent = stream_upload(base, chunked=chunked, expect=expect)
    assert status == 413
    assert body["error"] == "payload_too_large" and body["limit"] == 2 * 1024 * 1024
    assert watch.peak < 3 * 1024 * 1024, watch.peak
    assert sent < HUGE // 10  # the client learnt early, not after 300 MB
    # The server goes on serving.
    with urllib.request.urlopen(base + "/api/schema/", timeout=10) as response:  # noqa: S310
        assert response.status == 200


def test_a_body_under_the_limit_still_reaches_the_api(
    daphne: Callable[..., str],
) -> None:
    base = daphne()
    request = urllib.request.Request(  # noqa: S310 - loopback test server
        base + "/api/board/tasks",
        data=json.dumps({"title": "x" * (1024 * 1024)}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        urllib.request.urlopen(request, timeout=30)  # noqa: S310
    except urllib.error.HTTPError as exc:
        assert exc.code == 401  # anonymous: the API's own answer, not a size refusal
    else:
        raise AssertionError("an anonymous create was accepted")


def test_the_asgi_guard_counts_streamed_chunks_for_other_servers(settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    read: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            read.append(len(message["body"]))
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def call(headers: list[tuple[bytes, bytes]]) -> tuple[list[Any], int]:
        sent: list[Any] = []
        pulled = 0

        async def receive() -> dict[str, Any]:
            nonlocal pulled
            pulled += 1
            return {"type": "http.request", "body": b"x" * 600, "more_body": pulled < 1000}

        async def send(message: Any) -> None:
            sent.append(message)

        await BodyLimitApp(app)({"type": "http", "headers": headers}, receive, send)
        return sent, pulled

    sent, pulled = asyncio.run(call([]))
    assert sent[0]["status"] == 413 and json.loads(sent[1]["body"])["limit"] == 1000
    assert pulled == 2 and sum(read) == 600  # stopped at the chunk that passed the limit
    sent, pulled = asyncio.run(call([(b"content-length", b"600000")]))
    assert sent[0]["status"] == 413 and pulled == 0


@pytest.mark.parametrize(
    "content_type",
    ["multipart/form-data", "multipart/form-data; boundary=x"],
    ids=["no-boundary", "unparseable"],
)
def test_a_form_body_the_server_cannot_parse_is_answered_by_the_api(
    daphne: Callable[..., str], content_type: str
) -> None:
    # Twisted used to answer a multipart POST it could not parse with an empty 400
    # before the application saw it: not the API's error envelope.
    url = urlsplit(daphne())
    body = b'{"title": "x"}'
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST /api/board/tasks HTTP/1.1\r\nHost: {url.netloc}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode()
            + body
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert int(head.split(b" ")[1]) in (401, 415), head
    assert set(json.loads(payload)) >= {"error", "detail"}
