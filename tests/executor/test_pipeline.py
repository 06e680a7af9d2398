"""End to end with the `command` runtime on a real repository: claim → worktree →
change → verify → in_review / done, execution rows, failures and dependencies."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from board import store
from board.errors import VerificationRequired
from executor.runner import Executor
from tests.fixtures.runs import VERIFY_OK

pytestmark = pytest.mark.django_db


def test_a_verified_change_lands_in_review_with_its_diffstat(command_agent):
    command_agent("builder", "write")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    report = Executor("builder").work_once()
    assert report.outcome == "succeeded" and report.worktree == "retained"
    assert report.verdict == "pass"
    task = store.get_task(task.id)
    assert task.status == "in_review" and task.verdict == "pass"
    execution = store.list_executions(task.id).get()
    assert execution.status == "succeeded"
    assert (
        execution.git_before and execution.git_after and execution.git_before != execution.git_after
    )
    worktree = Path(task.worktree_ref)
    assert (worktree / "feature.txt").read_text() == "ok\n"
    assert "Verdict: **pass**" in (worktree / "VERIFICATION.md").read_text()
    assert store.transition(task.id, "done").status == "done"


def test_a_change_without_a_verify_command_is_gated_until_a_human_overrides(command_agent):
    command_agent("builder", "bad")
    task = store.create_task(title="Add feature").task
    report = Executor("builder").work_once()
    assert report.outcome == "succeeded" and report.verdict == "fail"
    task = store.get_task(task.id)
    assert task.status == "in_review" and task.verdict == "fail"
    assert task.verdict_evidence == "(none configured)"
    with pytest.raises(VerificationRequired):
        store.transition(task.id, "done")
    done = store.transition(task.id, "done", human_override={"by": "ada", "reason": "ok"})
    assert done.status == "done" and done.human_override["by"] == "ada"


def test_a_run_that_changes_nothing_lands_done_and_cleans_up(command_agent, repo):
    command_agent("builder", "none")
    task = store.create_task(title="Look around", metadata={"verify_cmd": VERIFY_OK}).task
    report = Executor("builder").work_once()
    assert report.outcome == "succeeded" and report.worktree == "cleaned"
    task = store.get_task(task.id)
    assert task.status == "done"
    from tests.fixtures.gitrepos import git

    assert f"clawboo/task-{task.id}" not in git(repo, "branch", "--list")


def test_a_failing_run_soft_fails_back_to_todo_and_keeps_the_worktree(command_agent, tmp_path):
    failing = tmp_path / "fail.py"
    failing.write_text("import sys; print('nope', file=sys.stderr); sys.exit(3)\n")
    command_agent("builder", argv=["python3", str(failing)])
    task = store.create_task(title="Doomed", max_attempts=2).task
    report = Executor("builder").work_once()
    assert report.outcome == "failed" and report.worktree == "kept"
    task = store.get_task(task.id)
    assert task.status == "todo" and task.feedback
    assert store.list_executions(task.id).get().status == "failed"
    second = Executor("builder").work_once()
    assert second.outcome == "failed"
    assert store.get_task(task.id).status == "blocked"  # attempts exhausted: hard fail


def test_a_dependency_chain_runs_in_order(command_agent):
    command_agent("builder", "none")
    first = store.create_task(title="A", file_mutating=False).task
    second = store.create_task(title="B", file_mutating=False, depends_on=[first.id]).task
    executor = Executor("builder")
    assert executor.work_once().task_id == first.id
    assert store.get_task(first.id).status == "done"
    assert executor.work_once().task_id == second.id
    assert store.get_task(second.id).status == "done"
    assert executor.work_once().outcome == "idle"


def test_dispatch_past_the_depth_ceiling_is_refused(command_agent, monkeypatch):
    command_agent("builder", "none")
    root = store.create_task(title="root", file_mutating=False).task
    child = store.create_task(title="child", parent_task_id=root.id, file_mutating=False).task
    grandchild = store.create_task(title="gc", parent_task_id=child.id, file_mutating=False).task
    monkeypatch.setattr("board.ceilings.MAX_DEPTH", 1)
    store.transition(root.id, "backlog")
    store.transition(child.id, "backlog")
    report = Executor("builder").work_once()
    assert report.task_id == grandchild.id and report.outcome == "refused"
    assert "depth" in report.error
    assert store.get_task(grandchild.id).status == "blocked"


def test_the_checkout_carries_the_boards_latest_context(command_agent, tmp_path):
    failing = tmp_path / "fail.py"
    failing.write_text("import sys; sys.exit('compile error in foo.c')\n")
    command_agent("builder", argv=["python3", str(failing)])
    task = store.create_task(title="Retry me", max_attempts=3).task
    Executor("builder").work_once()
    Executor("builder").work_once()
    text = (Path(store.get_task(task.id).worktree_ref) / "TASK.md").read_text()
    assert "attempt 2 of 3" in text and "feedback from the previous attempt" in text
    assert text.count("## Latest from the board") == 1


def test_a_fresh_claim_is_first_beaten_one_interval_later_and_then_every_interval(
    command_agent, tmp_path, monkeypatch
):
    beats: list[str] = []
    real = store.heartbeat

    def counted(task_id: str, ticket: str):
        beats.append(task_id)
        return real(task_id, ticket)

    monkeypatch.setattr(store, "heartbeat", counted)
    command_agent("builder", "none")
    quick = store.create_task(title="Quick", file_mutating=False).task
    # The claim set the lease just now: a run shorter than the interval needs no beat.
    assert Executor("builder", heartbeat_s=60).work_once().outcome == "succeeded"
    assert beats == []

    # A claim taken elsewhere, at a time the executor does not know: beaten at once.
    other = store.create_task(title="Routine", file_mutating=False).task
    held = store.claim(other.id, "builder")
    assert Executor("builder", heartbeat_s=60).run_claimed(other.id, held.ticket).outcome == (
        "succeeded"
    )
    assert beats == [other.id]

    slow = tmp_path / "slow.py"
    slow.write_text("import time; time.sleep(0.5)\n")
    command_agent("plodder", argv=[sys.executable, str(slow)])
    long = store.create_task(title="Long", file_mutating=False).task
    assert Executor("plodder", heartbeat_s=0.1).work_once().outcome == "succeeded"
    assert beats.count(long.id) >= 3
    assert quick.id not in beats
