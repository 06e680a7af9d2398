from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest
from django.core.management import call_command

from board import store
from core import registry
from tests.fixtures.gitrepos import git
from worktrees import checkouts, service

pytestmark = pytest.mark.django_db

LATER = 100 * 3600  # seconds: well past the 72 h default


@pytest.fixture
def provision(repo, new_task):
    def make(**fields):
        task = new_task(**fields)
        ws = service.provision_task_workspace(task.id, str(repo))
        return task, ws, Path(ws.worktree_path)

    return make


def park(task_id: str) -> None:
    """Move a task out of the active statuses (in_progress → blocked)."""
    store.transition(task_id, "blocked")


def test_old_checkouts_are_reaped_by_age_with_their_work_autosaved(repo, provision):
    task, ws, path = provision()
    (path / "wip.py").write_text("unsaved = True\n")
    park(task.id)

    assert service.gc(now=time.time())["reaped"] == []  # young: kept
    report = service.gc(now=time.time() + LATER)

    assert [r["task_id"] for r in report["reaped"]] == [task.id]
    assert not path.exists()
    assert (
        git(repo, "log", "-1", "--format=%s", ws.branch) == f"clawboo: gc autosave task {task.id}"
    )
    assert git(repo, "show", f"{ws.branch}:wip.py") == "unsaved = True"
    assert store.live_workspace(task.id).status == "stale"


def test_count_policy_keeps_only_the_newest(repo, provision):
    made = []
    for i in range(3):
        task, ws, path = provision(title=f"t{i}")
        park(task.id)
        made.append((task, path))
    base = time.time()
    for age, (_task, path) in zip((3000, 2000, 1000), made, strict=True):
        git_dir = Path(git(path, "rev-parse", "--absolute-git-dir"))
        for target in (path, *git_dir.glob("*"), *git_dir.glob("logs/*")):
            os.utime(target, (base - age, base - age), follow_symlinks=False)

    report = service.gc(keep=1)

    reaped = {r["task_id"] for r in report["reaped"]}
    assert reaped == {made[0][0].id, made[1][0].id}
    assert made[2][1].exists()


def test_an_active_task_is_never_reaped(repo, provision):
    task, ws, path = provision()  # in_progress
    report = service.gc(now=time.time() + LATER)
    assert report["reaped"] == []
    assert report["skipped"] == [{"task_id": task.id, "path": str(path), "reason": "active"}]
    assert path.exists()


def test_a_task_that_turns_active_during_the_sweep_is_skipped(repo, provision, new_task):
    task, ws, path = provision(claim=False)  # todo: a reap candidate at first
    asked: list[str] = []

    def is_active(task_id: str) -> bool:
        asked.append(task_id)
        status = store.get_task(task_id).status
        if len(asked) == 1:
            # Between the first look and the lock, someone claims it.
            assert store.claim(task_id, "bob").outcome == "ok"
        return status in ("in_progress", "in_review")

    report = checkouts.gc_worktrees(is_active, now=time.time() + LATER)

    assert asked == [task.id, task.id]
    assert report.skipped == [{"task_id": task.id, "path": str(path), "reason": "became active"}]
    assert path.exists()


def test_one_failing_checkout_does_not_stop_the_sweep(repo, provision):
    good, _ws, good_path = provision(title="good")
    bad, _ws2, bad_path = provision(title="bad")
    park(good.id)
    park(bad.id)
    (bad_path / ".git").write_text("gitdir: /nonexistent/definitely-not-here\n")

    report = service.gc(now=time.time() + LATER)

    assert [r["task_id"] for r in report["reaped"]] == [good.id]
    assert [f["path"] for f in report["failures"]] == [str(bad_path)]
    assert not good_path.exists()
    assert bad_path.exists()


def test_gc_touches_nothing_outside_the_worktree_root(tmp_path, repo, state_dir, provision):
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    task, _ws, path = provision()
    park(task.id)
    (path.parent / "link-out").symlink_to(victim)

    report = service.gc(now=time.time() + LATER)

    assert (victim / "keep.txt").read_text() == "mine\n"
    assert {"path": str(path.parent / "link-out"), "reason": "not a checkout directory"} in (
        report["skipped"]
    )


def test_a_reaped_stale_workspace_is_rebuilt_from_its_branch(repo, provision):
    task, ws, path = provision()
    (path / "wip.py").write_text("keep me\n")
    park(task.id)
    service.gc(now=time.time() + LATER)
    assert store.live_workspace(task.id).status == "stale"

    registry.create_agent(id="bob", display_name="Bob", team="default", runtime="human")
    store.transition(task.id, "in_progress", agent_id="bob")
    rebuilt = service.resume_task_workspace(task.id)

    assert rebuilt.status == "active"
    assert (path / "wip.py").read_text() == "keep me\n"
    assert rebuilt.base_commit == ws.base_commit
    # Provisioning a stale task also rebuilds rather than resetting the branch.
    assert service.provision_task_workspace(task.id, str(repo)).pk == rebuilt.pk


