"""The ``openclaw`` runtime: connected, over the OpenClaw Gateway websocket.

The gateway client (connect handshake, ``agent`` request, ``agent.wait``, lifecycle
events) lives in the routines app. This adapter is the seam between it and the
executor: it turns a :class:`RunRequest` into a :class:`GatewayDispatch`, hands it
to an injected *dispatch* callable, and maps the :class:`GatewayReply` to a
:class:`RunResult`. Wire the real client once at startup with
:func:`wire_gateway_dispatch`, or pass ``dispatch=`` to :class:`OpenClawAdapter`.

The dispatch callable owns the wait: it must return by ``timeout_s`` (reporting
``status="timeout"``) and should return promptly with any status once ``cancel``
is set. OpenClaw agents keep their own workspace, so ``worktrees`` is False.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from clawboo.runtimes.base import (
    Capabilities,
    Outcome,
    OutputCallback,
    RunRequest,
    RunResult,
    RuntimeAdapter,
)
from clawboo.runtimes.oneshot import SettingsError, setting_str


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


@dataclass
class GatewayReply:
    """The run's end as the gateway reported it."""

    status: str  # "ok" | "error" | "timeout"
    run_id: str | None = None
    summary: str = ""
    error: str = ""
    session_key: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_cents: int | None = None


GatewayDispatchFn = Callable[[GatewayDispatch, threading.Event], GatewayReply]

_wired_dispatch: GatewayDispatchFn | None = None


def wire_gateway_dispatch(dispatch: GatewayDispatchFn | None) -> None:
    """Install (or, with None, remove) the process-wide gateway dispatch callable."""
    global _wired_dispatch
    _wired_dispatch = dispatch


class OpenClawAdapter(RuntimeAdapter):
    runtime = "openclaw"
    capabilities = Capabilities(integration="connected", worktrees=False)

    def __init__(self, dispatch: GatewayDispatchFn | None = None) -> None:
        self._dispatch = dispatch

    def run(
        self,
        request: RunRequest,
        *,
        cancel: threading.Event | None = None,
        on_output: OutputCallback | None = None,
    ) -> RunResult:
        dispatch = self._dispatch or _wired_dispatch
        if dispatch is None:
            return RunResult(
                outcome=Outcome.FAILED,
                error="openclaw gateway client is not wired (wire_gateway_dispatch)",
            )
        try:
            job = gateway_dispatch_for(request)
        except SettingsError as exc:
            return RunResult(outcome=Outcome.FAILED, error=f"bad openclaw settings: {exc}")
        cancel = cancel or threading.Event()
        try:
            reply = dispatch(job, cancel)
        except Exception as exc:  # a gateway/network failure is a failed run, not a crash
            return RunResult(outcome=Outcome.FAILED, error=f"openclaw dispatch failed: {exc}")
        return result_from_reply(reply, cancelled=cancel.is_set(), job=job)


def gateway_dispatch_for(request: RunRequest) -> GatewayDispatch:
    settings = request.settings
    # Same attempt, same key: a retried send after a dropped socket is not a second run.
    attempt = request.attempt_id or uuid.uuid4().hex
    return GatewayDispatch(
        message=request.prompt,
        idempotency_key=f"clawboo:{request.task_id}:{attempt}",
        agent_id=setting_str(settings, "agent_id"),
        session_key=request.resume_session_id or setting_str(settings, "session_key"),
        model=setting_str(settings, "model"),
        timeout_s=request.timeout_s,
        task_id=request.task_id,
    )


def result_from_reply(reply: GatewayReply, *, cancelled: bool, job: GatewayDispatch) -> RunResult:
    result = RunResult(
        outcome=Outcome.FAILED,
        native_session_id=reply.session_key or job.session_key,
        tokens_in=reply.tokens_in,
        tokens_out=reply.tokens_out,
        cost_cents=reply.cost_cents,
        summary=reply.summary,
    )
    if cancelled:
        result.outcome = Outcome.CANCELLED
        result.error = "cancelled"
    elif reply.status == "ok":
        result.outcome = Outcome.SUCCEEDED
    elif reply.status == "timeout":
        result.outcome = Outcome.TIMED_OUT
        result.error = reply.error or f"openclaw run timed out after {job.timeout_s:g}s"
    else:
        result.error = reply.error or f"openclaw run ended with status {reply.status!r}"
    return result
