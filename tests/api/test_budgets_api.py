"""/api/budgets: staff write, members read their own teams', another team's budget or
scope answers as an unknown one; claims of a paused scope answer 409 budget_paused."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import key_client, make_client

pytestmark = pytest.mark.django_db

TEAM_BUDGET = {"scope": "team", "scope_id": "default", "window": "month", "limit_cents": 100}


def test_staff_create_a_budget_and_members_read_it(staff_api, api):
    created = staff_api.post("/api/budgets", {**TEAM_BUDGET, "mode": "cap"}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["spent_cents"], body["status"], body["team"]) == (0, "active", "default")
    listed = api.get("/api/budgets").json()
    assert [b["id"] for b in listed] == [body["id"]]
    assert api.get(f"/api/budgets/{body['id']}").json()["limit_cents"] == 100


def test_a_member_may_not_write_budgets(staff_api, api):
    assert api.post("/api/budgets", TEAM_BUDGET, format="json").status_code == 403
    pk = staff_api.post("/api/budgets", TEAM_BUDGET, format="json").json()["id"]
    assert api.patch(f"/api/budgets/{pk}", {"limit_cents": 5}, format="json").status_code == 403
    assert api.delete(f"/api/budgets/{pk}").status_code == 403
    assert api.post(f"/api/budgets/{pk}/resume", {}, format="json").status_code == 403
    assert staff_api.get(f"/api/budgets/{pk}").json()["limit_cents"] == 100


def test_another_teams_budget_or_scope_is_unknown(staff_api):
    registry.create_team("other", "Other")
    outsider = make_client("eve", teams=("other",))
    pk = staff_api.post("/api/budgets", TEAM_BUDGET, format="json").json()["id"]
    assert outsider.get(f"/api/budgets/{pk}").status_code == 404
    assert outsider.get("/api/budgets").json() == []
    # A member writes no budget: refused before the body is read, so another team's
    # scope answers as their own team's does, and tells nothing.
    refused = outsider.post("/api/budgets", TEAM_BUDGET, format="json")
    own = outsider.post("/api/budgets", {**TEAM_BUDGET, "scope_id": "other"}, format="json")
    assert (refused.status_code, refused.json()) == (own.status_code, own.json())
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"


@pytest.mark.parametrize(
    "change",
    [{"scope": "planet"}, {"window": "week"}, {"mode": "stop"}, {"limit_cents": 0}],
)
def test_a_bad_budget_is_a_400(staff_api, change):
    response = staff_api.post("/api/budgets", {**TEAM_BUDGET, **change}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"


def test_a_paused_team_answers_budget_paused_and_resume_with_grace_lets_it_claim(
    staff_api, api, agent
):
    pk = staff_api.post(
        "/api/budgets", {**TEAM_BUDGET, "limit_cents": 10, "mode": "cap"}, format="json"
    ).json()["id"]
    spent = store.create_task(title="spent").task
    claimed = store.claim(spent.id, agent.id, "command")
    run = store.open_execution(spent.id, claimed.ticket)
    store.close_execution(run.id, "succeeded", cost_cents=12)
    task = store.create_task(title="next").task
    assert staff_api.get(f"/api/budgets/{pk}").json()["status"] == "paused"
    refused = api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": agent.id}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "budget_paused"
    refused = api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "budget_paused"
    resumed = staff_api.post(f"/api/budgets/{pk}/resume", {"grace_cents": 5}, format="json")
    assert resumed.status_code == 200 and resumed.json()["status"] == "soft_capped"
    assert resumed.json()["pause_at_cents"] == 17
    ok = api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": agent.id}, format="json")
    assert ok.status_code == 200


def test_a_task_carries_its_ceiling_and_cost(api):
    created = api.post("/api/board/tasks", {"title": "t", "max_run_cents": 25}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["max_run_cents"] == 25
    assert body["cost"] == {"cents": 0, "tokens": 0, "tree_cents": 0, "tree_tokens": 0}
    patched = api.patch(f"/api/board/tasks/{body['id']}", {"max_run_cents": None}, format="json")
    assert patched.json()["max_run_cents"] is None
    bad = api.patch(f"/api/board/tasks/{body['id']}", {"max_run_cents": 0}, format="json")
    assert bad.status_code == 400


def test_the_budgets_list_says_who_may_resume_them(staff_api, api):
    """The board's paused chip offers Resume only to whom the resume admits (staff
    holding the budget permission); a member, a staff person without it and an agent's
    key (its owner staff) read ``may_resume: false``."""
    pk = staff_api.post("/api/budgets", TEAM_BUDGET, format="json").json()["id"]
    bare_staff = make_client("sam")
    get_user_model().objects.filter(username="sam").update(is_staff=True)
    registry.create_agent(
        id="root-bot", display_name="r", team="default", runtime="human", owner=staff_api.user
    )
    agent_key = AgentToken.objects.create(
        key=machines.new_key(), agent_id="root-bot", user=staff_api.user
    ).key

    def may(client) -> tuple[bool, bool]:
        (listed,) = client.get("/api/budgets").json()
        return listed["may_resume"], client.get(f"/api/budgets/{pk}").json()["may_resume"]

    assert may(staff_api) == (True, True)
    assert may(api) == (False, False)
    assert may(bare_staff) == (False, False)
    assert may(key_client(agent_key)) == (False, False)
    # The answer agrees with the door itself.
    assert bare_staff.post(f"/api/budgets/{pk}/resume", {}, format="json").status_code == 403
