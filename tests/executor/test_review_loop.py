"""The review loop end to end, on real repositories with the `command` runtime: see
the work, send it back, approve it and land it on the base branch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from board import store
from board.errors import ClaimRequired, IllegalTransition
from executor.runner import Executor
from tests.fixtures.gitrepos import git
from tests.fixtures.runs import VERIFY_OK
from worktrees import review, service
from worktrees.scaffold import SOR_FILES

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def unjudged(settings):
    """These tests are about review and landing; the judge has its own
    (tests/executor/test_judge.py): a task without a verify command lands unjudged."""
    settings.CLAWBOO_VERIFY_REQUIRED = False


# Each run adds the next step file, so a task that did not start from its
# dependency's change would write step1.txt again (and conflict on landing).
STEP_SCRIPT = """
import pathlib
here = pathlib.Path.cwd()
n = len(list(here.glob("step*.txt"))) + 1
(here / f"step{n}.txt").write_text(f"step {n}\\n")
print("wrote step", n, "seeing", sorted(p.name for p in here.glob("step*.txt")))
"""

# First round writes first.txt; a run whose TASK.md carries feedback writes second.txt.
ROUNDS_SCRIPT = """
import pathlib
here = pathlib.Path.cwd()
brief = (here / "TASK.md").read_text()
if "feedback" in brief and "add a second file" in brief:
    (here / "second.txt").write_text("second\\n")
    print("second round")
else:
    (here / "first.txt").write_text("first\\n")
    print("first round")
