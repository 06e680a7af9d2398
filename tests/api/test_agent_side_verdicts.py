"""GOVERNANCE §6: the agent side never sets or lifts a verdict. A verdict a person
set against work (``POST …/verdict``: ``fail``) gates it out of ``done`` until a
person says otherwise -- but a move back to ``todo`` cleared it, and the agent side
brings one about on its own work: it gives the task back (``…/release``), fails it
softly, or stops renewing its lease. It then claimed the task again and completed
it ``done``, the person's ``fail`` gone. Such a verdict now stands when the work is
given up mid-run; a person's own move back to ``todo`` lifts it as before."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board import store
from board.models import Task
from board.store import recovery
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import key_client as client

pytestmark = pytest.mark.django_db


@pytest.fixture
def board(default_team: str) -> dict[str, Any]:
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    registry.create_agent(
        id="near",
        display_name="Near",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=ada,
    )
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="near", user=ada).key
    return {
        "agent key": client(agent_key),
        "machine token": client(machines.mint("laptop", ["near"])[1]),
        "person": client(Token.objects.create(user=ada).key),
    }


def failed_by_a_person(board: dict[str, Any]) -> tuple[str, str]:
    """A task agent ``near`` holds (not file-mutating: no judge of the server's runs
    on it), which a person has judged ``fail``."""
    task = store.create_task(title="judged by hand", file_mutating=False, max_attempts=5).task
    claim = store.claim(task.id, "near", "command")
    answer = board["person"].post(
        f"/api/board/tasks/{task.id}/verdict", {"verdict": "fail", "evidence": "wrong"}
    )
    assert answer.status_code == 200, answer.json()
    return task.id, claim.ticket


def _release(api: APIClient, task_id: str, ticket: str) -> None:
    assert api.post(f"/api/board/tasks/{task_id}/release", {"ticket": ticket}).status_code == 200


def _fail_softly(api: APIClient, task_id: str, ticket: str) -> None:
    answer = api.post(f"/api/board/tasks/{task_id}/fail", {"ticket": ticket, "error": "gave up"})
    assert answer.status_code == 200, answer.json()


def _let_the_lease_lapse(api: APIClient, task_id: str, ticket: str) -> None:
    past = store.now() - dt.timedelta(minutes=1)
    Task.objects.filter(pk=task_id).update(lease_until=past)
    assert recovery.release_lapsed_leases() == [task_id]


GIVE_UPS: dict[str, Callable[[APIClient, str, str], None]] = {
    "release": _release,
    "soft fail": _fail_softly,
    "lapsed lease": _let_the_lease_lapse,
}


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
@pytest.mark.parametrize("give_up", list(GIVE_UPS))
def test_work_a_person_failed_stays_failed_when_the_agent_side_gives_it_back(
    board: dict[str, Any], credential: str, give_up: str
) -> None:
    api = board[credential]
    task_id, ticket = failed_by_a_person(board)
    assert api.post(f"/api/board/tasks/{task_id}/complete", {"ticket": ticket}).status_code == 409

    GIVE_UPS[give_up](api, task_id, ticket)
    back = Task.objects.get(pk=task_id)
    assert (back.status, back.verdict) == ("todo", "fail")

    claimed = api.post(f"/api/board/tasks/{task_id}/claim", {"agent_id": "near"})
    assert claimed.status_code == 200, claimed.json()
    done = api.post(f"/api/board/tasks/{task_id}/complete", {"ticket": claimed.json()["ticket"]})

    assert done.status_code == 409, done.json()
    assert done.json()["error"] == "verification_required"
    assert Task.objects.get(pk=task_id).status == "in_progress"


def test_a_person_lifts_their_verdict_by_moving_the_work_back_to_todo(
    board: dict[str, Any],
) -> None:
    task_id, _ticket = failed_by_a_person(board)

    moved = board["person"].post(f"/api/board/tasks/{task_id}/transition", {"to": "todo"})

    assert moved.status_code == 200, moved.json()
    assert moved.json()["verification"] is None


def test_a_person_passes_the_work_after_the_agent_side_gave_it_back(
    board: dict[str, Any],
) -> None:
    api = board["agent key"]
    task_id, ticket = failed_by_a_person(board)
    _release(api, task_id, ticket)
    ticket = api.post(f"/api/board/tasks/{task_id}/claim", {"agent_id": "near"}).json()["ticket"]

    passed = board["person"].post(f"/api/board/tasks/{task_id}/verdict", {"verdict": "pass"})
    done = api.post(f"/api/board/tasks/{task_id}/complete", {"ticket": ticket})

    assert passed.status_code == 200
    assert done.status_code == 200, done.json()
    assert Task.objects.get(pk=task_id).status == "done"


def test_a_verdict_no_person_set_still_goes_with_work_given_back(board: dict[str, Any]) -> None:
    # The judge's verdict is about the work it judged: the next attempt is judged anew.
    task = store.create_task(title="judged by the server", file_mutating=False).task
    ticket = store.claim(task.id, "near", "command").ticket
    store.set_verdict(task.id, "fail", "red")

    _release(board["agent key"], task.id, ticket)

    assert Task.objects.get(pk=task.id).verdict is None
