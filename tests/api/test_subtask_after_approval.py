"""GOVERNANCE §5, §6: a person's approval covers what the run will be told, and a run of
a task reads its subtasks' titles (MCP ``get_task``). An agent that filed work, had it
approved, then filed a subtask under it ("also drop the old tables") was still
approved: the parent's run read the subtask, which no person had decided on. The
agent side's subtask under a parent not yet claimed now meets the rule its comment
meets (board.store.approvals.agent_side_added): the parent's approval is asked again
(a denial stays) and its revision moves. A person's subtask voids nothing."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from board import store
from boardmcp import credentials
from boardmcp.tools import build_server
from tests.api import test_comment_after_approval as comment_rule
from tests.api.conftest import key_client
from tests.api.test_comment_after_approval import assert_approval_asked_again, decide

# The comment rule's world: agent ``a`` (ada's) filed a task that waits for approval.
world = comment_rule.world

pytestmark = pytest.mark.django_db(transaction=True)


def call_tool(key: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    caller = credentials.caller_for_key(key)
    assert caller is not None

    async def go() -> Any:
        async with Client(build_server(caller)) as client:
            return await client.call_tool(tool, arguments)

    answer = anyio.run(go)
    assert not answer.is_error, answer.content
    said: dict[str, Any] = json.loads(answer.content[0].text)
    return said


def file_subtask(world: dict[str, Any], door: str, credential: str, title: str) -> str:
    if door == "mcp":
        made = call_tool(
            world[credential], "create_subtask", {"parent_task_id": world["task"], "title": title}
        )
        return str(made["task"]["id"])
    client = world["person"] if credential == "person" else key_client(world[credential])
    made = client.post("/api/board/tasks", {"title": title, "parent_task_id": world["task"]})
    assert made.status_code == 201, made.json()
    return str(made.json()["id"])


@pytest.mark.parametrize("door", ["rest", "mcp"])
@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_sides_subtask_after_approval_asks_for_the_parents_again(world, door, credential):
    assert decide(world, "approve").status_code == 200

    file_subtask(world, door, credential, "also drop the old tables")

    # What the parent's run would read: its subtasks' titles.
    read = call_tool(world["agent key"], "get_task", {"task_id": world["task"]})
    assert [t["title"] for t in read["subtasks"]] == ["also drop the old tables"]
    assert_approval_asked_again(world["task"])


def test_a_decision_on_the_parents_revision_before_the_agents_subtask_is_refused(world):
    read = store.get_task(world["task"]).revision

    file_subtask(world, "rest", "agent key", "and rotate the production keys")

    stale = decide(world, "approve", revision=read)
    assert stale.status_code == 409, stale.json()
    assert decide(world, "approve").status_code == 200


def test_the_agent_sides_subtask_does_not_undo_a_denial(world):
    assert decide(world, "deny", reason="not now").status_code == 200

    file_subtask(world, "mcp", "agent key", "please reconsider")

    assert store.get_task(world["task"]).approval_state == "denied"


def test_a_persons_subtask_leaves_the_parents_approval(world):
    assert decide(world, "approve").status_code == 200
    revision = store.get_task(world["task"]).revision

    file_subtask(world, "rest", "person", "a note for later")

    parent = store.get_task(world["task"])
    assert parent.approval_state == "approved" and parent.revision == revision


def test_a_subtask_under_claimed_work_leaves_its_approval(world):
    assert decide(world, "approve").status_code == 200
    assert store.claim(world["task"], "a", "human").outcome == "ok"

    file_subtask(world, "rest", "agent key", "the second half")

    assert store.get_task(world["task"]).approval_state == "approved"
