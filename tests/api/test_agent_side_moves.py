"""GOVERNANCE §6 and §3: the agent side moves only its own work. A run stopped at its
ceiling (blocked) is never retried by itself, work in review is a person's to send
back, and another agent's task is not the caller's to move -- through the board's
generic move (``POST …/transition``) as through every other door. Each refusal is
``403 person_required`` (or the assignee rule's ``forbidden``) and writes nothing;
a person with their own credential makes the same moves."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from mcp.client.client import Client
from rest_framework.authtoken.models import Token

from board import store
from board.models import Task
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import fingerprint
from tests.api.conftest import key_client as client

pytestmark = pytest.mark.django_db


@pytest.fixture
def board(default_team: str) -> dict[str, Any]:
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    for agent_id in ("near", "far"):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id.title(),
            team="default",
            runtime="command",
            settings={"argv": ["true"]},
            owner=ada,
        )

    def held_by(agent: str, title: str) -> tuple[str, str]:
        task = store.create_task(title=title, file_mutating=False).task
        claim = store.claim(task.id, agent, "command")
        assert claim.outcome == "ok"
        return task.id, claim.ticket

    stopped, _ = held_by("near", "stopped at its ceiling")
    store.transition(stopped, "blocked")
    reviewed, ticket = held_by("near", "in review")
    store.await_review(reviewed, ticket=ticket)
    # Waits on the reviewed work: a hard fail of it would cancel this one.
    waiting = store.create_task(title="waits on the review", depends_on=[reviewed]).task.id
    mine, _ = held_by("near", "mine, running")
    theirs, _ = held_by("far", "far's, running")
    ready = store.create_task(title="ready", file_mutating=False).task.id
    _, machine_key = machines.mint("laptop", ["near"])
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="near", user=ada).key
    return {
        "stopped": stopped,
        "reviewed": reviewed,
        "waiting": waiting,
        "mine": mine,
        "theirs": theirs,
        "ready": ready,
        "keys": {"agent key": agent_key, "machine token": machine_key},
        "person": Token.objects.create(user=ada).key,
    }


REFUSED = [
    # (task, body, the error code)
    ("stopped", {"to": "todo"}, "person_required"),
    ("stopped", {"to": "in_progress", "agent_id": "near"}, "person_required"),
    ("reviewed", {"to": "in_progress", "agent_id": "near"}, "person_required"),
    ("reviewed", {"to": "todo"}, "person_required"),
    # Turning down work in review is a person's (GOVERNANCE §6), its own agent's too.
    ("reviewed", {"to": "blocked"}, "person_required"),
    ("ready", {"to": "cancelled"}, "person_required"),
    ("ready", {"to": "backlog"}, "person_required"),
    ("ready", {"to": "blocked"}, "person_required"),
    ("theirs", {"to": "blocked"}, "forbidden"),
    ("theirs", {"to": "in_review"}, "forbidden"),
]


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
@pytest.mark.parametrize(("task", "body", "code"), REFUSED)
def test_the_agent_side_moves_no_work_but_its_own_and_writes_nothing(
    board: dict[str, Any], credential: str, task: str, body: dict[str, Any], code: str
) -> None:
    api = client(board["keys"][credential])
    before = fingerprint()

    answer = api.post(f"/api/board/tasks/{board[task]}/transition", body)

    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"] == code
    assert fingerprint() == before


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_moves_its_own_held_work_and_claims_from_todo(
    board: dict[str, Any], credential: str
) -> None:
    api = client(board["keys"][credential])

    to_review = api.post(f"/api/board/tasks/{board['mine']}/transition", {"to": "in_review"})
    claimed = api.post(
        f"/api/board/tasks/{board['ready']}/transition", {"to": "in_progress", "agent_id": "near"}
    )

    assert to_review.status_code == 200, to_review.json()
    assert claimed.status_code == 200, claimed.json()
    statuses = dict(Task.objects.values_list("id", "status"))
    assert statuses[board["mine"]] == "in_review"
    assert statuses[board["ready"]] == "in_progress"


def test_a_person_takes_back_a_stopped_task_and_sends_back_work_in_review(
    board: dict[str, Any],
) -> None:
    api = client(board["person"])

    retried = api.post(f"/api/board/tasks/{board['stopped']}/transition", {"to": "todo"})
    sent_back = api.post(
        f"/api/board/tasks/{board['reviewed']}/transition",
        {"to": "in_progress", "agent_id": "near"},
    )
    cancelled = api.post(f"/api/board/tasks/{board['theirs']}/transition", {"to": "cancelled"})

    assert [r.status_code for r in (retried, sent_back, cancelled)] == [200, 200, 200]
    statuses = dict(Task.objects.values_list("id", "status"))
    assert statuses[board["stopped"]] == "todo"
    assert statuses[board["reviewed"]] == "in_progress"
    assert statuses[board["theirs"]] == "cancelled"


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_may_not_fail_its_own_work_in_review(
    board: dict[str, Any], credential: str
) -> None:
    # Failing work in review turns it down for the person who reviews it, and a hard
    # fail cancels what waits on it: the builder's REST fail is refused, nothing written.
    api = client(board["keys"][credential])
    before = fingerprint()

    answer = api.post(f"/api/board/tasks/{board['reviewed']}/fail", {"error": "never mind"})

    assert answer.status_code == 403, answer.json()
    assert answer.json()["error"] == "person_required"
    assert fingerprint() == before
    statuses = dict(Task.objects.values_list("id", "status"))
    assert statuses[board["reviewed"]] == "in_review"
    assert statuses[board["waiting"]] == "todo"


@pytest.mark.django_db(transaction=True)
def test_the_mcp_fail_task_of_work_in_review_is_refused(board: dict[str, Any]) -> None:
    caller = credentials.caller_for_key(board["keys"]["agent key"])
    assert caller is not None
    before = fingerprint()

    async def fail() -> Any:
        async with Client(build_server(caller)) as mcp:
            return await mcp.call_tool(
                "fail_task", {"task_id": board["reviewed"], "error": "never mind"}
            )

    answer = anyio.run(fail)

    assert answer.is_error
    assert answer.structured_content["error"] == "person_required"
    assert fingerprint() == before
    assert store.get_task(board["reviewed"]).status == "in_review"


def test_a_person_turns_down_work_in_review(board: dict[str, Any]) -> None:
    api = client(board["person"])

    answer = api.post(f"/api/board/tasks/{board['reviewed']}/fail", {"error": "not this"})

    assert answer.status_code == 200, answer.json()
    assert store.get_task(board["reviewed"]).status == "blocked"