def test_the_management_command_runs_a_sweep(repo, provision):
    task, _ws, path = provision()
    park(task.id)
    out = io.StringIO()
    call_command("worktrees_gc", "--max-age-hours", "0", stdout=out)
    assert [r["task_id"] for r in json.loads(out.getvalue())["reaped"]] == [task.id]
    assert not path.exists()


def test_bad_gc_parameters_are_refused():
    from core.errors import ValidationFailed

    with pytest.raises(ValidationFailed):
        service.gc(max_age_hours=-1)
    with pytest.raises(ValidationFailed):
        service.gc(keep="many")


def test_old_review_checkouts_are_reaped_and_young_ones_kept(repo, provision):
    task, ws, path = provision()
    review = Path(service.review(task.id)["path"])
    assert review.is_dir()
    park(task.id)

    young = service.gc(now=time.time())
    assert review.is_dir() and not [r for r in young["reaped"] if "review" in r]

    report = service.gc(now=time.time() + LATER)
    assert {"review": review.name, "path": str(review)} in report["reaped"]
    assert not review.exists()
    assert str(review) not in git(repo, "worktree", "list", "--porcelain")
    # The next review simply makes it again (once the reaped task checkout is back).
    service.resume(task.id)
    assert Path(service.review(task.id)["path"]) == review and review.is_dir()


def test_a_checkout_another_host_took_over_is_skipped_with_its_reason_not_failed(
    repo, provision, settings, tmp_path, caplog
):
    """Host A's checkout, on a disk host B does not see, taken over by B (its
    registration let go, :func:`checkouts.take_over_checkouts`): A's directory
    stays, its ``.git`` naming a registration that is gone. A's sweep failed on it
    (``git rev-parse``: not a git repository) at every run, for ever; it is skipped,
    its files (and any work B could not commit) kept, saying why and what to do."""
    task, _ws, path = provision()
    (path / "wip.py").write_text("only on host A\n")
    park(task.id)
    a_disk = tmp_path / "a-disk"
    path.rename(a_disk)  # out of host B's sight
    host_a = settings.CLAWBOO_STATE_DIR
    settings.CLAWBOO_STATE_DIR = str(tmp_path / "host-b")
    assert checkouts.take_over_checkouts(repo, task.id) == [path]
    settings.CLAWBOO_STATE_DIR = host_a
    a_disk.rename(path)  # as host A sees its own disk

    with caplog.at_level("WARNING", logger="worktrees.checkouts"):
        report = service.gc(now=time.time() + LATER)

    assert report["failures"] == [], report
    (skipped,) = [s for s in report["skipped"] if s["path"] == str(path)]
    assert skipped["task_id"] == task.id
    assert "another host took it over" in skipped["reason"]
    assert (path / "wip.py").read_text() == "only on host A\n"
    assert any(
        str(path) in r.getMessage() and "took it over" in r.getMessage() for r in caplog.records
    )


def test_a_checkout_another_host_took_over_and_made_again_is_skipped_not_committed_through_it(
    repo, provision, settings, tmp_path
):
    """As above, and host B made the task's checkout again under its own state dir:
    git names B's registration as it named A's (the task id), so A's leftover
    ``.git`` now leads to B's checkout. A's sweep must not commit A's stale files
    through B's index or remove B's registration: it skips A's directory."""
    task, _ws, path = provision()
    (path / "wip.py").write_text("only on host A\n")
    park(task.id)
    a_disk = tmp_path / "a-disk"
    path.rename(a_disk)
    host_a = settings.CLAWBOO_STATE_DIR
    settings.CLAWBOO_STATE_DIR = str(tmp_path / "host-b")
    b_path = checkouts.resume_worktree(repo, task.id, take_over=True).path
    settings.CLAWBOO_STATE_DIR = host_a
    a_disk.rename(path)
    branch = checkouts.branch_for(task.id)
    tip = git(repo, "rev-parse", branch)

    report = service.gc(now=time.time() + LATER)

    assert report["failures"] == [], report
    assert [s["path"] for s in report["skipped"] if "took it over" in s["reason"]] == [str(path)]
    assert git(repo, "rev-parse", branch) == tip  # nothing committed through B's index
    assert str(b_path) in checkouts.registered_worktrees(repo)
    assert checkouts.checkout_healthy(repo, b_path, branch)
    assert (path / "wip.py").read_text() == "only on host A\n"
