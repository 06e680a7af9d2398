from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from board import store
from board.errors import NotFileMutating
from core.errors import ValidationFailed
from tests.fixtures.gitrepos import git, make_repo
from worktrees import checkouts, service
from worktrees.scaffold import SCAFFOLD_FILES

pytestmark = pytest.mark.django_db


def test_it_branches_from_head_and_ignores_the_dirty_tree(repo, new_task):
    task = new_task()
    head = git(repo, "rev-parse", "HEAD")
    (repo / "file0.txt").write_text("uncommitted edit\n")
    (repo / "stray.txt").write_text("untracked\n")
    git(repo, "add", "file0.txt")

    ws = service.provision_task_workspace(task.id, str(repo))

    path = Path(ws.worktree_path)
    assert ws.base_sha == head
    assert ws.branch == f"clawboo/task-{task.id}"
    assert (path / "file0.txt").read_text() == "line 0\n"
    assert not (path / "stray.txt").exists()
    # The user's repo is untouched and its status does not see the checkout.
    assert (repo / "file0.txt").read_text() == "uncommitted edit\n"
    assert "clawboo" not in git(repo, "status", "--porcelain")


def test_the_checkout_lives_under_the_state_dir_namespaced_by_repo(repo, state_dir, new_task):
    task = new_task()
    ws = service.provision_task_workspace(task.id, str(repo))
    expected = state_dir / "worktrees" / checkouts.repo_hash(repo) / task.id
    assert Path(ws.worktree_path) == expected
    assert len(checkouts.repo_hash(repo)) == 12
    fresh = store.get_task(task.id)
    assert fresh.worktree_ref == str(expected)
    assert fresh.branch_ref == ws.branch
    assert ws.status == "active"


def test_the_scaffold_commit_is_the_baseline(repo, new_task):
    task = new_task(description="Make login work", goal="tests pass", context="flaky CI")
    ws = service.provision_task_workspace(task.id, str(repo))
    path = Path(ws.worktree_path)

    assert git(path, "rev-parse", "HEAD") == ws.base_commit
    assert git(path, "log", "-1", "--format=%s") == f"clawboo: scaffold task {task.id}"
    assert git(path, "log", "-1", "--format=%an <%ae>") == "clawboo <clawboo@localhost>"
    assert git(path, "rev-parse", "HEAD^") == ws.base_sha
    committed = set(git(path, "show", "--name-only", "--format=", "HEAD").splitlines())
    assert committed == set(SCAFFOLD_FILES)
    assert not (path / "AGENT_HANDOFF.json").exists()
    init = (path / "init.sh").read_text()
    assert "set -euo pipefail" in init
    for slot in ("INSTALL_CMD=", "VERIFY_CMD=", "START_CMD="):
        assert slot in init
    assert os.stat(path / "init.sh").st_mode & stat.S_IXUSR
    assert "Make login work" in (path / "TASK.md").read_text()
    assert git(path, "status", "--porcelain") == ""


def test_the_scaffold_commit_skips_the_repos_hooks(repo, new_task):
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 1\n")
    hook.chmod(0o755)
    ws = service.provision_task_workspace(new_task().id, str(repo))
    assert ws.base_commit


