"""The executor makes worktrees only in registered repositories of the task's team:
the task's repository, the agent's default one, or a path that is registered."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from board import store
from board.models import Task
from core import registry, repositories
from executor.runner import Executor
from tests.fixtures.gitrepos import git, make_repo
from tests.fixtures.runs import VERIFY_OK

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(repo: Path) -> Path:
    registry.create_team("other", "Other")
    path = make_repo(repo.parent / "theirs")
    repositories.register(team="other", path=str(path), id="theirs")
    return path


def _worktrees(path: Path) -> int:
    return git(path, "worktree", "list", "--porcelain").count("worktree ")


def test_a_task_is_worked_in_its_repository_and_the_agents_default(repo: Path, script: Path):
    shop = repositories.register(team="default", path=str(repo), id="shop")
    registry.create_agent(
        id="builder",
        display_name="Builder",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, str(script), "write"], "repository": shop.id},
    )
    named = store.create_task(title="named", repository=shop.id, metadata={"verify_cmd": VERIFY_OK})
    by_default = store.create_task(title="default", metadata={"verify_cmd": VERIFY_OK})
    for _ in (named, by_default):
        report = Executor("builder").work_once()
        assert report.outcome == "succeeded", report
        task = store.get_task(report.task_id)
        assert (Path(task.worktree_ref) / "feature.txt").read_text() == "ok\n"
        assert store.get_workspace(task.id).repo_path == shop.path
    assert {store.get_task(t.task.id).status for t in (named, by_default)} == {"in_review"}


def test_a_path_smuggled_into_a_tasks_metadata_makes_no_worktree(
    command_agent, repo: Path, theirs: Path
):
    command_agent("builder", "write")
    # Written around the data layer (which refuses it): another team's repository,
    # a symlink to it and a `..` walk to it.
    link = repo.parent / "link"
    link.symlink_to(theirs)
    for n, path in enumerate((str(theirs), str(link), f"{repo}/../theirs")):
        task = store.create_task(title=f"evil {n}").task
        Task.objects.filter(pk=task.id).update(metadata={"repo_path": path})
        report = Executor("builder").work_once()
        assert report.task_id == task.id and report.outcome == "failed", report
        assert "registered repository" in report.error
        # A refused run goes back to todo for another try (the breaker counts it):
        # out of the way, so the next case is the one claimed.
        store.cancel(task.id)
    assert _worktrees(theirs) == 1
