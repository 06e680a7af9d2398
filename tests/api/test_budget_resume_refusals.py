"""POST /api/budgets/{id}/resume, as each principal meets it (GOVERNANCE §3, §6): staff
holding the budget permission resume, with grace or without; a member, staff without
the permission, an agent's key (its owner staff) and a machine token are refused and
nothing changes -- the governed never resume the budget that stopped them. An unknown
id and another team's id answer alike; a bad grace is a 400."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.models import Budget
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import key_client, make_client

pytestmark = pytest.mark.django_db

PAUSED = {"scope": "team", "scope_id": "default", "window": "month", "limit_cents": 10}


@pytest.fixture
def paused(staff_api, agent) -> int:
    """A cap on team default, spent past its limit: paused."""
    pk = staff_api.post("/api/budgets", {**PAUSED, "mode": "cap"}, format="json").json()["id"]
    task = store.create_task(title="spent").task
    claimed = store.claim(task.id, agent.id, "command")
    run = store.open_execution(task.id, claimed.ticket)
    store.close_execution(run.id, "succeeded", cost_cents=12)
    assert staff_api.get(f"/api/budgets/{pk}").json()["status"] == "paused"
    return pk


def row(pk: int) -> tuple[Any, ...]:
    return tuple(
        Budget.objects.filter(pk=pk).values_list("pause_at_cents", "grace_cents", "updated_at")[0]
    )


def test_staff_with_the_budget_permission_resume_with_grace_or_without(staff_api, paused):
    resumed = staff_api.post(f"/api/budgets/{paused}/resume", {"grace_cents": 5}, format="json")
    assert resumed.status_code == 200, resumed.json()
    assert (resumed.json()["status"], resumed.json()["pause_at_cents"]) == ("soft_capped", 17)
    bare = staff_api.post(f"/api/budgets/{paused}/resume", {}, format="json")
    assert bare.status_code == 200 and bare.json()["pause_at_cents"] == 12


def test_a_member_may_not_resume_a_budget(api, paused, unchanged):
    before = row(paused)
    with unchanged():
        refused = api.post(f"/api/budgets/{paused}/resume", {"grace_cents": 5}, format="json")
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    # Who may, and what else ends the pause: not "budgets are written by staff".
    assert refused.json()["detail"] == (
        "a budget is resumed by staff with the permission to change budgets:"
        " ask one, or wait for its next window"
    )
    assert row(paused) == before


def test_staff_without_the_budget_permission_may_not_resume_it(paused, unchanged):
    sam = make_client("sam")
    get_user_model().objects.filter(username="sam").update(is_staff=True)
    before = row(paused)
    with unchanged():
        refused = sam.post(f"/api/budgets/{paused}/resume", {}, format="json")
    assert refused.status_code == 403
    assert row(paused) == before


def test_an_agents_key_never_resumes_the_budget_that_stopped_it(staff_api, paused, unchanged):
    # Its owner is staff with every permission: through the agent's key it is the agent.
    registry.create_agent(
        id="root-bot", display_name="r", team="default", runtime="human", owner=staff_api.user
    )
    key = AgentToken.objects.create(
        key=machines.new_key(), agent_id="root-bot", user=staff_api.user
    )
    before = row(paused)
    with unchanged():
        refused = key_client(key.key).post(f"/api/budgets/{paused}/resume", {"grace_cents": 5})
        # Refused before the body is read: a bad one changes nothing of the answer.
        bad = key_client(key.key).post(f"/api/budgets/{paused}/resume", {"grace_cents": 0})
    assert refused.status_code == 403 and refused.json()["error"] == "person_required"
    assert (bad.status_code, bad.json()["error"]) == (403, "person_required")
    assert row(paused) == before


def test_a_machine_token_never_resumes_a_budget(staff_api, agent, paused, unchanged):
    _, key = machines.mint("build-1", [agent.id], created_by=staff_api.user)
    before = row(paused)
    with unchanged():
        refused = key_client(key).post(f"/api/budgets/{paused}/resume", {})
    assert refused.status_code == 403 and refused.json()["error"] == "person_required"
    assert row(paused) == before


def test_another_teams_budget_answers_as_one_that_does_not_exist(staff_api):
    registry.create_team("other", "Other")
    pk = staff_api.post(
        "/api/budgets", {**PAUSED, "scope_id": "other", "mode": "cap"}, format="json"
    ).json()["id"]
    missing = pk + 1000
    theirs = staff_api.post(f"/api/budgets/{missing}/resume", {}, format="json")
    assert theirs.status_code == 404
    ada = make_client("ada2")  # default only
    hidden = ada.post(f"/api/budgets/{pk}/resume", {}, format="json")
    unknown = ada.post(f"/api/budgets/{missing}/resume", {}, format="json")
    assert (hidden.status_code, unknown.status_code) == (404, 404)
    assert hidden.json()["error"] == unknown.json()["error"] == "not_found"
    assert hidden.json()["detail"].replace(str(pk), "N") == unknown.json()["detail"].replace(
        str(missing), "N"
    )
    assert ada.post("/api/budgets/nope/resume", {}, format="json").status_code == 404


@pytest.mark.parametrize("grace", [0, -3, "five", 1.5, True])
def test_a_bad_grace_is_a_400_and_resumes_nothing(staff_api, paused, unchanged, grace):
    before = row(paused)
    with unchanged():
        refused = staff_api.post(
            f"/api/budgets/{paused}/resume", {"grace_cents": grace}, format="json"
        )
    assert refused.status_code == 400
    assert (refused.json()["error"], refused.json()["field"]) == ("validation_error", "grace_cents")
    assert row(paused) == before
    assert staff_api.get(f"/api/budgets/{paused}").json()["status"] == "paused"
