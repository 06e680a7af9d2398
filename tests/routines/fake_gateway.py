"""A small local OpenClaw Gateway stand-in speaking the frames the real gateway
(2026.9.6) sent (shared/runtimes/openclaw/*.jsonl), over websockets' asyncio server
on its own loop thread.

Like the real one it speaks protocol 4 only, refuses cron writes and model overrides
without ``operator.admin``, refuses an unknown ``agentId`` (its one agent is ``main``),
can be "still starting", and runs agents the way the real one does: ``agent`` answers
``accepted`` then the final payload; a run goes on when its client disconnects;
``chat.abort`` ends it (allowed from the run's own connection, from another one only
with ``operator.admin``), after which its final answer is ``status: timeout, summary:
aborted``; ``agent.wait`` says ``ok`` / ``error`` (aborted) for an ended run and
``timeout`` for one still running (or unknown) when its ``timeoutMs`` passes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

PROTOCOL = 4
ADMIN_METHODS = frozenset({"cron.add", "cron.update", "cron.remove", "cron.run"})
AGENTS = frozenset({"main"})


def now_ms() -> int:
    return int(time.time() * 1000)


class _Peer:
    """One client connection; frames go out in order through one queue."""

    def __init__(self, ws: ServerConnection) -> None:
        self.ws = ws
        self.scopes: list[str] = []
        self.outbox: asyncio.Queue[str] = asyncio.Queue()

    def send(self, frame: dict[str, Any]) -> None:
        self.outbox.put_nowait(json.dumps(frame))

    async def pump(self) -> None:
        while True:
            await self.ws.send(await self.outbox.get())


@dataclass
class FakeRun:
    run_id: str
    session_key: str
    agent_id: str
    peer: _Peer
    request_id: str
    started_at: int = field(default_factory=now_ms)
    status: str = "running"  # "running" | "ok" | "aborted"
    ended_at: int | None = None
    final: dict[str, Any] | None = None
    timer: asyncio.TimerHandle | None = None
    waiters: list[tuple[_Peer, str, asyncio.TimerHandle]] = field(default_factory=list)

    def wait_payload(self) -> dict[str, Any]:
        if self.status == "ok":
            return {
                "runId": self.run_id,
                "status": "ok",
                "endedAt": self.ended_at,
                "stopReason": "stop",
            }
        return {
            "runId": self.run_id,
            "status": "error",
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            "stopReason": "rpc",
        }


class FakeGateway:
    def __init__(self, token: str = "secret") -> None:
        self.token = token
        self.jobs: dict[str, dict[str, Any]] = {}
        self.silent_methods: set[str] = set()  # never answered (slow gateway)
        # How long an agent run takes; None: it hangs until aborted.
        self.agent_delay_s: float | None = 0.0
        # False: a run sends no events (as one aborted before its first event).
        self.agent_events = True
        # Set: a running run names its model, then streams its output tokens so far
        # (``usage {outputTokens}``, running totals) this often, this many a turn.
        self.usage_every_s: float | None = None
        self.usage_tokens_per_turn = 7
        # What a finished run answers (its ``result.payloads[].text``).
        self.reply_text = "done"
        # The first N connects answer UNAVAILABLE/retryable, as a gateway still starting.
        self.starting_connects = 0
        self.requests: list[dict[str, Any]] = []
        self.runs: dict[str, FakeRun] = {}
        # The loop runs in a thread of its own from the start: the test's thread may
        # have one running already (a browser test's Playwright), beside which no
        # other loop can be run.
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(timeout=10)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _start(self) -> Server:
        return await serve(self._serve, "127.0.0.1", 0)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def _serve(self, ws: ServerConnection) -> None:
        peer = _Peer(ws)
        pump = asyncio.ensure_future(peer.pump())
        peer.send(
            {"type": "event", "event": "connect.challenge", "payload": {"nonce": "n1", "ts": 0}}
        )
        try:
            async for message in ws:
                frame = json.loads(message)
                self.requests.append(frame)
                self.answer(peer, frame)
        except ConnectionClosed:
            pass
        finally:
            pump.cancel()

    def answer(self, peer: _Peer, frame: dict[str, Any]) -> None:
        rid, method, params = frame["id"], frame["method"], frame.get("params") or {}

        def ok(payload: dict[str, Any]) -> None:
            peer.send({"type": "res", "id": rid, "ok": True, "payload": payload})

        def fail(code: str, message: str) -> None:
            peer.send(
                {"type": "res", "id": rid, "ok": False, "error": {"code": code, "message": message}}
            )

        if method in self.silent_methods:
            return None
        if method == "connect":
            if self.starting_connects > 0:
                self.starting_connects -= 1
                return peer.send(
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
            peer.scopes = list(params.get("scopes") or [])
            return ok(
                {
                    "type": "hello-ok",
                    "protocol": PROTOCOL,
                    "server": {"version": "test", "connId": "c1"},
                    "features": {"methods": [], "events": []},
                    "policy": {},
                }
            )
        admin = "operator.admin" in peer.scopes
        if method in ADMIN_METHODS and not admin:
            return fail("FORBIDDEN", "missing scope: operator.admin")
        if method == "cron.list":
            return ok({"jobs": list(self.jobs.values())})
        if method == "cron.add":
            job_id = f"job{len(self.jobs) + 1}"
            # A job made without agentId runs as the default agent, named only as
            # effectiveAgentId (as the real gateway lists it).
            self.jobs[job_id] = {
                "id": job_id,
                "enabled": True,
                "state": {},
                "effectiveAgentId": params.get("agentId") or "main",
                **params,
            }
            return ok(self.jobs[job_id])
        if method in ("cron.update", "cron.remove", "cron.run"):
            job = self.jobs.get(params.get("id"))
            if job is None:
                return fail("NOT_FOUND", "unknown job")
            if job.get("declarationKey") and method != "cron.run":
                # The real gateway's words (and code) for its own seeded jobs.
                verb = "edited" if method == "cron.update" else "removed"
                why = f"Error: system-owned monitor jobs cannot be {verb} by cron clients"
                return fail("UNAVAILABLE", why)
            if method == "cron.update":
                job.update(params.get("patch") or {})
                return ok(job)
            if method == "cron.remove":
                del self.jobs[job["id"]]
                return ok({"removed": True})
            return ok({"ran": True})
        if method == "agent":
            agent_id = params.get("agentId") or "main"
            if agent_id not in AGENTS:
                return fail(
                    "INVALID_REQUEST", f'invalid agent params: unknown agent id "{agent_id}"'
                )
            if params.get("model") and not admin:
                return fail(
                    "INVALID_REQUEST",
                    "provider/model overrides are not authorized for this caller.",
                )
            return self._start_run(peer, rid, params, agent_id)
        if method == "chat.abort":
            return self._abort(peer, rid, params, admin)
        if method == "agent.wait":
            run = self.runs.get(params.get("runId"))
            if run is not None and run.status != "running":
                return ok(run.wait_payload())
            timer = self.loop.call_later(
                (params.get("timeoutMs") or 0) / 1000,
                lambda: ok({"runId": params.get("runId"), "status": "timeout"}),
            )
            if run is not None:
                run.waiters.append((peer, rid, timer))
            return None
        return fail("UNKNOWN_METHOD", method)

    # --- agent runs ---------------------------------------------------------------

    def _start_run(self, peer: _Peer, rid: str, params: dict[str, Any], agent_id: str) -> None:
        key = params["idempotencyKey"]
        earlier = self.runs.get(key)
        if earlier is not None and earlier.final is not None:  # same key: the same run
            return peer.send({"type": "res", "id": rid, "ok": True, "payload": earlier.final})
        session = params.get("sessionKey")
        canonical = (
            session
            if session and session.startswith("agent:")
            else f"agent:{agent_id}:{session.lower()}"
            if session
            else f"agent:{agent_id}:explicit:{key}"
        )
        run = FakeRun(key, canonical, agent_id, peer, rid)
        self.runs[key] = run
        accepted = {"runId": key, "agentId": agent_id, "status": "accepted", "acceptedAt": now_ms()}
        if session:
            accepted["sessionKey"] = canonical
        peer.send({"type": "res", "id": rid, "ok": True, "payload": accepted})
        self._lifecycle(run, {"phase": "start", "startedAt": run.started_at})
        if self.usage_every_s is not None and self.agent_events:
            self._lifecycle(run, {"phase": "model", "provider": "fake", "model": "fake-model"})
            self.loop.call_later(self.usage_every_s, self._usage, run, 1)
        if self.agent_delay_s is not None:
            run.timer = self.loop.call_later(self.agent_delay_s, self._finish, run)
        return None

    def _lifecycle(self, run: FakeRun, data: dict[str, Any]) -> None:
        if not self.agent_events:
            return
        payload = {
            "runId": run.run_id,
            "sessionKey": run.session_key,
            "agentId": run.agent_id,
            "stream": "lifecycle",
            "data": data,
        }
        run.peer.send({"type": "event", "event": "agent", "payload": payload})

    def _usage(self, run: FakeRun, turn: int) -> None:
        if run.status != "running" or self.usage_every_s is None:
            return
        payload = {
            "runId": run.run_id,
            "sessionKey": run.session_key,
            "stream": "usage",
            "data": {"outputTokens": self.usage_tokens_per_turn * turn},
            "agentId": run.agent_id,
        }
        run.peer.send({"type": "event", "event": "agent", "payload": payload})
        self.loop.call_later(self.usage_every_s, self._usage, run, turn + 1)

    def _finish(self, run: FakeRun) -> None:
        run.status, run.ended_at = "ok", now_ms()
        self._lifecycle(run, {"phase": "end", "aborted": False, "stopReason": "stop"})
        self._settle(
            run,
            {
                "runId": run.run_id,
                "status": "ok",
                "summary": "completed",
                "result": {
                    "payloads": [{"text": self.reply_text, "mediaUrl": None}],
                    "meta": {"agentMeta": {"usage": {"input": 120, "output": 7}}},
                },
            },
        )

    def _abort(self, peer: _Peer, rid: str, params: dict[str, Any], admin: bool) -> None:
        def ok(payload: dict[str, Any]) -> None:
            peer.send({"type": "res", "id": rid, "ok": True, "payload": payload})

        session = params.get("sessionKey") or ""
        agent_id = params.get("agentId") or "main"
        canonical = (
            session if session.startswith("agent:") else f"agent:{agent_id}:{session.lower()}"
        )
        run = self.runs.get(params.get("runId"))
        if run is None or run.status != "running" or run.session_key != canonical:
            return ok({"ok": True, "aborted": False, "runIds": []})
        if peer is not run.peer and not admin:
            return peer.send(
                {
                    "type": "res",
                    "id": rid,
                    "ok": False,
                    "error": {"code": "INVALID_REQUEST", "message": "unauthorized"},
                }
            )
        if run.timer is not None:
            run.timer.cancel()
        run.status, run.ended_at = "aborted", now_ms()
        run.peer.send(
            {
                "type": "event",
                "event": "chat",
                "payload": {
                    "runId": run.run_id,
                    "sessionKey": run.session_key,
                    "state": "aborted",
                    "stopReason": "rpc",
                },
            }
        )
        self._lifecycle(
            run, {"phase": "end", "status": "cancelled", "aborted": True, "stopReason": "rpc"}
        )
        ok({"ok": True, "aborted": True, "runIds": [run.run_id]})
        self._settle(
            run,
            {"runId": run.run_id, "status": "timeout", "summary": "aborted", "stopReason": "rpc"},
        )
        return None

    def _settle(self, run: FakeRun, final: dict[str, Any]) -> None:
        run.final = final
        run.peer.send({"type": "res", "id": run.request_id, "ok": True, "payload": final})
        for peer, rid, timer in run.waiters:
            timer.cancel()
            peer.send({"type": "res", "id": rid, "ok": True, "payload": run.wait_payload()})
        run.waiters.clear()

    def close(self) -> None:
        async def shutdown() -> None:
            self.server.close()  # and every connection
            await self.server.wait_closed()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()
