from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from board.errors import IllegalTransition
from tests.fixtures.gitrepos import git
from worktrees import checkouts, service
from worktrees import git as gitmod

pytestmark = pytest.mark.django_db


@pytest.fixture
def provisioned(repo, new_task):
    task = new_task()
    ws = service.provision_task_workspace(task.id, str(repo))
    return task, ws, Path(ws.worktree_path)


def test_pause_and_resume_keep_every_commit_and_uncommitted_edit(repo, provisioned, monkeypatch):
    task, ws, path = provisioned
    (path / "feature.py").write_text("print('v1')\n")
    git(path, "add", "feature.py")
    git(path, "commit", "-qm", "agent work")
    committed = git(path, "rev-parse", "HEAD")
    (path / "feature.py").write_text("print('v2, not committed')\n")
    (path / "notes.txt").write_text("untracked scratch\n")

    paused = service.pause(task.id)

    assert paused.status == "stale"
    assert not path.exists()
    assert str(path) not in git(repo, "worktree", "list", "--porcelain")
    branch = f"clawboo/task-{task.id}"
    assert git(repo, "log", "-1", "--format=%s", branch) == f"clawboo: pause task {task.id}"
    assert git(repo, "merge-base", "--is-ancestor", committed, branch) == ""

    seen: list[list[str]] = []
    real = gitmod.subprocess.run

    def spy(argv, *args, **kwargs):
        seen.append(list(argv))
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(gitmod.subprocess, "run", spy)
    resumed = service.resume(task.id)
    monkeypatch.undo()

    assert resumed.status == "active"
    assert resumed.base_commit == ws.base_commit
    assert resumed.base_sha == ws.base_sha
    assert (path / "feature.py").read_text() == "print('v2, not committed')\n"
    assert (path / "notes.txt").read_text() == "untracked scratch\n"
    adds = [argv for argv in seen if "worktree" in argv and "add" in argv]
    assert adds, "resume must re-attach the branch"
    assert all("-b" not in argv and "-B" not in argv for argv in adds)


def test_resume_recovers_the_baseline_after_later_commits(repo, provisioned):
    task, ws, path = provisioned
    for i in range(3):
        (path / f"w{i}.txt").write_text(f"{i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", f"work {i}")
    service.pause(task.id)
    resumed = service.resume(task.id)
    assert resumed.base_commit == ws.base_commit
    assert service.complete(task.id)["diffstat"]["files_changed"] == 3


def test_resume_of_a_healthy_checkout_changes_nothing(provisioned):
    task, ws, path = provisioned
    (path / "wip.txt").write_text("wip\n")
    again = service.resume(task.id)
    assert again.worktree_path == ws.worktree_path
    assert (path / "wip.txt").exists()


def test_complete_with_only_sor_edits_is_empty_and_cleans_up(repo, provisioned):
    task, ws, path = provisioned
    (path / "task-progress.md").write_text("## Done\n- nothing really\n")
    service.write_handoff(task.id, {"handoffFrom": "ada", "runtime": "codex"})
    (path / "VERIFICATION.md").write_text("n/a\n")
    git(path, "add", "VERIFICATION.md")
    git(path, "commit", "-qm", "bookkeeping")

    out = service.complete(task.id)

    assert out["result"] == "cleaned"
    assert out["diffstat"]["files_changed"] == 0
    assert not path.exists()
    assert git(repo, "branch", "--list", ws.branch) == ""
    fresh = store.get_task(task.id)
    assert fresh.status == "done"
    assert fresh.verdict is None
    assert fresh.worktree_ref is None
    assert fresh.branch_ref is None
    assert store.live_workspace(task.id) is None


def test_an_untracked_new_file_makes_completion_non_empty(repo, provisioned):
    task, ws, path = provisioned
    (path / "new_module.py").write_text("a = 1\nb = 2\n")

    out = service.complete(task.id)

    assert out["result"] == "retained"
    assert out["diffstat"]["files"] == [{"path": "new_module.py", "insertions": 2, "deletions": 0}]
    assert path.exists()
    assert git(repo, "branch", "--list", ws.branch).strip().endswith(ws.branch)
    assert store.get_task(task.id).status == "in_review"
    assert store.live_workspace(task.id).status == "active"


def test_a_checkpointing_completion_commits_retained_work_and_names_the_head(repo, provisioned):
    task, ws, path = provisioned
    (path / "feature.py").write_text("x = 1\n")  # left uncommitted by the runtime

    out = service.complete(task.id, checkpoint=True)

    assert out["result"] == "retained"
    assert out["head"] == git(repo, "rev-parse", ws.branch)
    assert git(path, "log", "-1", "--format=%s") == f"clawboo: checkpoint task {task.id}"
    assert git(path, "status", "--porcelain") == ""


