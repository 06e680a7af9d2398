"""A small synchronous OpenClaw Gateway operator client (RUNTIMES.md frames).

One websocket connection per use (``websockets``' sync client): answer the optional
``connect.challenge`` with ``connect`` as a backend operator, then request/response
frames matched by id. Every read is bounded by a deadline, so a slow or silent
gateway surfaces as :class:`GatewayTimedOut` instead of hanging the caller.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from websockets.exceptions import ConnectionClosed, WebSocketException
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from core.errors import ClawbooError
from executor.steps import OpenClawSteps, Step

# Told a run's output tokens so far and the model it calls (None: not named yet).
UsageCallback = Callable[[int, str | None], None]

# Offered as a range: gateway 2026.9 speaks 4 only and refuses a client offering 3
# alone ("protocol mismatch", expectedProtocol 4); older gateways speak 3.
MIN_PROTOCOL = 3
MAX_PROTOCOL = 4
# operator.admin: cron writes and an agent run that names its model need it (2026.9);
# chat.abort of a run started on another connection too.
SCOPES = ("operator.read", "operator.write", "operator.admin")
CLIENT_VERSION = "0.1.0"
DEFAULT_TIMEOUT_S = 5.0
MAX_FRAME_BYTES = 26_214_400  # the gateway's own policy.maxPayload (2026.9)
CANCEL_POLL_S = 0.2  # how often a waiting run looks at its cancel flag
ABORT_TIMEOUT_S = 10.0  # chat.abort and the run's last answer after it


class GatewayUnavailable(ClawbooError):
    """The OpenClaw Gateway is not configured, not reachable or did not answer (503)."""

    code = "gateway_unavailable"


class GatewayTimedOut(GatewayUnavailable):
    """The gateway did not answer before the caller's deadline."""


class GatewayRejected(ClawbooError):
    """The Gateway answered ``ok: false`` to an operator request (409 with its code)."""

    code = "conflict"


@dataclass(frozen=True)
class GatewayDispatch:
    """The ``agent`` request's parameters (RUNTIMES.md), in Python names."""

    message: str
    idempotency_key: str
    agent_id: str | None
    session_key: str | None
    model: str | None
    timeout_s: float
    task_id: str
    # Told the run's usage so far as the gateway streams it (the per-run ceiling).
    on_usage: UsageCallback | None = None
    # Told each step of the run (a tool item that ended, an error) as it streams.
    on_step: Callable[[Step], None] | None = None


@dataclass
class GatewayReply:
    """The run's end as the gateway reported it (or as the watchdog or cancel ended it)."""

    status: str  # "ok" | "error" | "timeout" | "cancelled"
    run_id: str | None = None
    summary: str = ""
    error: str = ""
    session_key: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_cents: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    model: str | None = None


@dataclass(frozen=True)
class GatewayConfig:
    url: str
    token: str


def configured() -> GatewayConfig | None:
    """The gateway named by settings (``CLAWBOO_OPENCLAW_GATEWAY_URL`` /
    ``CLAWBOO_OPENCLAW_TOKEN``, read from the environment there), or None."""
    url = settings.CLAWBOO_OPENCLAW_GATEWAY_URL or ""
    token = settings.CLAWBOO_OPENCLAW_TOKEN or ""
    return GatewayConfig(url=url, token=token) if url else None


