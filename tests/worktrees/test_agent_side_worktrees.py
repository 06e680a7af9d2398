"""GOVERNANCE §6: the agent side works in a task's worktree only as the agent that
holds the task. Another agent's key (or machine token) completing, pausing,
resuming, reviewing, handing off or provisioning a worktree of work it does not
hold is refused (403) and writes nothing -- completing an empty worktree would
otherwise move someone else's task to ``done`` -- and a run's credential does not
complete its own task's worktree (the executor does, after its judge)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from board import store
from board.models import Task, Workspace
from boardmcp import credentials
from core import machines, registry
from core.models import AgentToken
from worktrees import service

pytestmark = pytest.mark.django_db(transaction=True)

OPERATIONS = [
    ("workspace/complete", {}),
    ("workspace/pause", {}),
    ("workspace/resume", {}),
    ("workspace/review", {}),
    ("workspace/handoff", {"handoffFrom": "a"}),
    ("workspace", {}),
]


def client(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def written() -> dict[str, Any]:
    return {
        "tasks": list(Task.objects.order_by("pk").values_list("pk", "status", "revision")),
        "workspaces": list(
            Workspace.objects.order_by("pk").values_list("pk", "status", "updated_at")
        ),
    }


@pytest.fixture
def team(repo: Path) -> dict[str, Any]:
    """Agents a (ada's) and b (bob's) on one team and repository; b holds a task
    with a fresh (empty) worktree, and another waits in todo. The ``repo`` fixture
    registers the repository ``app``."""
    people = {}
    for name, agent in (("ada", "a"), ("bob", "b")):
        people[name] = get_user_model().objects.create_user(username=name)
        registry.add_member("default", people[name])
        registry.create_agent(
            id=agent,
            display_name=agent,
            team="default",
            runtime="human",
            owner=people[name],
            max_concurrent=5,
        )
    held = store.create_task(title="b's work", repository="app").task
    ticket = store.claim(held.id, "b", "human").ticket
    service.provision_task_workspace(held.id, str(repo))
    waiting = store.create_task(title="not yet", repository="app").task
    return {"people": people, "held": held.id, "ticket": ticket, "waiting": waiting.id}


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
@pytest.mark.parametrize(("operation", "body"), OPERATIONS)
def test_another_agent_never_works_in_a_worktree_it_does_not_hold(
    team, credential, operation, body
):
    if credential == "agent key":
        key = AgentToken.objects.create(
            key=machines.new_key(), agent_id="a", user=team["people"]["ada"]
        ).key
    else:
        _, key = machines.mint("laptop", ["a"])
    before = written()
    for task in (team["held"], team["waiting"]):
        answer = client(key).post(f"/api/board/tasks/{task}/{operation}", body, format="json")
        assert answer.status_code == 403, (task, answer.content[:300])
        assert answer.json()["error"] == "forbidden"
    assert written() == before
    assert store.get_task(team["held"]).status == "in_progress"


def test_a_runs_credential_does_not_complete_its_own_tasks_worktree(team):
    run = client(credentials.mint_run_credential("b", team["held"], team["ticket"]))
    before = written()
    answer = run.post(f"/api/board/tasks/{team['held']}/workspace/complete", {}, format="json")
    assert answer.status_code == 403 and "settled by the executor" in answer.json()["detail"]
    assert written() == before


def test_the_holding_agent_and_people_still_work_in_it(team):
    key = AgentToken.objects.create(
        key=machines.new_key(), agent_id="b", user=team["people"]["bob"]
    ).key
    paused = client(key).post(f"/api/board/tasks/{team['held']}/workspace/pause", {}, format="json")
    assert paused.status_code == 200, paused.content[:300]
    resumed = client(key).post(
        f"/api/board/tasks/{team['held']}/workspace/resume", {}, format="json"
    )
    assert resumed.status_code == 200, resumed.content[:300]
    from rest_framework.authtoken.models import Token

    person = client(Token.objects.create(user=team["people"]["ada"]).key)
    done = person.post(f"/api/board/tasks/{team['held']}/workspace/complete", {}, format="json")
    assert done.status_code == 200 and done.json()["result"] == "cleaned"
    assert store.get_task(team["held"]).status == "done"
