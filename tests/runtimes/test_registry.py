"""The registry, capabilities, the resume rule, and the human and openclaw seams."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import pytest

from core.models import Runtime
from executor.gateway import GatewayDispatch, GatewayReply
from executor.runtimes import (
    RUNTIMES,
    Capabilities,
    HumanWorkRequired,
    Outcome,
    RunRequest,
    UnknownRuntime,
    adapter_for,
    capabilities,
    resume_id_for,
)
from executor.runtimes.base import usd_to_cents
from executor.runtimes.openclaw import (
    OpenClawAdapter,
)


def test_every_runtime_an_agent_can_name_has_an_adapter() -> None:
    assert set(RUNTIMES) == set(Runtime.values)
    for runtime in RUNTIMES:
        assert adapter_for(runtime).runtime == runtime


def test_capabilities_are_declared_per_runtime() -> None:
    one_shot = Capabilities(integration="one-shot", worktrees=True)
    assert capabilities("command") == one_shot
    # These hand their runs the board's MCP server.
    for runtime in ("claude-code", "codex", "hermes"):
        declared = dataclasses.replace(capabilities(runtime), asks_people=None)
        assert declared == Capabilities("one-shot", worktrees=True, mcp=True)
    # Only Claude Code's runs ask a person about a tool call, by its permission_mode.
    asks = {runtime: capabilities(runtime).asks_people for runtime in RUNTIMES}
    assert [runtime for runtime, rule in asks.items() if rule is not None] == ["claude-code"]
    assert asks["claude-code"].asks({}) == "acceptEdits"
    assert asks["claude-code"].asks({"permission_mode": "dontAsk"}) is None
    assert capabilities("openclaw") == Capabilities(integration="connected", worktrees=False)
    assert capabilities("human").automated is False


def test_an_unknown_runtime_is_refused_by_name() -> None:
    with pytest.raises(UnknownRuntime, match="unknown runtime 'gemini'"):
        adapter_for("gemini")
    with pytest.raises(UnknownRuntime):
        capabilities("gemini")


def test_a_native_session_is_resumed_only_by_the_runtime_that_issued_it() -> None:
    assert resume_id_for("claude-code", "claude-code", "sess-1") == "sess-1"
    assert resume_id_for("codex", "claude-code", "sess-1") is None
    assert resume_id_for("claude-code", None, "sess-1") is None
    assert resume_id_for("claude-code", "claude-code", None) is None
    assert resume_id_for("claude-code", "claude-code", "") is None


@pytest.mark.parametrize(
    ("usd", "cents"),
    [(0.0478, 5), (1.005, 101), (0, 0), ("0.5", 50), (None, None), (True, None), (-1, None)],
)
def test_usd_costs_become_whole_cents_rounded_half_up(usd: object, cents: int | None) -> None:
    assert usd_to_cents(usd) == cents


def test_running_a_human_task_raises_a_clear_refusal(
    make_request: Callable[..., RunRequest],
) -> None:
    with pytest.raises(HumanWorkRequired, match="a human must do it"):
        adapter_for("human").run(make_request())
    assert issubclass(HumanWorkRequired, NotImplementedError)


class FakeGateway:
    """Stands in for the routines app's gateway client."""

    def __init__(self, reply: GatewayReply | Exception) -> None:
        self.reply = reply
        self.calls: list[GatewayDispatch] = []

    def __call__(self, job: GatewayDispatch, cancel: threading.Event) -> GatewayReply:
        self.calls.append(job)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def test_openclaw_hands_the_task_to_the_injected_dispatch_and_maps_success(
    make_request: Callable[..., RunRequest],
) -> None:
    gateway = FakeGateway(GatewayReply(status="ok", run_id="r1", summary="did it", cost_cents=3))

    result = OpenClawAdapter(dispatch=gateway).run(
        make_request(
            settings={"agent_id": "ops", "session_key": "agent:ops:main", "model": "m"},
            attempt_id="exec-7",
            timeout_s=120,
        )
    )

    assert result.outcome is Outcome.SUCCEEDED
    assert result.summary == "did it" and result.cost_cents == 3
    assert result.native_session_id == "agent:ops:main"
    [job] = gateway.calls
    assert job == GatewayDispatch(
        message="Read TASK.md and do it.",
        idempotency_key="clawboo:T-42:exec-7",
        agent_id="ops",
        session_key="agent:ops:main",
        model="m",
        timeout_s=120,
        task_id="T-42",
    )


def test_openclaw_resume_session_overrides_the_configured_session_key(
    make_request: Callable[..., RunRequest],
) -> None:
    gateway = FakeGateway(GatewayReply(status="ok"))

    OpenClawAdapter(dispatch=gateway).run(
        make_request(settings={"session_key": "agent:ops:main"}, resume_session_id="agent:ops:t42")
    )

    assert gateway.calls[0].session_key == "agent:ops:t42"


@pytest.mark.parametrize(
    ("reply", "outcome", "error"),
    [
        (GatewayReply(status="error", error="model refused"), Outcome.FAILED, "model refused"),
        (GatewayReply(status="timeout"), Outcome.TIMED_OUT, "openclaw run timed out after 30s"),
        (GatewayReply(status="weird"), Outcome.FAILED, "openclaw run ended with status 'weird'"),
        (ConnectionError("gateway down"), Outcome.FAILED, "openclaw dispatch failed: gateway down"),
    ],
)
def test_openclaw_maps_gateway_failures_to_results(
    make_request: Callable[..., RunRequest],
    reply: GatewayReply | Exception,
    outcome: Outcome,
    error: str,
) -> None:
    result = OpenClawAdapter(dispatch=FakeGateway(reply)).run(make_request(timeout_s=30))

    assert result.outcome is outcome
    assert result.error == error


def test_openclaw_reports_a_cancelled_run_as_cancelled(
    make_request: Callable[..., RunRequest],
) -> None:
    def dispatch(job: GatewayDispatch, cancel: threading.Event) -> GatewayReply:
        cancel.set()  # as if the executor cancelled while the gateway ran it
        return GatewayReply(status="error", error="aborted")

    result = OpenClawAdapter(dispatch=dispatch).run(make_request())

    assert result.outcome is Outcome.CANCELLED


def test_openclaw_uses_the_gateway_client_and_reports_it_not_configured(
    make_request: Callable[..., RunRequest], settings
) -> None:
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = ""
    result = adapter_for("openclaw").run(make_request())
    assert result.outcome is Outcome.FAILED and "not configured" in result.error


def test_two_attempts_without_an_attempt_id_get_distinct_idempotency_keys(
    make_request: Callable[..., RunRequest],
) -> None:
    gateway = FakeGateway(GatewayReply(status="ok"))
    adapter = OpenClawAdapter(dispatch=gateway)

    adapter.run(make_request())
    adapter.run(make_request())

    assert gateway.calls[0].idempotency_key != gateway.calls[1].idempotency_key
