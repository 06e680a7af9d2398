"""Spend with the real tools against the scripted model: a Claude Code run that keeps
reporting usage is stopped when it passes its 5¢ ceiling (execution ``cancelled``,
``error_class: budget``, no process left), and a Codex run, which reports tokens but
no price, records an ``estimated`` cost from the price table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from board import store
from board.models import CostStatus
from core import registry
from executor.runner import Executor
from tests.executor.test_spend import processes_in
from tests.real_runtimes.hermetic import claude_env, codex_env, installed
from tests.real_runtimes.model_server import ModelServer, Script
from tests.real_runtimes.test_executor_acceptance import VERIFY

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]


@pytest.fixture
def real_agent(
    repo: Path,
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[[str], str]:
    def make(runtime: str) -> str:
        tool = installed(runtime)
        if runtime == "claude-code":
            env = claude_env(tmp_path / "agent-home", model_server.url)
        else:
            env = codex_env(tmp_path / "agent-home", model_server.url_v1)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        registry.create_agent(
            id="real",
            display_name="Real",
            team="default",
            runtime=runtime,
            settings={"binary": str(tool.bin), "repo_path": str(repo), "timeout_s": 180},
        )
        return "real"

    return make


def test_a_claude_code_run_past_its_5_cent_ceiling_is_stopped(
    real_agent: Callable[[str], str], model_server: ModelServer
) -> None:
    model_server.script = Script(keep_going=True)
    task = store.create_task(
        title="Write hello.txt", metadata={"verify_cmd": VERIFY}, max_run_cents=5
    ).task
    report = Executor(real_agent("claude-code")).work_once()

    assert report.outcome == "cancelled", report.error
    execution = store.list_executions(task.id).get()
    assert execution.status == "cancelled" and execution.error_class == "budget"
    assert execution.cost_cents >= 5
    assert execution.cost_status in (CostStatus.ESTIMATED, CostStatus.REPORTED)
    task = store.get_task(task.id)
    assert task.status == "blocked" and task.cost_cents == execution.cost_cents
    # Nothing the run started is left (other sessions may run claude elsewhere).
    assert not processes_in(Path(task.worktree_ref))
    # It was stopped, not finished: the model would have gone on.
    assert "text" not in model_server.replies()


def test_a_codex_run_records_an_estimated_cost(
    real_agent: Callable[[str], str], model_server: ModelServer
) -> None:
    task = store.create_task(title="Write hello.txt", metadata={"verify_cmd": VERIFY}).task
    report = Executor(real_agent("codex")).work_once()

    assert report.outcome == "succeeded", report.error
    execution = store.list_executions(task.id).get()
    assert execution.cost_status == CostStatus.ESTIMATED
    assert execution.cost_cents > 0 and execution.tokens_in > 0
    assert store.get_task(task.id).cost_cents == execution.cost_cents
