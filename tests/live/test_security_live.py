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


def test_a_staff_viewer_signed_in_to_the_real_admin_reads_no_key_and_no_secret(daphne, settings):
    """The admin as served (daphne, a real sign-in): a staff person granted *view*
    only sees whose key and its first characters, no filter on a key answers, and an
    agent's secret shows masked."""
    import http.cookiejar
    import re
    import urllib.parse

    from django.contrib.auth.models import Permission

    # The server checks passwords with the product's hashers, not the tests' fast one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    root = get_user_model().objects.create_superuser("root", "r@example.com", "pw")
    root_key = Token.objects.create(user=root).key
    registry.create_agent(
        id="bot",
        display_name="Bot",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "api_key": "sk-live-123"},
        owner=root,
    )
    viewer = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.set(
        Permission.objects.filter(codename__in=["view_tokenproxy", "view_user", "view_agent"])
    )
    base = daphne()
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(base + "/admin/login/", timeout=30).read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    login = urllib.parse.urlencode(
        {"username": "viewer", "password": "pw", "csrfmiddlewaretoken": csrf, "next": "/admin/"}
    ).encode()
    signed = opener.open(
        urllib.request.Request(
            base + "/admin/login/", data=login, headers={"Referer": base + "/admin/login/"}
        ),
        timeout=30,
    )
    assert signed.url.endswith("/admin/"), signed.read()[:500]

    def get(path: str) -> tuple[int, bytes]:
        try:
            with opener.open(base + path, timeout=30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    status, page = get("/admin/authtoken/tokenproxy/")
    assert status == 200 and b"root" in page and root_key[:6].encode() in page
    assert root_key.encode() not in page
    for guess in (root_key[:2], "zz"):
        assert get(f"/admin/auth/user/?auth_token__key__startswith={guess}")[0] == 400
    status, page = get("/admin/clawboo/agent/bot/change/")
    assert status == 200 and b"sk-live-123" not in page and b"********" in page
