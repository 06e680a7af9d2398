"""Which repository a task's run uses is answered once, by the server
(``board.repository.run_repository``): the local executor's checkout, the claim's
answer a remote worker clones from, and the intake that takes its branch in agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from board.repository import run_repository
from core import registry, repositories
from executor.local import Clock, WorkReport, workspace
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db


@pytest.fixture
def app(tmp_path: Path, settings):
    root = (tmp_path / "repos").resolve()
    root.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [root]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    path = make_repo(root / "app")
    return repositories.register(
        team="default", path=str(path), id="app", remote="/srv/app.git", base_branch="main"
    )


def claim_next_body(api, agent_id: str) -> dict:
    answer = api.post("/api/board/claim-next", {"agent_id": agent_id}, format="json")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_the_local_checkout_the_claims_answer_and_the_intake_name_one_repository(api, agent, app):
    task = store.create_task(title="work", repository="app").task
    claimed = claim_next_body(api, agent.id)
    assert claimed["task"]["id"] == task.id
    assert claimed["repository"] == {"id": "app", "remote": "/srv/app.git", "base_branch": "main"}
    task = store.get_task(task.id)
    answer = run_repository(task, agent)
    assert answer.registered == app and answer.takes_in == app
    checkout = workspace(task, agent, True, Clock(WorkReport(agent.id)))
    assert checkout.in_worktree and checkout.repo == app.path


def test_the_agents_default_repository_is_the_answer_when_the_task_names_none(api, app):
    bot = registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "app"},
        owner=api.user,
    )
    task = store.create_task(title="work").task
    claimed = claim_next_body(api, bot.id)
    assert claimed["repository"]["id"] == "app"
    # The intake reads the assignee's default: the same answer as the claim's.
    assert run_repository(store.get_task(task.id)).takes_in == app


def test_the_tasks_own_remote_comes_before_the_agents_default(api, app):
    bot = registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "app"},
        owner=api.user,
    )
    store.create_task(title="work", metadata={"repo_remote": "/srv/other.git"})
    claimed = claim_next_body(api, bot.id)
    assert claimed["repository"] == {"id": None, "remote": "/srv/other.git", "base_branch": ""}


def test_a_task_with_no_repository_is_answered_with_none(api, agent):
    store.create_task(title="chat")
    claimed = claim_next_body(api, agent.id)
    assert claimed["repository"] == {"id": None, "remote": None, "base_branch": ""}


def test_the_in_process_claim_carries_the_same_answer(agent, app):
    store.create_task(title="work", repository="app")
    claimed = store.claim_next(agent.id, team="default")
    assert claimed is not None and claimed.ok
    assert claimed.repository.registered == app
    assert claimed.repository.as_body() == {
        "id": "app",
        "remote": "/srv/app.git",
        "base_branch": "main",
    }


def test_a_tasks_read_and_clawboo_task_show_name_its_agents_default_repository(
    api, app, monkeypatch, capsys
):
    """``clawboo task show`` printed no repository for a task that names none and works
    in its agent's default: the read carries the claim's answer, and the card prints it
    with why -- not worked out again in the CLI."""
    import argparse

    from clawboo import people

    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "app"},
        owner=api.user,
    )
    task = store.create_task(title="work").task
    assigned = api.patch(
        f"/api/board/tasks/{task.id}", {"assignee_agent_id": "far-bot"}, format="json"
    )
    assert assigned.status_code == 200, assigned.content
    loose = store.create_task(title="anyone's").task
    read = api.get(f"/api/board/tasks/{task.id}").json()
    assert read["repository"] is None
    assert read["run_repository"] == {
        "id": "app",
        "remote": "/srv/app.git",
        "base_branch": "main",
        "source": "agent_default",
    }

    class Server:
        def call(self, method: str, path: str, body: object = None) -> object:
            return api.get(path).json()

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    for task_id in (task.id, loose.id):
        assert people.cmd_task_show(argparse.Namespace(id=task_id, json=False)) == 0
    out = capsys.readouterr().out
    assert "repository:  app (its agent's default)" in out
    assert "repository:  none named (the claiming agent's default, if it has one)" in out
