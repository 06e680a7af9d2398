"""Routes, labels and limits over REST (GOVERNANCE §1-2, API.md "Added in turn 3")."""

from __future__ import annotations

import pytest

from core import registry

pytestmark = pytest.mark.django_db


def test_a_task_created_with_a_route_answers_not_routed_to_another_agent(api, agent, unchanged):
    other = registry.create_agent(
        id="bob-bot", display_name="Bob", team="default", runtime="codex", owner=api.user
    )
    created = api.post(
        "/api/board/tasks", {"title": "for bob", "route": {"agent": other.id}}, format="json"
    )
    assert created.status_code == 201, created.json()
    task = created.json()
    assert task["route"] == {"agent": "bob-bot", "runtime": None, "labels": []}

    with unchanged():
        refused = api.post(
            f"/api/board/tasks/{task['id']}/claim", {"agent_id": agent.id}, format="json"
        )
    assert refused.status_code == 409 and refused.json()["error"] == "not_routed"
    nothing = api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")
    assert nothing.status_code == 204
    taken = api.post("/api/board/claim-next", {"agent_id": "bob-bot"}, format="json")
    assert taken.status_code == 200 and taken.json()["task"]["id"] == task["id"]


def test_another_teams_agent_in_a_route_is_400_naming_the_field(api, unchanged):
    registry.ensure_team("blue")
    registry.create_agent(id="blue-bot", display_name="B", team="blue", runtime="command")
    with unchanged():
        refused = api.post(
            "/api/board/tasks", {"title": "t", "route": {"agent": "blue-bot"}}, format="json"
        )
    assert refused.status_code == 400
    assert refused.json()["error"] == "validation_error"
    assert refused.json()["field"] == "route.agent"


def test_a_route_is_edited_with_patch(api, agent):
    task = api.post("/api/board/tasks", {"title": "t"}, format="json").json()
    patched = api.patch(
        f"/api/board/tasks/{task['id']}",
        {"route": {"runtime": "codex", "labels": ["gpu"]}},
        format="json",
    )
    assert patched.status_code == 200, patched.json()
    assert patched.json()["route"] == {"agent": None, "runtime": "codex", "labels": ["gpu"]}
    cleared = api.patch(f"/api/board/tasks/{task['id']}", {"route": None}, format="json")
    assert cleared.json()["route"] is None


def test_an_agent_carries_labels_limit_state_and_health(api):
    created = api.post(
        "/api/agents",
        {
            "id": "gpu-bot",
            "display_name": "GPU",
            "team": "default",
            "runtime": "human",
            "labels": ["gpu", "ssd"],
            "max_concurrent": 3,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["labels"] == ["gpu", "ssd"] and body["max_concurrent"] == 3
    assert body["state"] == "active" and body["state_reason"] == ""
    assert body["health"] == {"ok": None, "detail": "", "checked_at": None}
    patched = api.patch("/api/agents/gpu-bot", {"max_concurrent": 0}, format="json")
    assert patched.status_code == 400 and patched.json()["field"] == "max_concurrent"


def test_claim_over_the_limit_is_409_limit_reached(api, agent, unchanged):
    registry.update_agent(agent.id, {"max_concurrent": 1})
    first = api.post("/api/board/tasks", {"title": "a"}, format="json").json()
    second = api.post("/api/board/tasks", {"title": "b"}, format="json").json()
    claimed = api.post(
        f"/api/board/tasks/{first['id']}/claim", {"agent_id": agent.id}, format="json"
    )
    assert claimed.status_code == 200
    with unchanged():
        refused = api.post(
            f"/api/board/tasks/{second['id']}/claim", {"agent_id": agent.id}, format="json"
        )
    assert refused.status_code == 409 and refused.json()["error"] == "limit_reached"
    passed = api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")
    assert passed.status_code == 204


def test_a_person_pauses_and_resumes_an_agent_and_healthz_lists_it(api, staff_api, agent):
    from core.models import Agent

    paused = api.post(f"/api/agents/{agent.id}/pause", {"reason": "rotating keys"}, format="json")
    assert paused.status_code == 200, paused.json()
    assert paused.json()["state"] == "paused" and paused.json()["state_reason"] == "rotating keys"
    assert paused.json()["paused_by"] == "ada"
    task = api.post("/api/board/tasks", {"title": "t"}, format="json").json()
    refused = api.post(
        f"/api/board/tasks/{task['id']}/claim", {"agent_id": agent.id}, format="json"
    )
    assert refused.status_code == 409 and refused.json()["error"] == "agent_paused"
    nothing = api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")
    assert nothing.status_code == 409 and nothing.json()["error"] == "agent_paused"

    resumed = api.post(f"/api/agents/{agent.id}/resume", {}, format="json")
    assert resumed.status_code == 200 and resumed.json()["state"] == "active"

    Agent.objects.filter(pk=agent.id).update(health_ok=False, health_detail="claude not found")
    listed = api.get("/api/agents").json()
    assert listed[0]["state"] == "unhealthy" and listed[0]["state_reason"] == "claude not found"
    # Health is not a directory (GOVERNANCE §6): staff see the agent, a member not.
    healthz = staff_api.get("/healthz").json()
    assert healthz["parts"]["agents"]["unhealthy"][0]["id"] == agent.id
    assert "unhealthy" not in api.get("/healthz").json()["parts"]["agents"]
    assert "agents" not in healthz["failing"]


def test_another_teams_member_cannot_pause_an_agent(api, agent):
    from tests.api.conftest import make_client

    registry.ensure_team("blue")
    stranger = make_client("eve", teams=("blue",))
    answer = stranger.post(f"/api/agents/{agent.id}/pause", {}, format="json")
    assert answer.status_code == 404 and answer.json()["error"] == "not_found"
