"""GOVERNANCE §6: what runs on the server is an operator's decision. The session a
run resumes is read from the task's handoff (``AGENT_HANDOFF.json``
``nativeSessionId``), a file in the builder's own checkout that it may rewrite (and
``POST …/workspace/handoff`` and MCP ``write_handoff`` write). Codex takes the id as
an argument of its own (``codex exec … resume <id>``): an "id" that is an option
(``--last``, ``-c sandbox_mode=…``) became a flag of the builder's next run, chosen
by the builder over the operator's settings. A session id that is not an id's shape,
or that no run of the task recorded, is now not resumed: the run starts fresh from
the handoff's notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from board import store
from core import registry
from executor.runner import Executor
from executor.runtimes import resume_id_for
from tests.runtimes.stand_ins import install_stand_in, real_lines
from worktrees import handoff

OPTIONS = [
    "--last",
    "-csandbox_mode=danger-full-access",
    "--dangerously-bypass-approvals-and-sandbox",
    "-",
    "a b",
]


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory


def codex_agents(repo: Path, *agent_ids: str) -> None:
    for agent_id in agent_ids:
        registry.create_agent(
            id=agent_id,
            display_name=agent_id,
            team="default",
            runtime="codex",
            settings={"repo_path": str(repo)},
        )


@pytest.mark.parametrize("planted", OPTIONS)
def test_a_session_id_that_is_not_an_id_is_not_resumed(planted) -> None:
    assert resume_id_for("codex", "codex", planted) is None
    assert resume_id_for("claude-code", "claude-code", planted) is None


@pytest.mark.parametrize(
    "session",
    [
        "01a230a7-5848-7f81-8306-aaf76b3e470c",
        "agent:ops:t42",
        "20250101_123456_abcdef",
        "sess-1",
    ],
)
def test_a_runtimes_own_session_ids_are_resumed(session) -> None:
    assert resume_id_for("codex", "codex", session) == session


@pytest.mark.django_db
def test_the_builders_handoff_puts_no_option_on_its_next_runs_command_line(repo, bin_dir):
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines("codex/run1-write-file.jsonl"))
    codex_agents(repo, "cx", "cx2")
    task = store.create_task(title="Hand me over").task
    first = Executor("cx", keep_for_resume=True).work_once()
    assert first.outcome == "succeeded" and first.worktree == "kept"
    tree = Path(store.get_workspace(task.id).worktree_path)
    doc = handoff.read_handoff(tree)
    assert doc["runtime"] == "codex" and doc["nativeSessionId"]
    # The builder rewrites its own checkout's handoff.
    raw = json.loads((tree / "AGENT_HANDOFF.json").read_text())
    raw["nativeSessionId"] = "-csandbox_mode=danger-full-access"
    (tree / "AGENT_HANDOFF.json").write_text(json.dumps(raw))

    second = Executor("cx2").work_once()
    assert second.task_id == task.id and second.outcome == "succeeded"
    argv = codex.call()["argv"]
    assert "-csandbox_mode=danger-full-access" not in argv
    assert "resume" not in argv
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"


@pytest.mark.django_db
def test_a_run_resumes_only_a_session_its_tasks_own_runs_had(repo, bin_dir):
    """An id's shape is not enough: another run's session (another agent's Codex
    thread, the gateway's ``agent:main:main``), named in the builder's handoff, would
    carry the builder's run into a conversation it was never part of. The session a
    run resumes is one a run of the same task recorded (its execution's
    ``native_session_id``)."""
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines("codex/run1-write-file.jsonl"))
    codex_agents(repo, "cx", "cx2", "cx3")
    task = store.create_task(title="Hand me over").task
    Executor("cx", keep_for_resume=True).work_once()
    tree = Path(store.get_workspace(task.id).worktree_path)
    recorded = handoff.read_handoff(tree)["nativeSessionId"]
    raw = json.loads((tree / "AGENT_HANDOFF.json").read_text())
    raw["nativeSessionId"] = "0199a213-0000-7000-8000-00000000beef"
    (tree / "AGENT_HANDOFF.json").write_text(json.dumps(raw))

    Executor("cx2", keep_for_resume=True).work_once()
    argv = codex.call()["argv"]
    assert "resume" not in argv and "0199a213-0000-7000-8000-00000000beef" not in argv

    # The session the task's own run had is resumed, as before.
    raw = json.loads((tree / "AGENT_HANDOFF.json").read_text())
    raw["nativeSessionId"] = recorded
    (tree / "AGENT_HANDOFF.json").write_text(json.dumps(raw))
    Executor("cx3").work_once()
    argv = codex.call()["argv"]
    assert argv[argv.index("resume") + 1] == recorded
