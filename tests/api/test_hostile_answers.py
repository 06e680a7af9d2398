"""What tests/api/test_hostile_sweep.py found, each held on its own: a refusal that
sent a megabyte back, a repeated query parameter read as its last, a schedule's
``domain`` dropped unread, a resume's ``reason`` taken unread."""

from __future__ import annotations

import pytest

from core.errors import WORD_SHOWN_MAX, ValidationFailed, shortened
from routines.schedules import ROUTINE_SOURCE

pytestmark = pytest.mark.django_db

MB = "x" * (1 << 20)


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    body = response.json()
    assert body["error"] == code, body
    return body


def test_a_refusal_quotes_a_megabyte_id_cut_not_whole(api, unchanged):
    # It answered "team: no team 'xxx…'" with the whole megabyte in it, twice over
    # for a dependency (the detail and the extra field).
    with unchanged():
        for path, body in (
            ("/api/board/tasks", {"title": "t", "team": MB}),
            ("/api/board/claim-next", {"agent_id": MB}),
        ):
            answer = api.post(path, body, format="json")
            assert answer.status_code == 400
            assert len(answer.content) < 1000, len(answer.content)
            assert "x…'" in answer.json()["detail"], answer.json()["detail"]


def test_what_a_refusal_names_is_cut_only_past_what_an_id_may_be():
    ordinary = "no agent 'ada-bot' in team " + repr("a" * 128)
    assert shortened(ordinary) == ordinary
    assert shortened("w" * WORD_SHOWN_MAX) == "w" * WORD_SHOWN_MAX
    error = ValidationFailed("team", f"no team {'y' * 5000!r}", team="z" * 5000)
    assert len(error.detail) < 200 and len(error.extra["team"]) < 200


@pytest.mark.parametrize(
    "path",
    [
        "/api/board/tasks?team=default&team=other",
        "/api/board/tasks?limit=1&limit=500",
        "/api/agents?team=a&team=b",
        "/api/teams/default/chat?limit=5&limit=6",
    ],
)
def test_a_query_parameter_given_twice_is_refused_naming_it(api, path):
    # It answered as if filtered by the last value only.
    body = refused(api.get(path), 400, "validation_error")
    assert body["field"] == path.rsplit("&", 1)[-1].split("=")[0]
    assert "more than once" in body["detail"]


def test_a_schedule_says_its_domain_right_or_is_refused(staff_api, agent, unchanged):
    body = {
        "source": ROUTINE_SOURCE,
        "agent_id": agent.id,
        "team": "default",
        "cron_spec": "0 * * * *",
    }
    # Any domain at all was dropped unread: a routine made from a body saying it
    # was the gateway's own-life work, or a megabyte.
    with unchanged():
        refused(
            staff_api.post("/api/schedules", {**body, "domain": "runtime-own-life"}, format="json"),
            422,
            "domain_violation",
        )
        answer = staff_api.post("/api/schedules", {**body, "domain": MB}, format="json")
        assert refused(answer, 400, "validation_error")["field"] == "domain"
        refused(
            staff_api.post("/api/schedules", {**body, "domain": None}, format="json"),
            400,
            "validation_error",
        )
    made = staff_api.post("/api/schedules", {**body, "domain": "team-task"}, format="json")
    assert made.status_code == 201, made.content[:300]


def test_a_resume_reason_is_held_to_the_pause_rule(api, agent, unchanged):
    paused = api.post(f"/api/agents/{agent.id}/pause", {"reason": "x"}, format="json")
    assert paused.status_code == 200
    with unchanged():
        for reason in ("r" * 2001, 5, ["a"]):
            answer = api.post(f"/api/agents/{agent.id}/resume", {"reason": reason}, format="json")
            assert refused(answer, 400, "validation_error")["field"] == "reason"
    answer = api.post(f"/api/agents/{agent.id}/resume", {"reason": "back"}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "active"
