"""Approval before work over REST (GOVERNANCE §5): which tasks wait, who decides,
what a decision, an edit and the TTL do, and how the board's columns show them."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core.management import call_command
from rest_framework.test import APIClient

from board import store
from core import chat, registry
from core.machines import new_key
from core.models import AgentToken, Event
from routines import fire as routine_fire
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert body["error"] == code, body
    return body


def agent_key_client(agent) -> APIClient:
    key = new_key()
    AgentToken.objects.create(key=key, agent=agent, user=agent.owner)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_task_a_person_files_without_risk_needs_no_approval(api):
    body = api.post("/api/board/tasks", {"title": "plain"}, format="json").json()
    assert body["approval"] is None


def test_delegated_risky_and_team_ruled_tasks_wait_for_approval(api, staff_api, agent):
    delegated = api.post(
        "/api/board/tasks", {"title": "sub", "created_by_agent_id": agent.id}, format="json"
    ).json()
    risky = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    for body in (delegated, risky):
        assert body["approval"]["state"] == "required"
        assert body["approval"]["by"] is None and body["approval"]["at"]
    refused(
        api.patch("/api/teams/default", {"approval_required": True}, format="json"),
        403,
        "forbidden",
    )
    team = staff_api.patch("/api/teams/default", {"approval_required": True}, format="json")
    assert team.status_code == 200 and team.json()["approval_required"] is True
    ruled = api.post("/api/board/tasks", {"title": "any"}, format="json").json()
    assert ruled["approval"]["state"] == "required"


def test_no_claim_takes_a_waiting_task_until_a_person_approves(api, agent):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    url = f"/api/board/tasks/{task['id']}"
    claim = refused(
        api.post(f"{url}/claim", {"agent_id": agent.id}, format="json"), 409, "approval_required"
    )
    assert (
        api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json").status_code == 204
    )
    move = refused(
        api.post(f"{url}/transition", {"to": "in_progress", "agent_id": agent.id}, format="json"),
        409,
        "approval_required",
    )
    # Each door says who decides and where (it said only that the task waits).
    for body in (claim, move):
        assert "Needs approval" in body["detail"], body
        assert f"clawboo task approve {task['id']}" in body["detail"]
        assert f"POST /api/board/tasks/{task['id']}/approval" in body["detail"]

    decided = api.post(f"{url}/approval", {"decision": "approve", "reason": "fine"}, format="json")

    assert decided.status_code == 200
    approval = decided.json()["approval"]
    assert approval["state"] == "approved" and approval["by"] == "ada"
    assert approval["revision"] == task["revision"] and approval["reason"] == "fine"
    claimed = api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")
    assert claimed.status_code == 200 and claimed.json()["task"]["id"] == task["id"]


def test_every_decision_is_audited_with_the_user_in_the_event_log(api):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    api.post(
        f"/api/board/tasks/{task['id']}/approval",
        {"decision": "deny", "reason": "too broad"},
        format="json",
    )

    event = Event.objects.filter(task_id=task["id"], kind="approval_decided").get()
    assert event.payload["actor"] == "ada"
    assert event.payload["task"]["approval"]["state"] == "denied"
    assert event.payload["task"]["approval"]["by"] == "ada"
    assert event.payload["task"]["approval"]["at"] == event.payload["task"]["updated_at"]
    # The team's chat says who decided.
    line = chat.recent("default", limit=1)[0]
    assert line["body"] == "ada denied 'r': too broad" and line["actor"] == "ada"


def test_an_agent_bound_key_never_decides(api, agent, unchanged):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    bot = agent_key_client(agent)
    with unchanged():
        refused(
            bot.post(
                f"/api/board/tasks/{task['id']}/approval", {"decision": "approve"}, format="json"
            ),
            403,
            "person_required",
        )


def test_another_teams_member_cannot_see_the_task_to_decide(api):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    registry.create_team("red")
    outsider = make_client("mallory", teams=("red",))
    refused(
        outsider.post(
            f"/api/board/tasks/{task['id']}/approval", {"decision": "approve"}, format="json"
        ),
        404,
        "not_found",
    )


def test_an_edit_after_approval_sends_it_back_to_required(api):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    url = f"/api/board/tasks/{task['id']}"
    api.post(f"{url}/approval", {"decision": "approve"}, format="json")

    edited = api.patch(url, {"description": "and more"}, format="json").json()

    assert edited["approval"]["state"] == "required" and edited["approval"]["by"] is None
    assert Event.objects.filter(task_id=task["id"], kind="approval_required").exists()
    # A priority change is not new work: the approval stands.
    api.post(f"{url}/approval", {"decision": "approve"}, format="json")
    assert api.patch(url, {"priority": 5}, format="json").json()["approval"]["state"] == "approved"


def test_a_decision_on_a_revision_the_person_did_not_see_is_refused(api, unchanged):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    url = f"/api/board/tasks/{task['id']}"
    api.patch(url, {"title": "changed meanwhile"}, format="json")
    with unchanged():
        refused(
            api.post(
                f"{url}/approval",
                {"decision": "approve", "revision": task["revision"]},
                format="json",
            ),
            409,
            "conflict",
        )


def test_adding_the_risk_label_makes_a_plain_task_wait(api):
    task = api.post("/api/board/tasks", {"title": "plain"}, format="json").json()
    edited = api.patch(f"/api/board/tasks/{task['id']}", {"labels": ["risk"]}, format="json")
    assert edited.json()["approval"]["state"] == "required"


def test_a_denied_task_stays_out_of_dispatch_and_can_be_approved_later(api, agent):
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    url = f"/api/board/tasks/{task['id']}"
    api.post(f"{url}/approval", {"decision": "deny", "reason": "too broad"}, format="json")
    refused(
        api.post(f"{url}/claim", {"agent_id": agent.id}, format="json"), 409, "approval_required"
    )
    assert api.get(url).json()["status"] == "todo"
    assert api.post(f"{url}/approval", {"decision": "approve"}, format="json").status_code == 200
    assert api.post(f"{url}/claim", {"agent_id": agent.id}, format="json").status_code == 200
    # Once work started, the decision is closed.
    refused(api.post(f"{url}/approval", {"decision": "deny"}, format="json"), 409, "conflict")


def test_a_task_that_needs_no_approval_cannot_be_decided(api):
    task = api.post("/api/board/tasks", {"title": "plain"}, format="json").json()
    refused(
        api.post(f"/api/board/tasks/{task['id']}/approval", {"decision": "approve"}, format="json"),
        409,
        "conflict",
    )
    refused(
        api.post(f"/api/board/tasks/{task['id']}/approval", {"decision": "maybe"}, format="json"),
        400,
        "validation_error",
    )


def test_an_unanswered_approval_expires_after_the_ttl(api, settings):
    settings.CLAWBOO_APPROVAL_TTL_MS = 60_000
    task = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()
    assert store.expire_unanswered() == []
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)):
        call_command("reconcile", "--approvals")
    body = api.get(f"/api/board/tasks/{task['id']}").json()
    assert body["approval"]["state"] == "expired"
    assert Event.objects.filter(task_id=task["id"], kind="approval_expired").count() == 1
    # Still waiting for a person: approvable late.
    late = api.post(
        f"/api/board/tasks/{task['id']}/approval", {"decision": "approve"}, format="json"
    )
    assert late.json()["approval"]["state"] == "approved"


def test_the_board_shows_waiting_tasks_in_their_own_column_first(api):
    plain = api.post("/api/board/tasks", {"title": "plain"}, format="json").json()
    risky = api.post("/api/board/tasks", {"title": "r", "labels": ["risk"]}, format="json").json()

    board = api.get("/api/board/columns?team=default").json()

    assert list(board["columns"])[0] == "needs_approval"
    assert [t["id"] for t in board["columns"]["needs_approval"]["results"]] == [risky["id"]]
    assert [t["id"] for t in board["columns"]["todo"]["results"]] == [plain["id"]]
    assert board["counts"]["needs_approval"] == 1 and board["counts"]["todo"] == 1
    assert board["total"] == 2
    counts = api.get("/api/board/counts?team=default").json()["counts"]
    assert counts["needs_approval"] == 1 and counts["todo"] == 1
    waiting = api.get("/api/board/tasks?team=default&approval=waiting").json()["results"]
    assert [t["id"] for t in waiting] == [risky["id"]]

    api.post(f"/api/board/tasks/{risky['id']}/approval", {"decision": "approve"}, format="json")
    board = api.get("/api/board/columns?team=default").json()
    assert board["columns"]["needs_approval"]["results"] == []
    assert {t["id"] for t in board["columns"]["todo"]["results"]} == {plain["id"], risky["id"]}


def test_a_routine_whose_template_asks_for_approval_files_waiting_tasks(api, agent):
    from routines import store as routine_store
    from routines.models import Routine

    routine = routine_store.create_routine(
        agent_id=agent.id,
        team="default",
        cron_spec="0 9 * * *",
        task_template={"title": "nightly", "approval_required": True},
    )
    task = routine_fire.materialize_task(Routine.objects.get(pk=routine.id), 1_000)
    assert task.approval["state"] == "required"
