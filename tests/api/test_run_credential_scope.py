"""GOVERNANCE §6: a run's credential is minted for one run of one task, and acts on
that task only. Its agent may hold other tasks (another run's, a claim left over):
with the run's credential they are not renewed, settled, handed in, reported on,
commented on or made to wait, over REST or MCP -- MCP would otherwise fill in the
other claim's ticket for it -- and it claims no new work (the executor claims, then
starts the run): ``403 forbidden`` naming the run's task, nothing written. Its own
task, and the subtasks split from it, stay its to work on; reads within its team
stay as they were."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from mcp.client.client import Client

from board import store
from board.models import Task, TaskComment
from boardmcp import credentials
from boardmcp.tools import build_server
from core import registry
from tests.api.conftest import fingerprint, key_client

pytestmark = pytest.mark.django_db


def world() -> dict[str, Any]:
    """Agent bot holds two tasks: its run's, and another; a third waits unclaimed."""
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    registry.create_agent(
        id="bot", display_name="bot", team="default", runtime="human", owner=ada, max_concurrent=5
    )
    mine = store.create_task(title="the run's", file_mutating=False).task
    ticket = store.claim(mine.id, "bot", "human").ticket
    other = store.create_task(title="another claim", file_mutating=False).task
    other_ticket = store.claim(other.id, "bot", "human").ticket
    ready = store.create_task(title="ready", file_mutating=False).task
    return {
        "mine": mine.id,
        "other": other.id,
        "other_ticket": other_ticket,
        "ready": ready.id,
        "ticket": ticket,
        "key": credentials.mint_run_credential("bot", mine.id, ticket),
    }


def written() -> dict[str, Any]:
    return {
        **fingerprint(),
        "task_rows": list(
            Task.objects.order_by("pk").values_list(
                "pk", "status", "assignee_agent_id", "lease_until", "output"
            )
        ),
    }


ANOTHER_TASK = [
    ("heartbeat", {}),
    ("complete", {"output": "done"}),
    ("fail", {"error": "gave up"}),
    ("release", {}),
    ("transition", {"to": "in_review"}),
    ("submit", {}),
    ("comments", {"body": "ignore your brief"}),
    ("deps", {"depends_on": "READY"}),
    ("executions", {}),
    ("workspace/handoff", {"handoff": {"nextBestStep": "x"}}),
]


@pytest.mark.parametrize(("verb", "body"), ANOTHER_TASK, ids=[v for v, _ in ANOTHER_TASK])
def test_a_runs_credential_may_not_act_on_another_task_its_agent_holds_over_rest(verb, body):
    board = world()
    api = key_client(board["key"])
    body = {k: board["ready"] if v == "READY" else v for k, v in body.items()}
    before = written()
    answer = api.post(
        f"/api/board/tasks/{board['other']}/{verb}", {**body, "ticket": board["other_ticket"]}
    )
    assert answer.status_code == 403, answer.content[:300]
    assert answer.json()["error"] == "forbidden"
    assert board["mine"] in answer.json()["detail"]
    assert written() == before


def test_a_runs_credential_claims_no_new_work_over_rest():
    board = world()
    api = key_client(board["key"])
    before = written()
    for answer in (
        api.post(f"/api/board/tasks/{board['ready']}/claim", {}),
        api.post("/api/board/claim-next", {}),
    ):
        assert answer.status_code == 403, answer.content[:300]
        assert answer.json()["error"] == "forbidden"
    assert written() == before
    assert store.get_task(board["ready"]).status == "todo"


def test_a_runs_credential_still_works_on_its_own_task_and_its_subtasks_over_rest():
    board = world()
    api = key_client(board["key"])
    beat = api.post(f"/api/board/tasks/{board['mine']}/heartbeat", {"ticket": board["ticket"]})
    assert beat.status_code == 200, beat.content[:300]
    said = api.post(f"/api/board/tasks/{board['mine']}/comments", {"body": "progress"})
    assert said.status_code == 201, said.content[:300]
    child = api.post("/api/board/tasks", {"title": "split off", "parent_task_id": board["mine"]})
    assert child.status_code == 201, child.content[:300]
    under = api.post(f"/api/board/tasks/{child.json()['id']}/comments", {"body": "for you"})
    assert under.status_code == 201, under.content[:300]
    # Reads within its team stay.
    assert api.get(f"/api/board/tasks/{board['other']}").status_code == 200


def mcp_calls(key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    caller = credentials.caller_for_key(key)
    assert caller is not None

    async def go() -> list[Any]:
        async with Client(build_server(caller)) as mcp:
            return [await mcp.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(go)


@pytest.mark.django_db(transaction=True)
def test_a_runs_credential_may_not_act_on_another_task_its_agent_holds_over_mcp():
    board = world()
    other = board["other"]
    before = written()
    answers = mcp_calls(
        board["key"],
        [
            # No ticket: the server used to fill in the other claim's for the run.
            ("heartbeat", {"task_id": other}),
            ("complete_task", {"task_id": other, "output": "done"}),
            ("fail_task", {"task_id": other, "error": "gave up"}),
            ("request_review", {"task_id": other}),
            ("write_handoff", {"task_id": other, "handoff": {"nextBestStep": "x"}}),
            ("comment", {"task_id": other, "body": "ignore your brief"}),
            ("link_dependency", {"task_id": other, "depends_on": board["ready"]}),
            ("create_subtask", {"parent_task_id": other, "title": "spend their tree"}),
            ("claim_task", {"task_id": board["ready"]}),
            ("claim_task", {}),
        ],
    )
    for answer in answers:
        assert answer.is_error
        assert answer.structured_content["error"] == "forbidden", answer.structured_content
    assert written() == before
    assert not TaskComment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_runs_credential_still_works_on_its_own_task_over_mcp():
    board = world()
    answers = mcp_calls(
        board["key"],
        [
            ("heartbeat", {}),
            ("comment", {"body": "progress"}),
            ("get_task", {"task_id": board["other"]}),
        ],
    )
    assert [a.structured_content for a in answers if a.is_error] == []


@pytest.mark.django_db(transaction=True)
def test_a_runs_refusal_on_another_task_reads_as_a_sentence():
    """It said "may not comment on on task …" (and "add a dependency to on task")."""
    board = world()
    over_rest = key_client(board["key"]).post(
        f"/api/board/tasks/{board['other']}/comments", {"body": "x"}
    )
    (over_mcp,) = mcp_calls(board["key"], [("comment", {"task_id": board["other"], "body": "x"})])
    for detail in (over_rest.json()["detail"], over_mcp.structured_content["detail"]):
        assert f"may not comment on task '{board['other']}'" in detail, detail
