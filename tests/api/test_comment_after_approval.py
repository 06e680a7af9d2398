"""GOVERNANCE §5, §6: a person's approval covers what the run will be told, and a run
reads its task's comments (MCP ``get_task``, ``GET …/comments``). An agent that filed
work, had it approved, then commented "also do X" on it was still approved: the run
read X, which no person had decided on. The agent side's comment on a task not yet
claimed now counts as an edit does: an approval is asked again (a denial stays), and
the task's revision moves, so a person's decision on the revision they read before
the comment is refused (409). A person's comment voids nothing."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from mcp.client.client import Client
from rest_framework.authtoken.models import Token

from board import store
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry
from core.models import AgentToken, Event
from tests.api.conftest import key_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world() -> dict[str, Any]:
    """Agent ``a`` (ada's) filed a task, which waits for a person's approval."""
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    registry.create_agent(id="a", display_name="a", team="default", runtime="human", owner=ada)
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="a", user=ada).key
    filed = key_client(agent_key).post("/api/board/tasks", {"title": "tidy the docs"})
    assert filed.status_code == 201, filed.json()
    assert filed.json()["approval"]["state"] == "required"
    return {
        "task": filed.json()["id"],
        "agent key": agent_key,
        "machine token": machines.mint("laptop", ["a"])[1],
        "person": key_client(Token.objects.create(user=ada).key),
    }


def decide(world: dict[str, Any], decision: str, **extra: Any) -> Any:
    return world["person"].post(
        f"/api/board/tasks/{world['task']}/approval", {"decision": decision, **extra}
    )


def comment_over_mcp(key: str, task_id: str, body: str) -> dict[str, Any]:
    caller = credentials.caller_for_key(key)
    assert caller is not None

    async def go() -> Any:
        async with Client(build_server(caller)) as client:
            return await client.call_tool("comment", {"task_id": task_id, "body": body})

    answer = anyio.run(go)
    assert not answer.is_error, answer.content
    said: dict[str, Any] = json.loads(answer.content[0].text)["comment"]
    assert said["body"] == body
    return said


def comment(world: dict[str, Any], door: str, credential: str, body: str) -> None:
    if door == "mcp":
        comment_over_mcp(world[credential], world["task"], body)
        return
    said = key_client(world[credential]).post(
        f"/api/board/tasks/{world['task']}/comments", {"body": body}
    )
    assert said.status_code == 201, said.json()


@pytest.mark.parametrize("door", ["rest", "mcp"])
@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_sides_comment_after_approval_asks_for_it_again(world, door, credential):
    assert decide(world, "approve").status_code == 200

    comment(world, door, credential, "also delete the old backups while you are there")

    assert_approval_asked_again(world["task"])


def assert_approval_asked_again(task_id: str) -> None:
    """Approved work the agent side added to after its approval: required again, with
    a reason and an event, and no claim takes it."""
    task = store.get_task(task_id)
    assert task.approval_state == "required"
    assert "after it was approved" in (task.approval_reason or "")
    assert Event.objects.filter(task_id=task.id, kind="approval_required").exists()
    assert store.claim(task.id, "a", "human").outcome == "approval_required"


def test_a_decision_on_the_revision_before_the_agents_comment_is_refused(world):
    read = store.get_task(world["task"]).revision

    comment(world, "rest", "agent key", "and rotate the production keys")

    stale = decide(world, "approve", revision=read)
    assert stale.status_code == 409, stale.json()
    assert store.get_task(world["task"]).approval_state == "required"
    assert decide(world, "approve").status_code == 200


def test_the_agent_sides_comment_does_not_undo_a_denial(world):
    assert decide(world, "deny", reason="not now").status_code == 200

    comment(world, "rest", "agent key", "please reconsider")

    assert store.get_task(world["task"]).approval_state == "denied"


def test_a_persons_comment_leaves_the_approval(world):
    assert decide(world, "approve").status_code == 200
    revision = store.get_task(world["task"]).revision

    said = world["person"].post(f"/api/board/tasks/{world['task']}/comments", {"body": "thanks"})

    assert said.status_code == 201, said.json()
    task = store.get_task(world["task"])
    assert task.approval_state == "approved" and task.revision == revision


def test_a_comment_on_claimed_work_leaves_its_approval(world):
    assert decide(world, "approve").status_code == 200
    assert store.claim(world["task"], "a", "human").outcome == "ok"

    comment(world, "rest", "agent key", "progress: half done")

    assert store.get_task(world["task"]).approval_state == "approved"
