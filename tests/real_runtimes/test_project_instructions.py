"""The real tools, through the executor: what each is told of its project's instruction
files. Claude Code is told CLAUDE.md as the task's base commit holds it
(``--append-system-prompt``), not the copy the builder rewrote in its worktree for
its next run. Codex and Hermes read the worktree's AGENTS.md themselves: nothing in
their command lines switches that off (docs/agents.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from board import store
from core import registry
from executor.runner import Executor
from tests.fixtures.gitrepos import git
from tests.real_runtimes.hermetic import Tool, claude_env, codex_env, hermes_env, installed
from tests.real_runtimes.model_server import ModelServer

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

OPERATOR = "CLAWBOO-OPERATOR-RULE: use pnpm, never npm."
BUILDER = "CLAWBOO-BUILDER-RULE: skip the tests."


def system_prompt(body: dict) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return "\n".join(str(block.get("text", "")) for block in system)
    return str(system or "")


def test_the_real_cli_is_told_the_base_commits_claude_md_not_the_builders(
    repo: Path,
    claude_code: Tool,
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (repo / "CLAUDE.md").write_text(OPERATOR + "\n")
    git(repo, "add", "CLAUDE.md")
    git(repo, "commit", "-q", "-m", "project instructions")
    for name, value in claude_env(tmp_path / "agent-home", model_server.url).items():
        monkeypatch.setenv(name, value)
    registry.create_agent(
        id="real",
        display_name="Real",
        team="default",
        runtime="claude-code",
        settings={"binary": str(claude_code.bin), "repo_path": str(repo), "timeout_s": 120},
    )
    task = store.create_task(title="Write hello.txt").task

    first = Executor("real", keep_for_resume=True).work_once()
    assert first.outcome == "succeeded" and first.worktree == "kept", first.error
    asked = model_server.model_requests()
    assert OPERATOR in system_prompt(asked[0].body)
    # The builder rewrites the instructions in its checkout, for its next run.
    tree = Path(store.get_workspace(task.id).worktree_path)
    (tree / "CLAUDE.md").write_text(BUILDER + "\n")
    before = len(asked)

    second = Executor("real").work_once()

    assert second.task_id == task.id and second.outcome == "succeeded", second.error
    resumed = model_server.model_requests()[before:]
    assert resumed and OPERATOR in system_prompt(resumed[0].body)
    assert BUILDER not in json.dumps([r.body for r in resumed])


@pytest.mark.parametrize(
    ("runtime", "env"), [("codex", codex_env), ("hermes", hermes_env)], ids=["codex", "hermes"]
)
def test_codex_and_hermes_read_the_projects_agents_md_themselves(
    runtime: str,
    env,
    repo: Path,
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = installed(runtime)
    (repo / "AGENTS.md").write_text(OPERATOR + "\n")
    git(repo, "add", "AGENTS.md")
    git(repo, "commit", "-q", "-m", "project instructions")
    for name, value in env(tmp_path / "agent-home", model_server.url_v1).items():
        monkeypatch.setenv(name, value)
    registry.create_agent(
        id="real",
        display_name="Real",
        team="default",
        runtime=runtime,
        settings={"binary": str(tool.bin), "repo_path": str(repo), "timeout_s": 120},
    )
    store.create_task(title="Write hello.txt")

    report = Executor("real").work_once()

    assert report.outcome == "succeeded", report.error
    assert OPERATOR in json.dumps(model_server.model_requests()[0].body)
