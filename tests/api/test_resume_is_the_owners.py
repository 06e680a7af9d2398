"""Resuming an agent is its owner's or staff's, as editing it is (GOVERNANCE §6: "resume
an agent; edit an agent ... owner or staff"); pausing stays any member's: a brake
anyone may pull. Every door: REST, the admin's action, the board's Agents panel
(``may_resume`` in the list it reads)."""

from __future__ import annotations

import pytest

from core import registry
from core.models import Agent
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def paused(agent):
    """ada's agent, paused by its breaker after two failures were counted."""
    registry.pause_agent(agent.id, "3 runs failed", by="breaker")
    Agent.objects.filter(pk=agent.id).update(breaker_failures=3)
    return agent


def state(agent_id: str) -> tuple[str, int]:
    row = Agent.objects.get(pk=agent_id)
    return row.state, row.breaker_failures


def test_a_plain_member_may_not_resume_another_members_agent(api, paused, unchanged):
    bob = make_client("bob")
    with unchanged():
        refused = bob.post(f"/api/agents/{paused.id}/resume", {}, format="json")
    assert refused.status_code == 403, refused.content[:300]
    assert refused.json()["error"] == "forbidden"
    assert refused.json()["field"] == "id"
    # Refused before the body is read, as an edit of it is.
    bad = bob.post(f"/api/agents/{paused.id}/resume", "[]", content_type="application/json")
    assert bad.status_code == 403
    assert state(paused.id) == ("paused", 3)
    # The same answer the edit endpoint gives that member.
    edit = bob.patch(f"/api/agents/{paused.id}", {"max_concurrent": 2}, format="json")
    assert (edit.status_code, edit.json()["error"]) == (403, "forbidden")


def test_its_owner_and_staff_resume_it(api, staff_api, paused):
    resumed = api.post(f"/api/agents/{paused.id}/resume", {}, format="json")
    assert resumed.status_code == 200, resumed.content[:300]
    assert state(paused.id) == ("active", 0)
    registry.pause_agent(paused.id, "again", by="breaker")
    by_staff = staff_api.post(f"/api/agents/{paused.id}/resume", {}, format="json")
    assert by_staff.status_code == 200, by_staff.content[:300]
    assert state(paused.id)[0] == "active"


def test_any_member_still_pauses_an_agent(api, agent):
    bob = make_client("bob")
    paused = bob.post(f"/api/agents/{agent.id}/pause", {"reason": "it loops"}, format="json")
    assert paused.status_code == 200, paused.content[:300]
    assert paused.json()["state"] == "paused" and paused.json()["paused_by"] == "bob"


def test_the_agents_list_says_who_may_resume_it(api, staff_api, paused):
    bob = make_client("bob")

    def may(client) -> bool:
        (row,) = [a for a in client.get("/api/agents").json() if a["id"] == paused.id]
        return row["may_resume"]

    assert (may(api), may(staff_api), may(bob)) == (True, True, False)


def test_the_api_docs_say_resume_is_its_owners_or_staffs():
    # /api/docs/ said "Resume a paused agent of your team": a member who is not its owner
    # tried, and met 403.
    from clawboo.openapi import SUMMARIES

    assert SUMMARIES["agents_resume"].startswith("Resume a paused agent you own, or any as staff")
