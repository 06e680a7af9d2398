"""The worktree wall: a non-staff member makes worktrees only inside their team's
registered repositories, by no path, symlink or ``..``, and learns nothing about
paths that are not their team's repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from core import registry, repositories
from core.errors import ValidationFailed
from tests.api.conftest import make_client
from tests.fixtures.gitrepos import git, make_repo
from worktrees import service

pytestmark = pytest.mark.django_db


@pytest.fixture
def teams(repos_root: Path, state_dir: Path):
    """Team ``default`` (ada's) has ``mine``; team ``other`` has ``theirs``."""
    registry.create_team("other", "Other")
    mine = repositories.register(
        team="default", path=str(make_repo(repos_root / "mine")), id="mine"
    )
    theirs = repositories.register(
        team="other", path=str(make_repo(repos_root / "theirs")), id="theirs"
    )
    return mine, theirs


def _worktrees(repo: str) -> list[str]:
    out = git(Path(repo), "worktree", "list", "--porcelain")
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def _task():
    task = store.create_task(title="Fix login").task
    store.claim(task.id, "ada")
    return task


def test_a_member_cannot_provision_in_another_teams_repository_by_any_path(
    teams, repos_root: Path, state_dir: Path
):
    mine, theirs = teams
    api = make_client("ada")
    task = _task()
    (repos_root / "mine-link").symlink_to(theirs.path)
    attempts = [
        {"repo_path": theirs.path},  # the other team's real path
        {"repo_path": str(repos_root / "mine-link")},  # a symlink to it
        {"repo_path": f"{mine.path}/../theirs"},  # a `..` walk to it
        {"repository": theirs.id},  # its id
    ]
    for body in attempts:
        answer = api.post(f"/api/board/tasks/{task.id}/workspace", body, format="json")
        assert answer.status_code == 400, body
    assert _worktrees(theirs.path) == [f"worktree {theirs.path}"]
    assert not (state_dir / "worktrees").exists() or not any((state_dir / "worktrees").iterdir())
    made = api.post(f"/api/board/tasks/{task.id}/workspace", {"repository": mine.id}, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["repo_path"] == mine.path


def test_a_members_refusals_never_tell_whether_a_path_is_a_repository(
    teams, repos_root: Path, tmp_path: Path
):
    api = make_client("ada")
    task = _task()
    loose = make_repo(repos_root / "loose")
    (tmp_path / "plain").mkdir()
    answers = [
        api.post(f"/api/board/tasks/{task.id}/workspace", {"repo_path": p}, format="json")
        for p in (str(loose), str(tmp_path / "plain"), str(tmp_path / "missing"), "/")
    ]
    assert {a.status_code for a in answers} == {400}
    assert len({(a.json()["field"], a.json()["detail"]) for a in answers}) == 1


def test_the_service_makes_no_worktree_outside_the_tasks_teams_repositories(
    teams, repos_root: Path
):
    mine, theirs = teams
    task = _task()
    (repos_root / "link").symlink_to(theirs.path)
    for path in (theirs.path, str(repos_root / "link"), f"{mine.path}/../theirs"):
        with pytest.raises(ValidationFailed) as refused:
            service.provision_task_workspace(task.id, path)
        assert refused.value.field == "repo_path"
    assert _worktrees(theirs.path) == [f"worktree {theirs.path}"]


def test_a_registered_directory_swapped_for_a_link_is_refused(teams, repos_root: Path):
    mine, theirs = teams
    task = _task()
    moved = repos_root / "mine-moved"
    Path(mine.path).rename(moved)
    Path(mine.path).symlink_to(theirs.path)
    with pytest.raises(ValidationFailed):
        service.provision_task_workspace(task.id, mine.path)
    assert _worktrees(theirs.path) == [f"worktree {theirs.path}"]


def test_staff_may_provision_by_path_and_it_registers_for_the_tasks_team(teams, repos_root: Path):
    staff = make_client("root", staff=True)
    task = _task()
    loose = make_repo(repos_root / "loose")
    made = staff.post(
        f"/api/board/tasks/{task.id}/workspace", {"repo_path": str(loose)}, format="json"
    )
    assert made.status_code == 201, made.json()
    assert repositories.registered_path("default", str(loose)) is not None


def test_a_task_provisions_in_its_repository_by_default(teams):
    mine, _ = teams
    api = make_client("ada")
    task = store.create_task(title="Fix login", repository=mine.id).task
    store.claim(task.id, "ada")
    made = api.post(f"/api/board/tasks/{task.id}/workspace", {}, format="json")
    assert made.status_code == 201, made.json()
    assert made.json()["repo_path"] == mine.path
