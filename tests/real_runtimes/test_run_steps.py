"""Acceptance (issue 45): the real Claude Code, Codex and Hermes -- and the real
OpenClaw Gateway -- worked by the executor against the scripted model, which asks
for two tool calls (two writes, the first carrying a secret) and one failing
command: the run's trace holds those steps in order with their names and
statuses, and the secret is masked in what the board stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from board import store
from board.models import ExecutionProcess, RunStep
from core import registry
from executor.runner import Executor
from tests.real_runtimes.gateway import GatewayProcess
from tests.real_runtimes.hermetic import GATEWAY_TOKEN, claude_env, codex_env, hermes_env, installed
from tests.real_runtimes.model_server import ModelServer, Script

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

SECRET = "sk-clawboo-secret-0123456789abcdef"
SCRIPT = Script(
    sequence=["write:notes.txt", "write:hello.txt", "command:false"],
    content=f"API_TOKEN={SECRET}\n",
    board_calls=False,
)
# Per runtime: its environment, whether its endpoint has /v1, the settings the
# agent needs (Claude Code may not run Bash under acceptEdits unless allowed).
RUNTIMES: dict[str, tuple[Callable[..., dict[str, str]], bool, dict[str, object]]] = {
    "claude-code": (claude_env, False, {"allowed_tools": ["Bash"]}),
    "codex": (codex_env, True, {}),
    "hermes": (hermes_env, True, {}),
}


def tool_steps(task_id: str) -> list[RunStep]:
    run = ExecutionProcess.objects.get(task_id=task_id)
    return [
        s for s in RunStep.objects.filter(execution=run).order_by("seq") if s.kind != "model_turn"
    ]


def assert_no_secret(task_id: str) -> None:
    stored = [
        (s.name, s.arguments, s.detail) for s in RunStep.objects.filter(execution__task_id=task_id)
    ]
    assert stored and SECRET not in repr(stored)


@pytest.mark.parametrize("runtime", sorted(RUNTIMES))
def test_a_real_cli_runs_trace_holds_its_tool_calls_and_failing_command_in_order(
    runtime: str, model_server: ModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = installed(runtime)
    make_env, v1, extra = RUNTIMES[runtime]
    env = make_env(tmp_path / "agent-home", model_server.url_v1 if v1 else model_server.url)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    model_server.script = SCRIPT
    registry.create_agent(
        id="real", display_name="Real", team="default", runtime=runtime,
        settings={"binary": str(tool.bin), "timeout_s": 120, **extra},
    )  # fmt: skip
    task = store.create_task(title="Write two files, then run false", file_mutating=False).task

    report = Executor("real").work_once()

    assert report.task_id == task.id, report
    steps = tool_steps(task.id)
    seen = [(s.kind, s.status) for s in steps]
    if runtime == "codex":  # no write tool: the model's writes go through its shell
        assert seen == [("command", "ok"), ("command", "ok"), ("command", "error")], seen
        assert "notes.txt" in steps[0].name and "hello.txt" in steps[1].name
        assert steps[2].name.endswith("false") and "exit code 1" in steps[2].detail
    else:
        write, shell = {"claude-code": ("Write", "Bash"), "hermes": ("write_file", "terminal")}[
            runtime
        ]
        assert [(s.kind, s.name, s.status) for s in steps] == [
            ("file_change", write, "ok"),
            ("file_change", write, "ok"),
            ("command", shell, "error"),
        ], [(s.kind, s.name, s.status, s.detail[:80]) for s in steps]
    assert "***" in repr(steps[0].arguments)
    assert_no_secret(task.id)
    turns = RunStep.objects.filter(execution__task_id=task.id, kind="model_turn")
    assert turns.exists()
    if runtime != "hermes":  # Hermes's store counts tokens per session, not per turn
        assert any((t.tokens_in or 0) > 0 for t in turns)


def test_the_real_openclaw_gateways_tool_items_are_the_runs_steps(
    settings, gateway: GatewayProcess, gateway_model: ModelServer
) -> None:
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = gateway.url
    settings.CLAWBOO_OPENCLAW_TOKEN = GATEWAY_TOKEN
    gateway_model.script = SCRIPT
    registry.create_agent(id="claw", display_name="Claw", team="default", runtime="openclaw")
    task = store.create_task(title="Write two files, then run false", route={"agent": "claw"}).task

    report = Executor("claw").work_once()

    assert report.task_id == task.id, report
    steps = tool_steps(task.id)
    seen = [(s.kind, s.name, s.status) for s in steps]
    assert seen[:2] == [("file_change", "write", "ok"), ("file_change", "write", "ok")], seen
    assert seen[2][0] == "command" and seen[2][2] == "error", (seen, gateway_model.replies())
    assert_no_secret(task.id)
