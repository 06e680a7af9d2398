"""Every API path refuses anonymous callers, and a team's token cannot see or touch
another team's tasks."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from board import store
from core import registry
from tests.api.conftest import fingerprint, make_client

pytestmark = pytest.mark.django_db
# The token endpoint is how a person without a key gets one (its refusals: below).
# The forge's webhook is anonymous too, its signature the check (401 bad_signature:
# tests/forges/test_webhooks.py).
PUBLIC = (
    "/api/schema/",
    "/api/docs/",
    "/api/auth/token",
    "/api/repositories/{repo_id}/forge/webhook",
    "/api/forge/{repo_id}/webhook",
)


def operations(client) -> list[tuple[str, str]]:
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    out = []
    for path, item in schema["paths"].items():
        for method in item:
            if method in ("get", "post", "patch", "put", "delete") and path not in PUBLIC:
                out.append((method, path))
    return out


def test_anonymous_callers_get_401_on_every_path(client):
    anonymous = APIClient()
    ops = operations(client)
    assert len(ops) > 40
    before = fingerprint()
    for method, path in ops:
        url = re.sub(r"\{[^}]+\}", "x", path)
        response = getattr(anonymous, method)(url, {}, format="json")
        assert response.status_code == 401, (method, url, response.status_code)
        assert response.json()["error"] == "unauthenticated"
    assert fingerprint() == before


def test_an_anonymous_caller_of_a_private_path_is_told_401_whatever_the_method(db):
    # Only a path open to anonymous callers (a forge's webhook) tells a stranger
    # which methods it takes (405); any other path asks for a key first.
    for method in ("put", "delete"):
        response = getattr(APIClient(), method)("/api/board/tasks", {}, format="json")
        assert response.status_code == 401, method
        assert response.json()["error"] == "unauthenticated"


def test_a_token_of_team_a_cannot_read_or_write_team_b(db):
    registry.create_team("red", "Red")
    registry.create_team("blue", "Blue")
    blue_task = store.create_task(title="blue secret", team="blue").task
    red = make_client("reddy", teams=("red",))
    registry.create_agent(
        id="red-bot", display_name="R", team="red", runtime="human", owner=red.user
    )
    before = fingerprint()
    tid = blue_task.id
    attempts = [
        ("get", f"/api/board/tasks/{tid}", None),
        ("patch", f"/api/board/tasks/{tid}", {"title": "mine"}),
        ("post", f"/api/board/tasks/{tid}/transition", {"to": "backlog"}),
        ("post", f"/api/board/tasks/{tid}/claim", {"agent_id": "red-bot"}),
        ("post", f"/api/board/tasks/{tid}/complete", {}),
        ("post", f"/api/board/tasks/{tid}/fail", {"error": "x"}),
        ("post", f"/api/board/tasks/{tid}/release", {}),
        ("post", f"/api/board/tasks/{tid}/verdict", {"verdict": "pass"}),
        ("post", f"/api/board/tasks/{tid}/deps", {"depends_on": tid}),
        ("post", f"/api/board/tasks/{tid}/comments", {"body": "hi"}),
        ("get", f"/api/board/tasks/{tid}/comments", None),
        ("get", f"/api/board/tasks/{tid}/executions", None),
        ("post", f"/api/board/tasks/{tid}/cancel-dependents", {}),
        ("get", f"/api/board/tasks/{tid}/workspace", None),
        ("get", "/api/teams/blue/chat", None),
        ("get", "/api/teams/blue/events", None),
    ]
    for method, url, body in attempts:
        response = getattr(red, method)(url, body or {}, format="json")
        assert response.status_code in (403, 404), (method, url, response.status_code)
    listed = red.get("/api/board/tasks?team=blue").json()["results"]
    assert listed == []
    # Another team is answered exactly like a team that does not exist: no oracle.
    create = red.post("/api/board/tasks", {"title": "x", "team": "blue"}, format="json")
    ghost = red.post("/api/board/tasks", {"title": "x", "team": "ghost"}, format="json")
    assert create.status_code == ghost.status_code == 400
    assert create.json()["detail"] == ghost.json()["detail"].replace("ghost", "blue")
    assert (
        red.post(
            "/api/board/claim-next", {"agent_id": "red-bot", "team": "blue"}, format="json"
        ).status_code
        == 400
    )
    # claim-next without a team only ever reaches the caller's own teams
    assert (
        red.post("/api/board/claim-next", {"agent_id": "red-bot"}, format="json").status_code == 204
    )
    assert fingerprint() == before


def test_a_person_trades_their_password_for_their_own_key_and_nothing_else(db, settings):
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user("pat", password="pat-secret")
    anonymous = APIClient()
    before = fingerprint()
    refusals = [
        {"username": "pat", "password": "wrong"},
        {"username": "nobody", "password": "pat-secret"},
    ]
    for body in refusals:
        answer = anonymous.post("/api/auth/token", body, format="json")
        assert answer.status_code == 401
        assert answer.json() == {
            "error": "unauthenticated",
            "detail": "wrong username or password",
        }
    bad = anonymous.post("/api/auth/token", {"username": "pat", "password": 5}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "password"
    assert fingerprint() == before
    user.is_active = False
    user.save()
    inactive = anonymous.post(
        "/api/auth/token", {"username": "pat", "password": "pat-secret"}, format="json"
    )
    assert inactive.status_code == 401
    user.is_active = True
    user.save()
    good = anonymous.post(
        "/api/auth/token", {"username": "pat", "password": "pat-secret"}, format="json"
    )
    assert good.status_code == 200
    assert good.json() == {"token": Token.objects.get(user=user).key, "username": "pat"}
    again = anonymous.post(
        "/api/auth/token", {"username": "pat", "password": "pat-secret"}, format="json"
    )
    assert again.json()["token"] == good.json()["token"]  # one key per user
    me = APIClient(HTTP_AUTHORIZATION=f"Token {good.json()['token']}").get("/api/whoami")
    assert me.json()["username"] == "pat"
