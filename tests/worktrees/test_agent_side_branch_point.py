"""GOVERNANCE §6: the agent side never lands work no person was shown. A task's
review diff is measured from where its checkout starts; its landing takes
everything since the base branch. The agent side chose that start itself
(``POST …/workspace`` with ``base_sha`` or ``base_ref``): a commit of its own off
the base branch became the start, the review showed only the work on top of it,
and a person's approve landed both. Choosing the branch point is now a person's
(``403 person_required``, nothing written); the agent side's checkout starts at
the tip of its base branch."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from board.models import Task, Workspace
from core import machines, registry, repositories
from core.models import AgentToken
from tests.api.conftest import key_client as client
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db(transaction=True)


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(  # noqa: S603 - argv list, the test's own repository
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],  # noqa: S607
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip()


@pytest.fixture
def held(repo: Path) -> dict[str, Any]:
    """Agent b holds a task of the registered repository ``app`` (no remote, verify
    ``test -f feature.txt``); the repository holds a commit off its base branch
    (``evil.txt``), as a pushed branch fetched by the server would."""
    repositories.update("app", {"verify_cmd": "test -f feature.txt"})
    bob = get_user_model().objects.create_user(username="bob")
    registry.add_member("default", bob)
    registry.create_agent(id="b", display_name="b", team="default", runtime="human", owner=bob)
    git(repo, "checkout", "-q", "-b", "side")
    (repo / "evil.txt").write_text("not reviewed\n")
    git(repo, "add", "evil.txt")
    git(repo, "commit", "-qm", "off the base branch")
    off_branch = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    task = store.create_task(title="Add the feature", repository="app").task
    ticket = store.claim(task.id, "b", "human").ticket
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="b", user=bob).key
    return {
        "task": task.id,
        "ticket": ticket,
        "off_branch": off_branch,
        "agent key": client(agent_key),
        "machine token": client(machines.mint("gpu-1", ["b"])[1]),
        "person": client(Token.objects.create(user=bob).key),
    }


def written() -> list[Any]:
    return [
        list(Task.objects.order_by("pk").values_list("pk", "status", "revision")),
        list(Workspace.objects.order_by("pk").values_list("pk", "status", "base_sha")),
    ]


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
@pytest.mark.parametrize("field", ["base_sha", "base_ref"])
def test_the_agent_side_may_not_choose_where_its_checkout_starts(
    held: dict[str, Any], credential: str, field: str
) -> None:
    before = written()

    answer = held[credential].post(
        f"/api/board/tasks/{held['task']}/workspace", {field: held["off_branch"]}
    )

    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"] == "person_required"
    assert written() == before


def test_the_agent_sides_checkout_starts_at_its_base_branch_and_lands_what_was_reviewed(
    repo: Path, held: dict[str, Any]
) -> None:
    api, task = held["agent key"], held["task"]
    made = api.post(f"/api/board/tasks/{task}/workspace", {})
    assert made.status_code == 201, made.json()
    assert made.json()["base_sha"] == git(repo, "rev-parse", "main")
    (Path(made.json()["worktree_path"]) / "feature.txt").write_text("the feature\n")
    sent = api.post(f"/api/board/tasks/{task}/submit", {"ticket": held["ticket"]})
    assert sent.status_code == 202, sent.json()

    approved = held["person"].post(f"/api/board/tasks/{task}/approve", {})

    assert approved.status_code == 200, approved.json()
    landed = git(repo, "ls-tree", "--name-only", "main").split()
    assert "feature.txt" in landed and "evil.txt" not in landed


def test_a_person_still_chooses_where_a_checkout_starts(held: dict[str, Any]) -> None:
    made = held["person"].post(
        f"/api/board/tasks/{held['task']}/workspace", {"base_sha": held["off_branch"]}
    )

    assert made.status_code == 201, made.json()
    assert made.json()["base_sha"] == held["off_branch"]


@pytest.fixture
def other_repo(repos_root: Path, held: dict[str, Any]) -> Path:
    """A second registered repository of the same team (``other``)."""
    path = make_repo(repos_root / "other")
    repositories.register(team="default", path=str(path), id="other")
    return path


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
@pytest.mark.parametrize("how", ["repository", "repo_path"])
def test_the_agent_side_makes_its_checkout_in_its_tasks_repository_only(
    held: dict[str, Any], other_repo: Path, credential: str, how: str
) -> None:
    """Where a task's work runs and lands is part of what a person approved: the
    agent side naming another repository of its team for a task that names one is
    refused (403, nothing written); naming the task's own is the default's answer."""
    before = written()
    named = {"repository": "other"} if how == "repository" else {"repo_path": str(other_repo)}

    answer = held[credential].post(f"/api/board/tasks/{held['task']}/workspace", named)

    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"] == "person_required"
    assert written() == before
    own = held[credential].post(f"/api/board/tasks/{held['task']}/workspace", {"repository": "app"})
    assert own.status_code == 201, own.json()


def test_a_person_still_makes_a_checkout_in_another_repository(
    held: dict[str, Any], other_repo: Path
) -> None:
    made = held["person"].post(
        f"/api/board/tasks/{held['task']}/workspace", {"repository": "other"}
    )
    assert made.status_code == 201, made.json()


@pytest.fixture
def unnamed(held: dict[str, Any], other_repo: Path) -> dict[str, Any]:
    """Agent b holds a task that names no repository; b's settings name ``app`` as its
    default, so its run's repository (the claim's answer) is ``app``."""
    registry.update_agent("b", {"settings": {"repository": "app"}, "max_concurrent": 5})
    task = store.create_task(title="Anywhere?").task
    ticket = store.claim(task.id, "b", "human")
    assert ticket.repository.as_body()["id"] == "app"
    return {**held, "task": task.id}


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
@pytest.mark.parametrize("how", ["repository", "repo_path"])
def test_the_agent_side_makes_its_checkout_in_its_runs_repository_when_the_task_names_none(
    unnamed: dict[str, Any], other_repo: Path, credential: str, how: str
) -> None:
    """A task naming no repository: its run's repository is still the server's answer
    (what its claim said), not one the agent side picks among its team's."""
    before = written()
    named = {"repository": "other"} if how == "repository" else {"repo_path": str(other_repo)}

    answer = unnamed[credential].post(f"/api/board/tasks/{unnamed['task']}/workspace", named)

    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"] == "person_required"
    assert written() == before
    made = unnamed[credential].post(f"/api/board/tasks/{unnamed['task']}/workspace", {})
    assert made.status_code == 201, made.json()
    assert Path(made.json()["repo_path"]).name == "app"


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_names_no_repository_for_a_run_that_has_none(
    held: dict[str, Any], other_repo: Path, credential: str
) -> None:
    registry.update_agent("b", {"max_concurrent": 5})
    task = store.create_task(title="No repository").task
    store.claim(task.id, "b", "human")
    before = written()

    answer = held[credential].post(f"/api/board/tasks/{task.id}/workspace", {"repository": "app"})

    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"] == "person_required"
    assert written() == before


def test_a_person_still_chooses_the_repository_of_a_task_that_names_none(
    unnamed: dict[str, Any], other_repo: Path
) -> None:
    made = unnamed["person"].post(
        f"/api/board/tasks/{unnamed['task']}/workspace", {"repository": "other"}
    )
    assert made.status_code == 201, made.json()
    assert Path(made.json()["repo_path"]).name == "other"
