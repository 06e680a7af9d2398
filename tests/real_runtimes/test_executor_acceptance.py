"""Acceptance, through the project's own code paths: the executor claims a task, works
it with the real Claude Code, Codex or Hermes on a real git worktree against the
scripted model endpoint, verifies it and lands it -- or records why not.

Each runtime gets the same four cases: a success (the file the model asked for is
written, tokens and native session recorded, the task in review with a passing
verdict), a model auth failure (execution ``failed``, the reason readable), a resume
that continues the same native session, and a timeout (``timed_out``, no process left).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from board import store
from core import registry
from executor.runner import Executor
from tests.real_runtimes.hermetic import (
    Tool,
    claude_env,
    codex_env,
    hermes_env,
    installed,
)
from tests.real_runtimes.model_server import BAD_KEY, ModelServer, Script

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

VERIFY = "grep -qx 'hello from the fake model' hello.txt"


@dataclass(frozen=True)
class Runtime:
    name: str  # the agent's runtime
    tool: str  # the install record's name
    env: Callable[..., dict[str, str]]
    # Where its endpoint lives: with /v1 (OpenAI) or without (Anthropic).
    v1: bool
    # What a successful run's first model reply is.
    tool_call: str


RUNTIMES = {
    "claude-code": Runtime("claude-code", "claude-code", claude_env, False, "tool_call:Write"),
    "codex": Runtime("codex", "codex", codex_env, True, "tool_call:exec_command"),
    "hermes": Runtime("hermes", "hermes", hermes_env, True, "tool_call:write_file"),
}


@pytest.fixture(params=sorted(RUNTIMES))
def runtime(request: pytest.FixtureRequest) -> Runtime:
    return RUNTIMES[request.param]


@pytest.fixture
def tool(runtime: Runtime) -> Tool:
    return installed(runtime.tool)


@pytest.fixture
def agent(
    runtime: Runtime,
    tool: Tool,
    repo: Path,
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., str]:
    """An agent on the real tool; the worker's environment is the tool's hermetic one."""

    def make(*, key: str | None = None, timeout_s: float = 120) -> str:
        url = model_server.url_v1 if runtime.v1 else model_server.url
        env = runtime.env(tmp_path / "agent-home", url, **({"key": key} if key else {}))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        registry.create_agent(
            id="real",
            display_name="Real",
            team="default",
            runtime=runtime.name,
            settings={"binary": str(tool.bin), "repo_path": str(repo), "timeout_s": timeout_s},
        )
        return "real"

    return make


def new_task() -> str:
    return store.create_task(title="Write hello.txt", metadata={"verify_cmd": VERIFY}).task.id


def tool_processes(tool: Tool) -> list[int]:
    """Live processes started from the tool's install folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(tool.prefix) in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def test_success_writes_the_file_records_the_run_and_lands_in_review(
    runtime: Runtime, agent: Callable[..., str], model_server: ModelServer
) -> None:
    task_id = new_task()
    report = Executor(agent()).work_once()

    assert report.outcome == "succeeded", report.error
    assert report.verdict == "pass"
    task = store.get_task(task_id)
    assert task.status == "in_review" and task.verdict == "pass"
    assert (Path(task.worktree_ref) / "hello.txt").read_text() == "hello from the fake model\n"
    execution = store.list_executions(task_id).get()
    assert execution.status == "succeeded"
    assert execution.exit_code == 0
    assert execution.tokens_in > 0 and execution.tokens_out > 0
    assert execution.native_session_id
    assert execution.git_before != execution.git_after
    assert model_server.replies() == [runtime.tool_call, "text"]


def test_a_model_auth_failure_fails_the_execution_with_a_readable_reason(
    agent: Callable[..., str], model_server: ModelServer
) -> None:
    task_id = new_task()
    report = Executor(agent(key=BAD_KEY)).work_once()

    assert report.outcome == "failed"
    execution = store.list_executions(task_id).get()
    assert execution.status == "failed"
    assert "401" in execution.error, execution.error
    task = store.get_task(task_id)
    assert task.status in ("todo", "blocked")  # soft or hard fail, by attempts left
    assert "401" in (task.feedback or "") + (task.error or "")
    assert model_server.replies() == ["401"]


def test_resume_continues_the_same_native_session(
    agent: Callable[..., str], model_server: ModelServer
) -> None:
    task_id = new_task()
    agent_id = agent()
    first = Executor(agent_id, keep_for_resume=True).work_once()
    assert first.outcome == "succeeded" and first.worktree == "kept", first.error
    assert store.get_task(task_id).status == "todo"
    requests_before = len(model_server.model_requests())

    second = Executor(agent_id).work_once()

    assert second.task_id == task_id
    assert second.outcome == "succeeded", second.error
    runs = sorted(store.list_executions(task_id), key=lambda e: e.id)
    assert len(runs) == 2
    assert runs[0].native_session_id and runs[1].native_session_id == runs[0].native_session_id
    # The resumed conversation holds the first run's prompt and tool result.
    resumed = model_server.model_requests()[requests_before:]
    assert resumed and "Write hello.txt" in str(resumed[0].body)
    assert [r.reply for r in resumed] == ["text"]
    # The resumed run is charged its own tokens (Hermes: from its session store).
    assert runs[1].tokens_in > 0 and runs[1].tokens_out > 0, (runs[1].tokens_in, runs[1].tokens_out)
    assert store.get_task(task_id).status == "in_review"


def test_a_hanging_model_times_out_and_leaves_no_process(
    tool: Tool, agent: Callable[..., str], model_server: ModelServer
) -> None:
    model_server.script = Script(failure="hang")
    task_id = new_task()
    report = Executor(agent(timeout_s=6)).work_once()

    assert report.outcome == "timed_out", report.error
    execution = store.list_executions(task_id).get()
    assert execution.status == "timed_out"
    assert "timed out" in execution.error
    assert tool_processes(tool) == []