class GatewayClient:
    """Operator connection to one gateway. Use as a context manager."""

    def __init__(self, config: GatewayConfig, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.config = config
        self.timeout_s = timeout_s
        self._ws: ClientConnection | None = None
        self._stack = contextlib.ExitStack()  # the connection's context (websockets >= 17.1)
        self.hello: dict[str, Any] = {}

    def __enter__(self) -> GatewayClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        if not self.config.url.startswith(("ws://", "wss://")):
            raise GatewayUnavailable(f"gateway url {self.config.url!r} is not a ws:// url")
        try:
            self._ws = self._stack.enter_context(
                ws_connect(
                    self.config.url,
                    open_timeout=self.timeout_s,
                    close_timeout=1,
                    max_size=MAX_FRAME_BYTES,
                    proxy=None,  # a gateway is reached directly, never through HTTP(S)_PROXY
                )
            )
        except TimeoutError:
            raise GatewayTimedOut("gateway did not answer in time") from None
        except (OSError, WebSocketException) as exc:
            raise GatewayUnavailable(f"gateway unreachable: {exc}") from None
        # The server may speak first with a challenge; answer with connect either way.
        # A gateway still starting answers UNAVAILABLE, retryable, with retryAfterMs:
        # retry on the same connection until the deadline.
        try:
            while True:
                try:
                    self.hello = self.request("connect", self._connect_params(), deadline=deadline)
                    return self.hello
                except GatewayRejected as exc:
                    wait_s = (exc.extra.get("retry_after_ms") or 500) / 1000
                    if not exc.extra.get("retryable") or time.monotonic() + wait_s >= deadline:
                        raise
                    time.sleep(wait_s)
        except BaseException:
            self.close()
            raise

    def _connect_params(self) -> dict[str, Any]:
        return {
            "minProtocol": MIN_PROTOCOL,
            "maxProtocol": MAX_PROTOCOL,
            "client": {
                "id": "gateway-client",
                "version": CLIENT_VERSION,
                "platform": "python",
                "mode": "backend",
            },
            "role": "operator",
            "scopes": list(SCOPES),
            "caps": [],
            "auth": {"token": self.config.token},
        }

    def close(self) -> None:
        self._ws = None
        self._stack.close()  # the closing handshake is bounded by close_timeout

    # --- requests ----------------------------------------------------------------

    def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        deadline: float | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Send one ``req`` and return the first matching ``res`` payload."""
        request_id = secrets.token_hex(8)
        self.send_json({"type": "req", "id": request_id, "method": method, "params": params})
        return self.await_response(request_id, deadline=deadline, on_event=on_event)

    def await_response(
        self,
        request_id: str,
        *,
        deadline: float | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """The next ``res`` for ``request_id``; raises GatewayRejected on ``ok: false``."""
        deadline = deadline if deadline is not None else time.monotonic() + self.timeout_s
        while True:
            frame = self.receive_json(deadline)
            if frame.get("type") == "event":
                if on_event is not None:
                    on_event(frame)
                continue
            if frame.get("type") != "res" or frame.get("id") != request_id:
                continue  # parse defensively: skip what we do not know
            if frame.get("ok"):
                payload = frame.get("payload")
                return payload if isinstance(payload, dict) else {}
            error = frame.get("error") or {}
            retry_after = error.get("retryAfterMs")
            raise GatewayRejected(
                str(error.get("message") or "gateway refused the request"),
                gateway_code=error.get("code"),
                retryable=bool(error.get("retryable", False)),
                retry_after_ms=retry_after if isinstance(retry_after, int | float) else None,
            )

    # --- frames ------------------------------------------------------------------

    def send_json(self, value: dict[str, Any]) -> None:
        if self._ws is None:
            raise GatewayUnavailable("gateway connection is closed")
        try:
            self._ws.send(json.dumps(value))
        except (OSError, WebSocketException) as exc:
            raise GatewayUnavailable(f"gateway connection lost: {exc}") from None

    def receive_json(self, deadline: float) -> dict[str, Any]:
        """The next JSON object frame before ``deadline`` (others are skipped)."""
        if self._ws is None:
            raise GatewayUnavailable("gateway connection is closed")
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise GatewayTimedOut("gateway did not answer in time")
            try:
                message = self._ws.recv(timeout=remaining)
            except TimeoutError:
                raise GatewayTimedOut("gateway did not answer in time") from None
            except ConnectionClosed:
                raise GatewayUnavailable("gateway closed the connection") from None
            except (OSError, WebSocketException) as exc:
                raise GatewayUnavailable(f"gateway connection lost: {exc}") from None
            try:
                value = json.loads(message)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value


# --- agent runs --------------------------------------------------------------------

NOT_CONFIGURED = "the OpenClaw gateway is not configured (CLAWBOO_OPENCLAW_GATEWAY_URL)"


@dataclass
class AgentRun:
    """What the client has learnt of one ``agent`` run: enough to abort it.

    The gateway names the run after its idempotency key and canonicalises the
    session key (``agent:main:<key>``); both come back in the ``accepted`` answer or,
    when no session key was sent, in the run's ``agent`` events.
    """

    run_id: str
    session_key: str | None
    agent_id: str | None
    accepted: bool = False
    # What the run's events said of its spend so far: the model it calls, and its
    # output tokens (gateway 2026.9 streams ``usage {outputTokens}`` after each model
    # turn, running totals; input tokens only in the final answer).
    model: str | None = None
    tokens_out: int | None = None
    on_usage: UsageCallback | None = None
    on_step: Callable[[Step], None] | None = None
    step_reader: OpenClawSteps = field(default_factory=OpenClawSteps)

    def note_accepted(self, payload: dict[str, Any]) -> None:
        self.accepted = True
        self.run_id = str(payload.get("runId") or self.run_id)
        self.session_key = payload.get("sessionKey") or self.session_key
        self.agent_id = payload.get("agentId") or self.agent_id

    def note_event(self, frame: dict[str, Any]) -> None:
        payload = frame.get("payload")
        if not isinstance(payload, dict) or payload.get("runId") != self.run_id:
            return
        if self.session_key is None and isinstance(payload.get("sessionKey"), str):
            self.session_key = payload["sessionKey"]
        data = payload.get("data")
        if frame.get("event") != "agent" or not isinstance(data, dict):
            return
        stream = payload.get("stream")
        if self.on_step is not None:
            for step in self.step_reader.feed(stream, data):
                self.on_step(step)
        if stream == "lifecycle" and data.get("phase") == "model":
            model = data.get("model")
            if isinstance(model, str) and model:
                self.model = model
        elif stream == "usage":
            tokens = data.get("outputTokens")
            if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
                return
            if self.tokens_out is not None and tokens <= self.tokens_out:
                return  # a repeat: nothing new to price
            self.tokens_out = tokens
            if self.on_usage is not None:
                self.on_usage(tokens, self.model)

    def abort_params(self) -> dict[str, Any]:
        # A run sent without a session key gets the session "explicit:<runId>" of its
        # agent, which a run aborted before its first event has not named yet.
        session_key = self.session_key or f"explicit:{self.run_id}"
        params: dict[str, Any] = {"sessionKey": session_key, "runId": self.run_id}
        if self.agent_id and not session_key.startswith("agent:"):
            params["agentId"] = self.agent_id  # a bare key is resolved against this agent
        return params


def run_agent(
    params: dict[str, Any],
    *,
    request_id: str,
    watchdog_s: float,
    cancel: Any = None,
    on_usage: UsageCallback | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> GatewayReply:
    """Run an agent over the gateway: the ``agent`` request, answered twice on one id
    (``accepted``, then the terminal ``ok``/``error``), under a watchdog deadline.

    The one place the agent-run protocol lives (routine fires and the ``openclaw``
    runtime adapter both call it). A run outlives its client's connection, so when the
    watchdog passes or ``cancel`` is set (looked at every ``CANCEL_POLL_S``) the run is
    aborted in the gateway (``chat.abort``) and the reply says ``timeout`` or
    ``cancelled``. Never raises for a gateway problem: not configured, unreachable or
    refusing is a reply with status ``error``. ``on_usage`` is told the run's usage so
    far (output tokens and model) each time the gateway streams more; a reply without
    the gateway's final usage (aborted, lost) carries those figures instead.
    """
    config = configured()
    if config is None:
        return GatewayReply(status="error", error=NOT_CONFIGURED)
    deadline = time.monotonic() + watchdog_s
    run = AgentRun(
        run_id=str(params["idempotencyKey"]),
        session_key=params.get("sessionKey"),
        agent_id=params.get("agentId"),
        on_usage=on_usage,
        on_step=on_step,
    )
    try:
        with GatewayClient(config, timeout_s=min(watchdog_s, 30.0)) as client:
            client.send_json({"type": "req", "id": request_id, "method": "agent", "params": params})
            final = _await_final(client, request_id, run, deadline, cancel)
            if final is not None:
                return _reply_from_final(final, run)
            outcome = abort_run(client, config, run)
    except GatewayRejected as exc:
        return GatewayReply(
            status="error", run_id=run.run_id, error=exc.detail, session_key=run.session_key
        )
    except GatewayUnavailable as exc:
        # Lost mid-run: the run goes on in the gateway, so end it from a new connection.
        if run.accepted:
            abort_run(None, config, run)
        timed_out = isinstance(exc, GatewayTimedOut) and time.monotonic() >= deadline
        status = "timeout" if timed_out else "error"
        return _unfinished(run, status, exc.detail, run.run_id if run.accepted else None)
    if cancel is not None and cancel.is_set():
        return _unfinished(run, "cancelled", f"cancelled; {outcome}", run.run_id)
    late = f"openclaw run timed out after {watchdog_s:g}s; {outcome}"
    return _unfinished(run, "timeout", late, run.run_id)


def _unfinished(run: AgentRun, status: str, error: str, run_id: str | None) -> GatewayReply:
    """A run that did not end in the gateway's final answer: with the usage it
    streamed so far."""
    return GatewayReply(
        status=status,
        run_id=run_id,
        error=error,
        session_key=run.session_key,
        tokens_out=run.tokens_out,
        model=run.model,
    )


def _await_final(
    client: GatewayClient, request_id: str, run: AgentRun, deadline: float, cancel: Any
) -> dict[str, Any] | None:
    """The run's terminal payload, or None once the deadline passed or cancel was set."""
    while cancel is None or not cancel.is_set():
        now = time.monotonic()
        if now >= deadline:
            return None
        try:
            payload = client.await_response(
                request_id, deadline=min(deadline, now + CANCEL_POLL_S), on_event=run.note_event
            )
        except GatewayTimedOut:
            continue
        if payload.get("status") != "accepted":
            return payload
        run.note_accepted(payload)
    return None


def abort_run(client: GatewayClient | None, config: GatewayConfig, run: AgentRun) -> str:
    """``chat.abort`` the run and say how that went (for the reply's error).

    Sent on the run's own connection (read and write scopes suffice there), else on a
    fresh one, where the gateway wants ``operator.admin`` (which SCOPES asks for).
    """
    deadline = time.monotonic() + ABORT_TIMEOUT_S
    try:
        try:
            if client is None:
                raise GatewayUnavailable("no connection")
            payload = client.request("chat.abort", run.abort_params(), deadline=deadline)
        except GatewayUnavailable:
            remaining = max(deadline - time.monotonic(), 1.0)
            with GatewayClient(config, timeout_s=remaining) as fresh:
                payload = fresh.request("chat.abort", run.abort_params())
    except (GatewayUnavailable, GatewayRejected) as exc:
        return f"the gateway did not abort it: {exc.detail}"
    if payload.get("aborted"):
        return "aborted in the gateway"
    return "it had already ended in the gateway"


def _reply_from_final(final: dict[str, Any], run: AgentRun) -> GatewayReply:
    status = final.get("status") or "ok"
    tokens_in, tokens_out = reply_usage(final)
    cache_read, cache_write = reply_cache(final)
    if tokens_in is None and tokens_out is None:
        # An aborted run's answer has no usage: what its events streamed is all we know.
        tokens_out = run.tokens_out
    return GatewayReply(
        status=status if status in ("ok", "timeout") else "error",
        run_id=final.get("runId") or run.run_id,
        summary=reply_text(final),
        session_key=run.session_key,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cache_read=cache_read,
        cache_write=cache_write,
        model=reply_model(final) or run.model,
        error="" if status == "ok" else f"openclaw run ended with status {status!r}",
    )


def adapter_dispatch(job: GatewayDispatch, cancel: Any) -> GatewayReply:
    """The ``openclaw`` runtime adapter's dispatch: a board task run by an OpenClaw
    agent goes through :func:`run_agent`."""
    params: dict[str, Any] = {"message": job.message, "idempotencyKey": job.idempotency_key}
    for key, value in (
        ("agentId", job.agent_id),
        ("sessionKey", job.session_key),
        ("model", job.model),
    ):
        if value:
            params[key] = value
    return run_agent(
        params,
        request_id=f"task-{job.task_id}-{secrets.token_hex(4)}",
        watchdog_s=job.timeout_s,
        cancel=cancel,
        on_usage=job.on_usage,
        on_step=job.on_step,
    )


def reply_text(final: dict[str, Any]) -> str:
    """The agent's reply in a final ``agent`` payload.

    Gateway 2026.9 puts it in ``result.payloads[].text``; its ``summary`` is only the
    word "completed" (or "aborted"). Older gateways put the reply in ``summary``.
    """
    result = final.get("result")
    payloads = result.get("payloads") if isinstance(result, dict) else None
    if isinstance(payloads, list):
        texts = [
            p["text"] for p in payloads if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        if texts:
            return "\n".join(texts)
    summary = final.get("summary")
    return summary if isinstance(summary, str) and summary != "completed" else ""


def _agent_meta(final: dict[str, Any]) -> dict[str, Any]:
    result = final.get("result")
    meta = result.get("meta") if isinstance(result, dict) else None
    agent_meta = meta.get("agentMeta") if isinstance(meta, dict) else None
    return agent_meta if isinstance(agent_meta, dict) else {}


def reply_model(final: dict[str, Any]) -> str | None:
    """The model that ran (``agentMeta.model``), which prices the run's tokens."""
    model = _agent_meta(final).get("model")
    return model if isinstance(model, str) and model else None


def _count(value: object) -> int | None:
    return None if isinstance(value, bool) or not isinstance(value, int) or value < 0 else value


def reply_cache(final: dict[str, Any]) -> tuple[int | None, int | None]:
    """Cache read and write tokens from ``agentMeta.usage {cacheRead, cacheWrite}``."""
    usage = _agent_meta(final).get("usage")
    if not isinstance(usage, dict):
        return None, None
    return _count(usage.get("cacheRead")), _count(usage.get("cacheWrite"))


def reply_usage(final: dict[str, Any]) -> tuple[int | None, int | None]:
    """Tokens in and out from ``result.meta.agentMeta.usage {input, output}``."""
    usage = _agent_meta(final).get("usage")
    if not isinstance(usage, dict):
        return None, None
    return _count(usage.get("input")), _count(usage.get("output"))
