from __future__ import annotations

import pytest
from django.core.management import call_command

from core import registry

pytestmark = pytest.mark.django_db


def test_teams_creator_becomes_member_and_sees_it(api, unchanged):
    created = api.post("/api/teams", {"id": "red", "name": "Red"}, format="json")
    assert created.status_code == 201
    assert {t["id"] for t in api.get("/api/teams").json()} == {"default", "red"}
    with unchanged():
        dup = api.post("/api/teams", {"id": "red"}, format="json")
    assert dup.status_code == 409


def test_staff_see_every_team(staff_api):
    from core import registry

    registry.create_team("blue", "Blue")
    assert "blue" in {t["id"] for t in staff_api.get("/api/teams").json()}


def test_agents_registry(api, staff_api, unchanged):
    made = staff_api.post(
        "/api/agents",
        {
            "id": "cc",
            "display_name": "Claude",
            "team": "default",
            "runtime": "claude-code",
            "owner": "ada",
        },
        format="json",
    )
    assert made.status_code == 201 and made.json()["participant_kind"] == "agent"
    assert made.json()["owner"] == "ada"
    with unchanged():
        bad = api.post(
            "/api/agents",
            {"id": "x", "display_name": "X", "team": "default", "runtime": "gpt"},
            format="json",
        )
    assert bad.status_code == 400 and bad.json()["field"] == "runtime"
    patched = api.patch("/api/agents/cc", {"display_name": "CC"}, format="json")
    assert patched.status_code == 200 and patched.json()["display_name"] == "CC"
    assert api.get("/api/agents/cc").json()["runtime"] == "claude-code"
    assert api.get("/api/agents/nope").status_code == 404


def test_create_agent_token_prints_a_working_key(capsys):
    call_command("create_agent_token", "robot", "--team", "default")
    printed = capsys.readouterr()
    key = printed.out.strip()
    # A user it had to create is said, on stderr (a mistyped name would be one).
    assert "created user 'robot'" in printed.err
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/board/tasks").status_code == 200
    call_command("create_agent_token", "robot")
    again = capsys.readouterr()
    assert again.out.strip() == key and "created user" not in again.err


def test_staff_name_a_teams_reviewer_agent_from_that_team_only(api, staff_api, unchanged):
    registry.create_agent(id="critic", display_name="Critic", team="default", runtime="command")
    registry.create_team("other")
    registry.create_agent(id="outsider", display_name="O", team="other", runtime="command")
    with unchanged():
        refused = api.patch("/api/teams/default", {"reviewer_agent": "critic"}, format="json")
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    wrong = staff_api.patch("/api/teams/default", {"reviewer_agent": "outsider"}, format="json")
    assert wrong.status_code == 400 and wrong.json()["error"] == "validation_error"
    named = staff_api.patch("/api/teams/default", {"reviewer_agent": "critic"}, format="json")
    assert named.status_code == 200 and named.json()["reviewer_agent"] == "critic"
    assert api.get("/api/teams/default").json()["reviewer_agent"] == "critic"
    cleared = staff_api.patch("/api/teams/default", {"reviewer_agent": None}, format="json")
    assert cleared.json()["reviewer_agent"] is None
    assert api.get("/api/teams/nope").status_code == 404


def test_a_command_agents_argv_that_could_never_run_is_400_at_the_door(staff_api, unchanged):
    """``settings.argv`` is the program and its arguments, a non-empty list of strings:
    given as anything else (a shell line, an empty list, numbers) it was stored, and the
    agent only went unhealthy at its first run. Refused when saved, naming the field;
    an agent saved without argv yet stays as before (the worker says what is missing)."""
    body = {"id": "sh", "display_name": "Sh", "team": "default", "runtime": "command"}
    made = staff_api.post("/api/agents", {**body, "settings": {"argv": ["true"]}}, format="json")
    assert made.status_code == 201
    for argv in ("python3 fix.py", [], ["echo", 3], None, {"0": "x"}):
        with unchanged():
            created = staff_api.post(
                "/api/agents", {**body, "id": "sh2", "settings": {"argv": argv}}, format="json"
            )
            patched = staff_api.patch("/api/agents/sh", {"settings": {"argv": argv}}, format="json")
        for answer in (created, patched):
            assert answer.status_code == 400, (argv, answer.json())
            assert answer.json()["field"] == "settings.argv", answer.json()
    human = staff_api.post(
        "/api/agents", {**body, "id": "hm", "runtime": "human", "settings": {}}, format="json"
    )
    assert human.status_code == 201
    moved = staff_api.patch("/api/agents/hm", {"runtime": "command"}, format="json")
    assert moved.status_code == 200  # no argv yet: saved, as before
    assert staff_api.patch("/api/agents/sh", {"settings": {}}, format="json").status_code == 200