def test_a_checkpointing_completion_of_nothing_commits_nothing(repo, provisioned):
    task, ws, path = provisioned
    service.write_handoff(task.id, {"handoffFrom": "ada", "runtime": "codex"})

    out = service.complete(task.id, checkpoint=True)

    assert out["result"] == "cleaned"
    assert out["head"] == ws.base_commit  # the scaffold commit: no checkpoint was made
    assert git(repo, "branch", "--list", ws.branch) == ""


def test_the_work_diff_lists_odd_untracked_names_skips_ignored_ones_and_names_the_head(
    provisioned,
):
    task, ws, path = provisioned
    (path / "build.log").write_text("ignored\n")  # the repo ignores *.log
    (path / "? not a status line.txt").write_text("one\n")
    (path / "tab\tand\nnewline é.txt").write_text("one\ntwo\n")
    (path / "deep" / "er").mkdir(parents=True)
    (path / "deep" / "er" / "x.py").write_text("x = 1\n")
    # A staged rename whose old name reads like a status line of its own.
    (path / "? committed.txt").write_text("kept\n")
    git(path, "add", "? committed.txt")
    git(path, "commit", "-qm", "agent work")
    git(path, "mv", "? committed.txt", "# branch.oid moved.txt")

    diff = checkouts.work_diff(path, ws.base_commit)

    names = {f["path"] for f in diff.files}
    assert names == {
        "? not a status line.txt",
        "tab\tand\nnewline é.txt",
        "deep/er/x.py",
        "# branch.oid moved.txt",
    }
    assert diff.head == git(path, "rev-parse", "HEAD") != ws.base_commit
    assert (diff.insertions, diff.deletions) == (1 + 2 + 1 + 1, 0)


@pytest.mark.parametrize("how", ["committed", "uncommitted", "deleted"])
def test_committed_uncommitted_and_deleted_changes_all_count(provisioned, how):
    task, ws, path = provisioned
    if how == "deleted":
        (path / "file1.txt").unlink()
    else:
        (path / "file0.txt").write_text("line 0\nmore\n")
        if how == "committed":
            git(path, "commit", "-qam", "edit")
    out = service.complete(task.id)
    assert out["result"] == "retained"
    assert out["diffstat"]["files_changed"] == 1


def test_an_ignored_file_is_not_work(provisioned):
    task, ws, path = provisioned
    (path / "debug.log").write_text("noise\n")
    assert service.complete(task.id)["result"] == "cleaned"


def test_an_illegal_completion_leaves_the_checkout_alone(repo, new_task):
    task = new_task(claim=False)  # todo: cannot jump to done
    ws = service.provision_task_workspace(task.id, str(repo))
    with pytest.raises(IllegalTransition):
        service.complete(task.id)
    assert Path(ws.worktree_path).is_dir()
    assert git(repo, "branch", "--list", ws.branch) != ""


def test_the_review_worktree_is_detached_and_cannot_reach_the_task_branch(repo, provisioned):
    task, ws, path = provisioned
    (path / "feature.py").write_text("x = 1\n")  # left uncommitted by the runtime

    got = service.review(task.id)

    review = Path(got["path"])
    assert git(path, "log", "-1", "--format=%s") == f"clawboo: checkpoint task {task.id}"
    assert got["sha"] == git(repo, "rev-parse", ws.branch)
    assert review.parent.parent.name == "reviews"
    assert review.name == got["sha"][:12]
    assert (review / "feature.py").read_text() == "x = 1\n"
    # Detached: HEAD is no branch, so there is nothing to push.
    assert git(review, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
    # A write attempt commits onto a detached HEAD; the task branch does not move.
    (review / "feature.py").write_text("x = 'tampered'\n")
    git(review, "commit", "-qam", "reviewer tampering")
    assert git(repo, "rev-parse", ws.branch) == got["sha"]
    # Asking again reuses the same checkout.
    assert service.review(task.id)["path"] == got["path"]


def test_paused_checkouts_refuse_complete_until_resumed(provisioned):
    task, ws, path = provisioned
    service.pause(task.id)
    with pytest.raises(Exception, match="resume it first"):
        service.complete(task.id)
    service.resume(task.id)
    assert service.complete(task.id)["result"] == "cleaned"


def test_resume_without_the_branch_is_a_clear_conflict(repo, provisioned):
    task, ws, path = provisioned
    service.pause(task.id)
    git(repo, "branch", "-D", ws.branch)
    with pytest.raises(checkouts.BranchMissing):
        service.resume(task.id)
