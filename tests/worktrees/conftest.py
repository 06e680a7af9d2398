"""Real git repositories in tmp dirs, a private state dir, and board tasks to attach them to."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from board import store
from board.models import Task
from core import registry, repositories
from tests.fixtures.gitrepos import git, make_repo  # noqa: F401 - helpers its tests use
from tests.worktrees.queue_fixtures import GATE, Harness
from worktrees import queue


@pytest.fixture
def state_dir(tmp_path: Path, settings) -> Path:
    state = (tmp_path / "state").resolve()
    state.mkdir()
    settings.CLAWBOO_STATE_DIR = state
    return state


@pytest.fixture
def repos_root(tmp_path: Path, settings) -> Path:
    root = (tmp_path / "repos").resolve()
    root.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [root]
    return root


@pytest.fixture
def repo(repos_root: Path, state_dir: Path, request: pytest.FixtureRequest) -> Path:
    """A repository registered to the team ``default`` (worktrees are only made in
    registered repositories of the task's team)."""
    path = make_repo(repos_root / "app")
    request.getfixturevalue("db")
    repositories.register(team="default", path=str(path), id="app")
    return path


@pytest.fixture
def new_task(db: None) -> Callable[..., Task]:
    """A task claimed into ``in_progress`` (where a runtime works its checkout)."""

    def make(title: str = "Fix login", *, claim: bool = True, **fields: object) -> Task:
        task = store.create_task(title=title, **fields).task
        if claim:
            assert store.claim(task.id, "ada").outcome == "ok"
        return store.get_task(task.id)

    return make


# --- the merge queue (tests/worktrees/queue_fixtures.py holds its harness) ---------


@pytest.fixture
def queue_harness(repo: Path, tmp_path: Path, monkeypatch, command_agent_for_queue) -> Harness:
    log = tmp_path / "gates.log"
    command = GATE.format(pause="0", log=log)
    repositories.update("app", {"landing_mode": "queue", "verify_cmd": command})
    harness = Harness(repo, log, command)
    # The test runs the queue's job itself (the q2 worker's part), so approvals pile up.
    monkeypatch.setattr(queue, "kick", harness.kicks.append)
    return harness


@pytest.fixture
def command_agent_for_queue(db: None) -> None:
    registry.create_agent(
        id="builder",
        display_name="Builder",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