"""


def _agent(command_agent, tmp_path: Path, name: str, script: str):
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    return command_agent(name, argv=[sys.executable, str(path)])


def _main_log(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s%x09%b", "main").splitlines()


def test_a_chain_of_three_lands_three_commits_in_dependency_order(command_agent, repo, tmp_path):
    _agent(command_agent, tmp_path, "builder", STEP_SCRIPT)
    first = store.create_task(title="Step one").task
    second = store.create_task(title="Step two", depends_on=[first.id]).task
    third = store.create_task(title="Step three", depends_on=[second.id]).task
    base = git(repo, "rev-parse", "main")
    seen_in_second = None
    for task in (first, second, third):
        report = Executor("builder").work_once()
        assert report.task_id == task.id and report.worktree == "retained"
        checkout = Path(store.get_task(task.id).worktree_ref)
        if task is second:
            seen_in_second = (checkout / "step1.txt").exists()
        result = service.approve(task.id, by="reviewer")
        assert result["result"] == "landed", result
        assert store.get_task(task.id).status == "done"
        assert not checkout.exists()  # the workspace is cleaned
        assert f"clawboo/task-{task.id}" not in git(repo, "branch", "--list")
        assert store.live_workspace(task.id) is None
    assert seen_in_second, "the second task's worktree did not contain the first's change"
    commits = git(repo, "rev-list", "--reverse", f"{base}..main").splitlines()
    assert len(commits) == 3
    messages = [git(repo, "log", "-1", "--format=%B", sha) for sha in commits]
    for message, task in zip(messages, (first, second, third), strict=True):
        assert task.title in message and f"clawboo: land task {task.id}" in message
    tree = git(repo, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert {"step1.txt", "step2.txt", "step3.txt"} <= set(tree)
    assert not set(SOR_FILES) & set(tree)
    # No system-of-record file anywhere in the base branch's history either.
    for name in SOR_FILES:
        assert git(repo, "log", "--format=%H", "main", "--", name) == ""
    # The user's checkout of main moved with it (fast-forwarded, clean).
    assert (repo / "step3.txt").read_text() == "step 3\n"
    assert git(repo, "status", "--porcelain") == ""


def test_requested_changes_resume_the_same_worktree_with_the_feedback(
    command_agent, repo, tmp_path
):
    _agent(command_agent, tmp_path, "builder", ROUNDS_SCRIPT)
    task = store.create_task(title="Two rounds", metadata={"verify_cmd": "test -f first.txt"}).task
    assert Executor("builder").work_once().worktree == "retained"
    before = store.get_task(task.id)
    checkout, branch = before.worktree_ref, before.branch_ref
    assert before.status == "in_review" and before.verdict == "pass"

    sent = store.request_changes(task.id, "please add a second file", by="reviewer")
    assert sent.task.status == "in_progress" and sent.task.assignee_agent_id == "builder"
    assert sent.task.lease_until is not None and sent.task.attempts == before.attempts + 1
    assert sent.task.feedback == "please add a second file"
    assert any("Changes requested" in c.body for c in store.list_comments(task.id))

    report = Executor("builder").work_once()  # re-claimed: the agent's executor picks it up
    assert report.task_id == task.id and report.outcome == "succeeded"
    again = store.get_task(task.id)
    assert again.status == "in_review"
    assert (again.worktree_ref, again.branch_ref) == (checkout, branch)
    brief = (Path(checkout) / "TASK.md").read_text()
    assert "feedback from the previous attempt: please add a second file" in brief
    assert [e.attempt for e in store.list_executions(task.id)] == [2, 1]

    seen = review.review_of(again)
    assert [f["path"] for f in seen["diff"]["files"]] == ["first.txt", "second.txt"]

    result = service.approve(task.id, by="reviewer")
    assert result["result"] == "landed"
    landed = git(repo, "show", "--name-only", "--format=", "main").splitlines()
    assert sorted(landed) == ["first.txt", "second.txt"]  # both rounds, one commit


def test_a_conflicting_change_is_not_landed_and_goes_back_with_the_paths(command_agent, repo):
    command_agent("builder", argv=[sys.executable, "-c", _EDIT_FILE0])
    task = store.create_task(title="Edit file0").task
    assert Executor("builder").work_once().worktree == "retained"
    (repo / "file0.txt").write_text("changed on main meanwhile\n")
    git(repo, "commit", "-qam", "someone else")
    tip = git(repo, "rev-parse", "main")

    result = service.approve(task.id, by="reviewer")

    assert result["result"] == "conflict" and result["conflicts"] == ["file0.txt"]
    assert git(repo, "rev-parse", "main") == tip  # nothing on the base branch changed
    assert git(repo, "status", "--porcelain") == ""
    back = store.get_task(task.id)
    assert back.status == "in_progress" and back.assignee_agent_id == "builder"
    assert "conflict" in back.feedback and "file0.txt" in back.feedback
    ws = store.live_workspace(task.id)
    assert ws.landing["conflicts"] == ["file0.txt"] and Path(ws.worktree_path).is_dir()


def test_a_repository_can_park_conflicts_as_blocked(command_agent, repo):
    command_agent("builder", argv=[sys.executable, "-c", _EDIT_FILE0])
    git(repo, "config", "clawboo.onConflict", "block")
    task = store.create_task(title="Edit file0").task
    Executor("builder").work_once()
    (repo / "file0.txt").write_text("changed on main meanwhile\n")
    git(repo, "commit", "-qam", "someone else")
    result = service.approve(task.id, by="reviewer")
    assert result["sent"] == "blocked"
    blocked = store.get_task(task.id)
    assert blocked.status == "blocked" and "file0.txt" in blocked.feedback


def test_a_repository_can_land_as_a_merge(command_agent, repo, tmp_path):
    _agent(command_agent, tmp_path, "builder", STEP_SCRIPT)
    git(repo, "config", "clawboo.landing", "merge")
    task = store.create_task(title="Merged").task
    Executor("builder").work_once()
    (repo / "other.txt").write_text("meanwhile\n")
    git(repo, "add", "other.txt")
    git(repo, "commit", "-qm", "meanwhile")
    result = service.approve(task.id, by="reviewer")
    assert result["result"] == "landed" and result["strategy"] == "merge"
    parents = git(repo, "log", "-1", "--format=%P", "main").split()
    assert len(parents) == 2
    # The merged side is the work rebuilt as one commit: no SoR file in its history.
    assert git(repo, "log", "--format=%H", "main", "--", *SOR_FILES) == ""
    assert f"clawboo: land task {task.id}" in git(repo, "log", "-1", "--format=%B", "main")


def test_approval_is_refused_outside_review_and_by_the_gate(command_agent, repo, settings):
    settings.CLAWBOO_VERIFY_REQUIRED = True
    command_agent("builder", "bad")
    task = store.create_task(title="Red").task  # fail (none configured)
    Executor("builder").work_once()
    tip = git(repo, "rev-parse", "main")
    from board.errors import VerificationRequired

    with pytest.raises(VerificationRequired):
        service.approve(task.id, by="reviewer")
    assert git(repo, "rev-parse", "main") == tip
    result = service.approve(
        task.id, by="reviewer", human_override={"by": "ada", "reason": "known flake"}
    )
    assert result["result"] == "landed"
    assert store.get_task(task.id).human_override["by"] == "ada"
    with pytest.raises(IllegalTransition):
        service.approve(task.id, by="reviewer")


def test_the_review_shows_diff_log_cost_evidence_branch_and_base(command_agent, repo):
    command_agent("builder", "write")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    Executor("builder").work_once()
    task = store.get_task(task.id)
    seen = review.review_of(task)
    assert seen["workspace"]["branch"] == f"clawboo/task-{task.id}"
    assert seen["workspace"]["base_branch"] == "main"
    assert seen["diff"]["source"] == "checkout"
    assert seen["diff"]["stat"] == {"files_changed": 1, "insertions": 1, "deletions": 0}
    (entry,) = seen["diff"]["files"]
    assert entry["path"] == "feature.txt" and "+ok" in entry["patch"]
    assert not any(f["path"] in SOR_FILES for f in seen["diff"]["files"])
    assert seen["verification"]["verdict"] == "pass" and seen["verification"]["evidence"]
    (run,) = seen["executions"]
    assert "did write" in run["log_tail"] and "tokens" in run
    assert seen["cost"] == {
        "tokens": task.cost_tokens,
        "cents": task.cost_cents,
        "tree_tokens": task.tree_cost_tokens,
        "tree_cents": task.tree_cost_cents,
    }
    # Paged and capped.
    capped = review.review_of(task, max_bytes=10)
    assert capped["diff"]["files"][0]["truncated"] is True
    assert len(capped["diff"]["files"][0]["patch"]) == 10
    whole = review.review_of(task, path="feature.txt", max_bytes=10)
    assert whole["diff"]["files"][0]["truncated"] is True
    service.approve(task.id, by="reviewer")
    after = review.review_of(store.get_task(task.id))
    assert after["diff"]["source"] == "landed"
    assert [f["path"] for f in after["diff"]["files"]] == ["feature.txt"]


def test_a_task_requeued_from_blocked_is_claimable_again(command_agent):
    command_agent("builder", "none")
    task = store.create_task(title="Hard fail").task
    assert store.claim(task.id, "builder", "command").ok
    store.fail(task.id, "exploded")
    parked = store.get_task(task.id)
    assert parked.status == "blocked" and parked.assignee_agent_id == "builder"
    store.transition(task.id, "todo")
    fresh = store.get_task(task.id)
    assert (fresh.assignee_agent_id, fresh.assignee_runtime, fresh.verdict) == (None, None, None)
    got = store.claim_next("someone-else")
    assert got is not None and got.task.id == task.id


def test_a_move_into_in_progress_without_an_agent_is_refused(command_agent):
    command_agent("builder", "none")
    task = store.create_task(title="Parked").task
    store.transition(task.id, "blocked")
    with pytest.raises(ClaimRequired):
        store.transition(task.id, "in_progress")
    moved = store.transition(task.id, "in_progress", agent_id="builder")
    assert moved.assignee_agent_id == "builder" and moved.assignee_runtime == "command"
    # The agent's executor picks the claim up and runs it.
    report = Executor("builder").work_once()
    assert report.task_id == task.id and report.outcome == "succeeded"


_EDIT_FILE0 = "import pathlib; pathlib.Path('file0.txt').write_text('changed by the agent\\n')"


def test_an_empty_diff_lands_done_under_the_named_waiver_keeping_its_verdict(command_agent):
    command_agent("builder", "none")
    task = store.create_task(title="Look around", metadata={"verify_cmd": VERIFY_OK}).task
    report = Executor("builder").work_once()
    assert report.worktree == "cleaned" and report.verdict == "fail"
    done = store.get_task(task.id)
    # The gate's one exception (board.store.moves.EMPTY_DIFF): done, verdict kept as it was.
    assert done.status == "done" and done.verdict == "fail"


# The first round edits file0.txt; a round sent back for a conflict brings its branch
# up to date (git merge main) and resolves file0.txt, as the feedback says.
CONFLICT_ROUNDS_SCRIPT = """
import pathlib, subprocess
here = pathlib.Path.cwd()
if "conflict" in (here / "TASK.md").read_text():
    subprocess.run(["git", "merge", "-q", "main"], capture_output=True)
    (here / "file0.txt").write_text("changed by the agent, on top of main\\n")
    subprocess.run(["git", "add", "file0.txt"], check=True)
    subprocess.run(["git", "commit", "-qm", "resolved", "--no-edit"], check=True)
    print("resolved")
else:
    (here / "file0.txt").write_text("changed by the agent\\n")
"""


def test_a_fix_round_that_resolved_a_conflict_is_reviewed_without_the_old_conflict_mark(
    command_agent, repo, tmp_path
):
    _agent(command_agent, tmp_path, "builder", CONFLICT_ROUNDS_SCRIPT)
    task = store.create_task(title="Edit file0").task
    assert Executor("builder").work_once().worktree == "retained"
    (repo / "file0.txt").write_text("changed on main meanwhile\n")
    git(repo, "commit", "-qam", "someone else")
    assert service.approve(task.id, by="reviewer")["result"] == "conflict"

    report = Executor("builder").work_once()  # the fix round, in the same worktree
    assert report.task_id == task.id and report.outcome == "succeeded", report
    again = store.get_task(task.id)
    assert again.status == "in_review"
    # The review panel marks the work "conflict" while its workspace's landing says
    # so: the approval that conflicted was about the work before this round.
    seen = review.review_of(again)
    assert (seen["workspace"]["landing"] or {}).get("result") != "conflict", seen["workspace"]
    result = service.approve(task.id, by="reviewer")
    assert result["result"] == "landed", result
    assert git(repo, "show", "main:file0.txt") == "changed by the agent, on top of main"
