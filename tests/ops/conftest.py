from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Receiver:
    """A webhook receiver on loopback: answers each POST with the next scripted
    status (then 200s) and records what it got."""

    url: str = ""
    script: list[int] = field(default_factory=list)
    received: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> int:
        with self.lock:
            return self.script.pop(0) if self.script else 200


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = found.answer()
            with found.lock:
                found.received.append(
                    {"headers": dict(self.headers), "body": body, "status": status}
                )
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    # shutdown() waits out one poll of serve_forever: 0.5 s a test by default.
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    found.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    yield found
    server.shutdown()
    server.server_close()
