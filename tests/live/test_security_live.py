"""Issue 22 against the real server (daphne, the test database): status, error code
and nothing written, for the refusals a hostile or careless client meets first."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from board import store
from core import registry
from core.models import Agent, Event
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db(transaction=True)
websockets_sync = pytest.importorskip("websockets.sync.client")


def call(base: str, key: str | None, method: str, path: str, body: Any = None, raw=None):
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Token {key}"
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - loopback
            return response.status, response.headers.get("Content-Type"), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read()


def refused(answer, status: int, code: str) -> dict:
    got, content_type, body = answer
    assert got == status, body[:300]
    assert content_type.startswith("application/json"), body[:300]
    data = json.loads(body)
    assert data["error"] == code, data
    return data


@pytest.fixture
def people(capsys):
    """ada (non-staff) with a token bound to her agent ada-a, and a second agent ada-b."""
    call_command("create_agent_token", "ada", "--team", "default", "--agent", "ada-a")
    bound = capsys.readouterr().out.strip()
    ada = get_user_model().objects.get(username="ada")
    registry.create_agent(id="ada-b", display_name="B", team="default", runtime="human", owner=ada)
    return {"bound": bound, "user": Token.objects.create(user=ada).key}


def test_a_token_for_agent_a_cannot_claim_as_b_and_a_non_staff_user_cannot_register_commands(
    daphne, people
):
    base = daphne()
    task = store.create_task(title="t").task
    before = fingerprint()
    refused(
        call(
            base,
            people["bound"],
            "POST",
            f"/api/board/tasks/{task.id}/claim",
            {"agent_id": "ada-b"},
        ),
        403,
        "forbidden",
    )
    refused(
        call(
            base,
            people["user"],
            "POST",
            "/api/agents",
            {
                "id": "evil",
                "display_name": "E",
                "team": "default",
                "runtime": "command",
                "settings": {"argv": ["sh", "-c", "id"]},
            },
        ),
        403,
        "forbidden",
    )
    assert fingerprint() == before and not Agent.objects.filter(pk="evil").exists()
    status, _, body = call(
        base, people["bound"], "POST", f"/api/board/tasks/{task.id}/claim", {"agent_id": "ada-a"}
    )
    assert status == 200 and json.loads(body)["task"]["assignee_agent_id"] == "ada-a"


def test_unstorable_and_oversized_bodies_are_json_refusals_and_the_board_still_reads(
    daphne, people
):
    base = daphne()
    key = people["user"]
    store.create_task(title="t")
    before = fingerprint()
    lone = b'{"title": "t", "labels": ["\\ud83d"]}'
    refused(call(base, key, "POST", "/api/board/tasks", raw=lone), 400, "validation_error")
    refused(
        call(base, key, "POST", "/api/board/tasks", raw=b'{"title": "a\\u0000"}'),
        400,
        "validation_error",
    )
    deep = b'{"title": "t", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    refused(call(base, key, "POST", "/api/board/tasks", raw=deep), 400, "validation_error")
    big = json.dumps({"title": "t", "description": "x" * (3 * 1024 * 1024)}).encode()
    refused(call(base, key, "POST", "/api/board/tasks", raw=big), 413, "payload_too_large")
    refused(call(base, key, "POST", "/api/no/such/path", {}), 404, "not_found")
    refused(call(base, None, "POST", "/api/no/such/path", {}), 404, "not_found")
    refused(call(base, key, "GET", "/api/board/tasks?cursor=cD1hYmM="), 400, "validation_error")
    assert fingerprint() == before
    assert call(base, key, "GET", "/api/board/tasks?team=default")[0] == 200
    assert call(base, key, "GET", "/api/teams/default/events?since=0")[0] == 200


def test_websocket_token_clients_need_no_origin_anonymous_get_4401_bad_frames_an_error(
    daphne, people
):
    base = daphne().replace("http://", "ws://")
    url = f"{base}/ws/board/?team=default"
    # No Origin header at all: a script, not a browser.
    with websockets_sync.connect(f"{url}&token={people['user']}", open_timeout=10) as ws:
        hello = json.loads(ws.recv(timeout=10))
        assert hello["type"] == "hello"
        ws.send("this is not JSON")
        error = json.loads(ws.recv(timeout=10))
        assert error["type"] == "error" and error["error"] == "validation_error"
        store.create_task(title="still open")  # the socket stayed open: it gets the change
        while True:
            frame = json.loads(ws.recv(timeout=10))
            if frame["type"] == "task-change":
                assert frame["task"]["title"] == "still open"
                break
    before = Event.objects.count()
    with websockets_sync.connect(url, open_timeout=10) as anonymous:
        with pytest.raises(Exception) as closed:
            anonymous.recv(timeout=10)
    assert getattr(closed.value, "rcvd", None) is not None and closed.value.rcvd.code == 4401
    assert Event.objects.count() == before
