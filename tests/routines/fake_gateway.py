"""A small local OpenClaw Gateway stand-in speaking the frames the real gateway
(2026.9.6) sent (shared/runtimes/openclaw/*.jsonl) over a real websocket server (raw
asyncio), run on its own loop thread. Like the real one it speaks protocol 4 only,
refuses cron writes without ``operator.admin``, and can be "still starting"."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import struct
import threading
from typing import Any

_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PROTOCOL = 4
ADMIN_METHODS = frozenset({"cron.add", "cron.update", "cron.remove", "cron.run"})


class _Peer:
    """Server side of one websocket connection (raw asyncio: daphne has already claimed
    txaio for twisted, so autobahn's asyncio server cannot be used in-process)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.scopes: list[str] = []

    def send(self, frame: dict[str, Any]) -> None:
        data = json.dumps(frame).encode()
        head = bytes([0x81])
        if len(data) < 126:
            head += bytes([len(data)])
        elif len(data) < 65536:
            head += bytes([126]) + struct.pack("!H", len(data))
        else:
            head += bytes([127]) + struct.pack("!Q", len(data))
        self.writer.write(head + data)


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    b1, b2 = await reader.readexactly(2)
    length = b2 & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    mask = await reader.readexactly(4) if b2 & 0x80 else b"\0\0\0\0"
    data = await reader.readexactly(length)
    return b1 & 0x0F, bytes(c ^ mask[i % 4] for i, c in enumerate(data))


class FakeGateway:
    def __init__(self, token: str = "secret") -> None:
        self.token = token
        self.jobs: dict[str, dict[str, Any]] = {}
        self.silent_methods: set[str] = set()  # never answered (slow gateway)
        self.agent_delay_s = 0.0
        # The first N connects answer UNAVAILABLE/retryable, as a gateway still starting.
        self.starting_connects = 0
        self.requests: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        key = next(
            line.split(":", 1)[1].strip()
            for line in head.split("\r\n")
            if line.lower().startswith("sec-websocket-key:")
        )
        accept = base64.b64encode(hashlib.sha1((key + _GUID).encode()).digest()).decode()
        writer.write(
            (
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            ).encode()
        )
        peer = _Peer(writer)
        peer.scopes = []
        peer.send(
            {"type": "event", "event": "connect.challenge", "payload": {"nonce": "n1", "ts": 0}}
        )
        try:
            while True:
                opcode, data = await _read_frame(reader)
                if opcode == 0x8:
                    break
                if opcode == 0x1:
                    frame = json.loads(data.decode())
                    self.requests.append(frame)
                    self.answer(peer, frame)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def answer(self, proto: Any, frame: dict[str, Any]) -> None:
        rid, method, params = frame["id"], frame["method"], frame.get("params") or {}

        def ok(payload: dict[str, Any]) -> None:
            proto.send({"type": "res", "id": rid, "ok": True, "payload": payload})

        def fail(code: str, message: str) -> None:
            proto.send(
                {"type": "res", "id": rid, "ok": False, "error": {"code": code, "message": message}}
            )

        if method in self.silent_methods:
            return
        if method == "connect":
            if self.starting_connects > 0:
                self.starting_connects -= 1
                return proto.send(
                    {
                        "type": "res",
                        "id": rid,
                        "ok": False,
                        "error": {
                            "code": "UNAVAILABLE",
                            "message": "gateway starting; retry shortly",
                            "retryable": True,
                            "retryAfterMs": 50,
                            "details": {"reason": "startup-sidecars"},
                        },
                    }
                )
            if not params.get("minProtocol", 0) <= PROTOCOL <= params.get("maxProtocol", 0):
                return fail("INVALID_REQUEST", "protocol mismatch")
            if params.get("auth", {}).get("token") != self.token:
                return fail(
                    "INVALID_REQUEST",
                    "unauthorized: gateway token mismatch (provide gateway auth token)",
                )
            proto.scopes = list(params.get("scopes") or [])
            return ok(
                {
                    "type": "hello-ok",
                    "protocol": PROTOCOL,
                    "server": {"version": "test", "connId": "c1"},
                    "features": {"methods": [], "events": []},
                    "policy": {},
                }
            )
        if method in ADMIN_METHODS and "operator.admin" not in proto.scopes:
            return fail("FORBIDDEN", "missing scope: operator.admin")
        if method == "cron.list":
            return ok({"jobs": list(self.jobs.values())})
        if method == "cron.add":
            job_id = f"job{len(self.jobs) + 1}"
            self.jobs[job_id] = {"id": job_id, "enabled": True, "state": {}, **params}
            return ok(self.jobs[job_id])
        if method in ("cron.update", "cron.remove", "cron.run"):
            job = self.jobs.get(params.get("id"))
            if job is None:
                return fail("NOT_FOUND", "unknown job")
            if method == "cron.update":
                job.update(params.get("patch") or {})
                return ok(job)
            if method == "cron.remove":
                del self.jobs[job["id"]]
                return ok({"removed": True})
            return ok({"ran": True})
        if method == "agent":
            ok({"runId": "run1", "status": "accepted"})
            proto.send(
                {
                    "type": "event",
                    "event": "agent",
                    "payload": {
                        "runId": "run1",
                        "seq": 1,
                        "stream": "lifecycle",
                        "data": {"phase": "start"},
                    },
                }
            )
            self.loop.call_later(
                self.agent_delay_s,
                lambda: ok(
                    {
                        "runId": "run1",
                        "status": "ok",
                        "summary": "completed",
                        "result": {
                            "payloads": [{"text": "done", "mediaUrl": None}],
                            "meta": {"agentMeta": {"usage": {"input": 120, "output": 7}}},
                        },
                    }
                ),
            )
            return None
        return fail("UNKNOWN_METHOD", method)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
