"""A team's ``max_concurrent`` (GOVERNANCE §1): staff set it over REST (``PATCH
/api/teams/{id}``; null: no limit) and in the admin's team form, and the claim holds
it across racing processes."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.models import Task
from core import registry
from core.models import Team
from tests.api.conftest import make_client


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:500]
    body = response.json()
    assert body["error"] == code, body
    return body


@pytest.mark.django_db
def test_staff_set_and_clear_a_teams_limit_over_rest(staff_api):
    set_two = staff_api.patch("/api/teams/default", {"max_concurrent": 2}, format="json")
    assert set_two.status_code == 200 and set_two.json()["max_concurrent"] == 2
    assert Team.objects.get(pk="default").max_concurrent == 2
    assert staff_api.get("/api/teams/default").json()["max_concurrent"] == 2
    cleared = staff_api.patch("/api/teams/default", {"max_concurrent": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["max_concurrent"] is None
    assert Team.objects.get(pk="default").max_concurrent is None


@pytest.mark.django_db
@pytest.mark.parametrize("bad", [0, -1, "2", 2.5, True, 10_001])
def test_a_limit_under_one_or_not_an_integer_is_refused_and_writes_nothing(staff_api, bad):
    registry.create_agent(id="crit", display_name="Crit", team="default", runtime="command")
    body = refused(
        staff_api.patch(
            "/api/teams/default",
            {"max_concurrent": bad, "reviewer_agent": "crit", "approval_required": True},
            format="json",
        ),
        400,
        "validation_error",
    )
    assert body.get("field") == "max_concurrent"
    team = Team.objects.get(pk="default")
    # Nothing of the request was written, not even its valid fields.
    assert (team.max_concurrent, team.reviewer_agent_id, team.approval_required) == (
        None,
        None,
        False,
    )


@pytest.mark.django_db
def test_a_member_may_not_set_the_limit(api):
    refused(api.patch("/api/teams/default", {"max_concurrent": 2}, format="json"), 403, "forbidden")
    assert Team.objects.get(pk="default").max_concurrent is None


@pytest.mark.django_db
def test_the_admins_team_form_saves_the_limit(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    form = {"name": "Default", "max_concurrent": "3", "reviewer_agent": "", "members": []}
    response = client.post("/admin/clawboo/team/default/change/", form)
    assert response.status_code == 302, response.content[:3000]
    assert Team.objects.get(pk="default").max_concurrent == 3
    form["max_concurrent"] = ""
    assert client.post("/admin/clawboo/team/default/change/", form).status_code == 302
    assert Team.objects.get(pk="default").max_concurrent is None


@pytest.mark.django_db(transaction=True)
def test_a_team_limit_of_two_set_over_rest_holds_under_eight_racing_claimers(race):
    staff_api = make_client("root", staff=True)
    answer = staff_api.patch("/api/teams/default", {"max_concurrent": 2}, format="json")
    assert answer.status_code == 200
    for n in range(8):
        # Each agent may hold four: only the team's limit can stop them.
        registry.create_agent(
            id=f"a{n}", display_name=f"A{n}", team="default", runtime="command", max_concurrent=4
        )
    for n in range(20):
        store.create_task(title=f"job {n}")

    results = race([["drain", "--agent", f"a{n}"] for n in range(8)])

    claimed = [task_id for r in results for task_id in r["claimed"]]
    assert len(claimed) == 2, results
    assert Task.objects.filter(status="in_progress").count() == 2
