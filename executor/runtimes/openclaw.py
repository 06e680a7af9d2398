"""The ``openclaw`` runtime: connected, over the OpenClaw Gateway websocket.

The gateway client (connect handshake, ``agent`` request, ``agent.wait``, lifecycle
events) is :mod:`executor.gateway`. This adapter turns a :class:`RunRequest` into a
:class:`GatewayDispatch`, hands it to the client (or to the ``dispatch=`` callable
given to :class:`OpenClawAdapter`), and maps the :class:`GatewayReply` to a
:class:`RunResult`.

The dispatch callable owns the wait: it must return by ``timeout_s`` (reporting
``status="timeout"``) and should return promptly with any status once ``cancel``
is set; the gateway client aborts the run in the gateway in both cases (a run
outlives its connection there). OpenClaw agents keep their own workspace, so
``worktrees`` is False.

Usage: the gateway streams a run's output tokens (and names its model) while it
goes, and gives input and cache tokens only in its final answer. The streamed
figure feeds the per-run ceiling (``request.on_usage``) as a lower bound of the
run's cost: a ceiling stops the run once its output alone reaches it; the final
answer's full usage replaces it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from executor import gateway
from executor.gateway import GatewayDispatch, GatewayReply
from executor.runtimes.base import (
    Capabilities,
    Outcome,
    OutputCallback,
    RunRequest,
    RunResult,
    RuntimeAdapter,
    UsageSoFar,
    usage_fields,
)
from executor.runtimes.oneshot import SettingsError, setting_str

GatewayDispatchFn = Callable[[GatewayDispatch, threading.Event], GatewayReply]


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
        dispatch = self._dispatch or gateway.adapter_dispatch
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


def openclaw_agent_id(settings: Mapping[str, Any] | None) -> str | None:
    """The OpenClaw agent an agent's runs go to (its ``agent_id`` setting), or None for
    the gateway's default agent (``main``): a Clawboo agent id means nothing there."""
    return setting_str(settings or {}, "agent_id")


def gateway_dispatch_for(request: RunRequest) -> GatewayDispatch:
    settings = request.settings
    # Same attempt, same key: a retried send after a dropped socket is not a second run.
    attempt = request.attempt_id or uuid.uuid4().hex
    return GatewayDispatch(
        message=request.prompt,
        idempotency_key=f"clawboo:{request.task_id}:{attempt}",
        agent_id=openclaw_agent_id(settings),
        session_key=request.resume_session_id or setting_str(settings, "session_key"),
        model=setting_str(settings, "model"),
        timeout_s=request.timeout_s,
        task_id=request.task_id,
        on_usage=_usage_feed(request),
        on_step=request.on_step,
    )


def _usage_feed(request: RunRequest) -> gateway.UsageCallback | None:
    """The gateway's streamed usage as the executor's running totals (output only)."""
    report = request.on_usage
    if report is None:
        return None
    fallback = setting_str(request.settings, "model")

    def feed(tokens_out: int, model: str | None) -> None:
        report(UsageSoFar(tokens_out=tokens_out, model=model or fallback))

    return feed


def result_from_reply(reply: GatewayReply, *, cancelled: bool, job: GatewayDispatch) -> RunResult:
    result = RunResult(
        outcome=Outcome.FAILED,
        native_session_id=reply.session_key or job.session_key,
        summary=reply.summary,
        **{**usage_fields(reply), "model": reply.model or job.model},
    )
    if cancelled or reply.status == "cancelled":
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