def test_init_sh_runs_and_fails_loud(repo, new_task):
    import subprocess

    path = Path(service.provision_task_workspace(new_task().id, str(repo)).worktree_path)
    ok = subprocess.run(["./init.sh"], cwd=path, capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stderr
    text = (path / "init.sh").read_text().replace("VERIFY_CMD=''", "VERIFY_CMD='false'")
    (path / "init.sh").write_text(text)
    bad = subprocess.run(["./init.sh"], cwd=path, capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0


def test_it_branches_from_an_explicit_base_sha_or_base_ref(repo, new_task):
    first = git(repo, "rev-parse", "HEAD")
    (repo / "file0.txt").write_text("second\n")
    git(repo, "commit", "-qam", "second")
    git(repo, "tag", "v1", first)

    by_sha = service.provision_task_workspace(new_task().id, str(repo), base_sha=first[:10])
    by_ref = service.provision_task_workspace(new_task().id, str(repo), base_ref="v1")
    assert by_sha.base_sha == first
    assert by_ref.base_sha == first
    with pytest.raises(ValidationFailed) as err:
        service.provision_task_workspace(new_task().id, str(repo), base_ref="no-such-branch")
    assert err.value.field == "base_ref"


def test_it_recovers_from_a_leftover_directory(repo, new_task):
    task = new_task()
    path = checkouts.worktree_path_for(repo, task.id)
    path.mkdir(parents=True)
    (path / "junk.txt").write_text("left behind by a crash\n")

    ws = service.provision_task_workspace(task.id, str(repo))

    assert Path(ws.worktree_path) == path
    assert not (path / "junk.txt").exists()
    assert checkouts.checkout_healthy(repo, path, ws.branch)


def test_it_recovers_from_a_stale_registration(repo, new_task):
    task = new_task()
    path = checkouts.worktree_path_for(repo, task.id)
    path.parent.mkdir(parents=True)
    git(repo, "worktree", "add", "-q", "--detach", str(path), "HEAD")
    shutil.rmtree(path)  # registered with git, gone from disk
    assert str(path) in git(repo, "worktree", "list", "--porcelain")

    ws = service.provision_task_workspace(task.id, str(repo))

    assert checkouts.checkout_healthy(repo, path, ws.branch)
    listed = git(repo, "worktree", "list", "--porcelain").count(f"worktree {path}\n")
    assert listed == 1


def test_an_existing_branch_at_the_branch_point_is_reused(repo, new_task):
    task = new_task()
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", f"clawboo/task-{task.id}", head)

    ws = service.provision_task_workspace(task.id, str(repo))

    assert ws.base_sha == head
    assert git(repo, "rev-parse", f"{ws.branch}^") == head


def test_an_existing_branch_elsewhere_is_reset_to_the_branch_point(repo, new_task):
    task = new_task()
    head = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", f"clawboo/task-{task.id}")
    (repo / "old.txt").write_text("from an earlier life\n")
    git(repo, "add", "old.txt")
    git(repo, "commit", "-qm", "old")
    git(repo, "checkout", "-q", "main")

    ws = service.provision_task_workspace(task.id, str(repo), base_sha=head)

    assert git(repo, "rev-parse", f"{ws.branch}^") == head
    assert not (Path(ws.worktree_path) / "old.txt").exists()


def test_provisioning_again_returns_the_same_workspace(repo, new_task):
    task = new_task()
    first = service.provision_task_workspace(task.id, str(repo))
    again = service.provision_task_workspace(task.id, str(repo))
    assert again.pk == first.pk
    assert again.base_commit == first.base_commit


def test_a_non_file_mutating_task_is_refused(repo, new_task):
    task = new_task(file_mutating=False)
    with pytest.raises(NotFileMutating) as err:
        service.provision_task_workspace(task.id, str(repo))
    assert err.value.code == "not_file_mutating"
    assert not (Path(checkouts.worktree_root())).exists()


def test_a_repo_outside_the_allowed_roots_is_refused(tmp_path, repos_root, state_dir, new_task):
    outside = make_repo(tmp_path / "elsewhere")
    with pytest.raises(ValidationFailed) as err:
        service.provision_task_workspace(new_task().id, str(outside))
    assert err.value.field == "repo_path"
    assert err.value.code == "validation_error"


def test_a_symlink_inside_the_roots_pointing_outside_is_refused(
    tmp_path, repos_root, state_dir, new_task
):
    outside = make_repo(tmp_path / "elsewhere")
    (repos_root / "sneaky").symlink_to(outside)
    with pytest.raises(ValidationFailed):
        service.provision_task_workspace(new_task().id, str(repos_root / "sneaky"))


@pytest.mark.parametrize("bad", ["relative/path", "", "/nonexistent/xyz", "/tmp\n/x"])
def test_a_bad_repo_path_is_refused(repos_root, state_dir, new_task, settings, bad):
    settings.CLAWBOO_REPO_ROOTS = []
    with pytest.raises(ValidationFailed) as err:
        service.provision_task_workspace(new_task().id, bad)
    assert err.value.field == "repo_path"


def test_a_directory_that_is_not_a_git_repo_is_refused(repos_root, state_dir, new_task):
    plain = repos_root / "plain"
    plain.mkdir()
    with pytest.raises(ValidationFailed) as err:
        service.provision_task_workspace(new_task().id, str(plain))
    assert "git" in err.value.detail


def test_a_failed_first_attempt_is_cleaned_up_and_retried(repo, new_task, monkeypatch):
    calls = {"n": 0}
    real = checkouts.verify_checkout

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise checkouts.ProvisionFailed("simulated: registration not visible yet")
        return real(*args, **kwargs)

    monkeypatch.setattr(checkouts, "verify_checkout", flaky)
    ws = service.provision_task_workspace(new_task().id, str(repo))
    assert calls["n"] == 2
    assert checkouts.checkout_healthy(repo, Path(ws.worktree_path), ws.branch)
