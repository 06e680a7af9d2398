"""GOVERNANCE §4, §6: the judge's side stays with the server. A builder never
reaches ``done`` around the judge: a run's credential does not settle the task its
run was started for (the executor does, after the run -- over REST as over MCP),
and the agent side never completes file-mutating work of a repository that takes
pushed work in (it submits it, and the server judges it). Every refusal writes
nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from mcp.client.client import Client
from rest_framework.test import APIClient

from board import store
from board.models import Task
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry, repositories
from core.models import AgentToken
from tests.api.conftest import fingerprint
from tests.fixtures.gitrepos import git

pytestmark = pytest.mark.django_db(transaction=True)


def client(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def held_by(agent: str, **fields: Any) -> tuple[str, str]:
    task = store.create_task(title="work", **fields).task
    claim = store.claim(task.id, agent, "command")
    assert claim.outcome == "ok"
    return task.id, claim.ticket


def written() -> dict[str, Any]:
    return {
        **fingerprint(),
        "task_rows": list(
            Task.objects.order_by("pk").values_list("pk", "status", "verdict", "output")
        ),
    }


@pytest.fixture
def owner(db):
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    registry.create_agent(
        id="bot",
        display_name="Bot",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=ada,
        max_concurrent=10,
    )
    return ada


@pytest.mark.parametrize(
    ("verb", "body"),
    [
        ("complete", {"output": "done, trust me"}),
        ("fail", {"error": "gave up"}),
        ("release", {}),
        ("transition", {"to": "in_review"}),
        ("transition", {"to": "blocked"}),
    ],
)
def test_a_runs_credential_does_not_settle_its_own_task_over_rest(owner, verb, body):
    task_id, ticket = held_by("bot", file_mutating=False)
    run = client(credentials.mint_run_credential("bot", task_id, ticket))
    before = written()
    answer = run.post(f"/api/board/tasks/{task_id}/{verb}", body, format="json")
    assert answer.status_code == 403, answer.content[:300]
    assert answer.json()["error"] == "forbidden"
    assert "settled by the executor" in answer.json()["detail"]
    assert written() == before
    assert store.get_task(task_id).status == "in_progress"


def test_a_runs_credential_does_not_settle_other_work_its_agent_holds(owner):
    """A run's credential acts on its run's task only: what else its agent holds
    (another run's task, a claim left over) is not its to settle, as over MCP."""
    task_id, ticket = held_by("bot", file_mutating=False)
    other, other_ticket = held_by("bot", file_mutating=False)
    run = client(credentials.mint_run_credential("bot", task_id, ticket))
    before = written()
    answer = run.post(f"/api/board/tasks/{other}/complete", {"ticket": other_ticket}, format="json")
    assert answer.status_code == 403, answer.content[:300]
    assert "acts on that task only" in answer.json()["detail"]
    assert written() == before
    assert store.get_task(other).status == "in_progress"


@pytest.fixture
def pushed(owner, repo: Path, tmp_path: Path) -> str:
    """A registered repository with a remote: its file-mutating work is taken in."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    repositories.register(team="default", path=str(repo), id="app", remote=str(remote))
    return "app"


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_never_completes_judged_work_around_the_judge(pushed, owner, credential):
    task_id, ticket = held_by("bot", repository=pushed)
    if credential == "agent key":
        key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner).key
    else:
        _, key = machines.mint("laptop", ["bot"])
    before = written()
    answer = client(key).post(
        f"/api/board/tasks/{task_id}/complete",
        {"ticket": ticket, "output": {"summary": "done, trust me"}},
        format="json",
    )
    assert answer.status_code == 403, answer.content[:300]
    assert answer.json()["error"] == "forbidden" and "/submit" in answer.json()["detail"]
    assert written() == before
    task = store.get_task(task_id)
    assert (task.status, task.verdict) == ("in_progress", None)


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_nor_does_it_move_judged_work_to_review_around_the_judge(pushed, owner, credential):
    """In review unjudged, a person's approval would mark it done with nothing taken
    in: such work reaches review through the server's intake only."""
    task_id, _ticket = held_by("bot", repository=pushed)
    if credential == "agent key":
        key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner).key
    else:
        _, key = machines.mint("laptop", ["bot"])
    before = written()
    answer = client(key).post(
        f"/api/board/tasks/{task_id}/transition", {"to": "in_review"}, format="json"
    )
    assert answer.status_code == 403, answer.content[:300]
    assert answer.json()["error"] == "forbidden" and "/submit" in answer.json()["detail"]
    assert written() == before


def test_nor_over_mcp(pushed, owner):
    task_id, _ticket = held_by("bot", repository=pushed)
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner).key
    caller = credentials.caller_for_key(key)
    assert caller is not None

    async def call(tool: str, arguments: dict[str, Any]) -> dict:
        async with Client(build_server(caller)) as mcp:
            answer = await mcp.call_tool(tool, arguments)
            assert answer.is_error
            return answer.structured_content

    before = written()
    for tool, arguments in (
        ("complete_task", {"task_id": task_id, "output": "ok"}),
        ("request_review", {"task_id": task_id}),
    ):
        refusal = anyio.run(call, tool, arguments)
        assert refusal["error"] == "forbidden" and "/submit" in refusal["detail"], tool
    assert written() == before


def test_work_no_repository_takes_in_is_still_completed_by_its_agent(pushed, owner):
    """Not file-mutating, or with no repository to take it in: the agent settles it."""
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner).key
    for fields in ({"repository": pushed, "file_mutating": False}, {}):
        task_id, ticket = held_by("bot", **fields)
        answer = client(key).post(
            f"/api/board/tasks/{task_id}/complete", {"ticket": ticket}, format="json"
        )
        assert answer.status_code == 200, (fields, answer.content[:300])
        assert store.get_task(task_id).status == "done"
