"""A refused key says what to do: the API's 401 names the header and where a key comes
from, and the terminal and a remote worker pass that on with their own next step."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rest_framework.test import APIClient

from clawboo import cli, people
from tests.api.conftest import fingerprint, make_client

pytestmark = pytest.mark.django_db


def refusal(**headers: str) -> dict[str, Any]:
    answer = APIClient().get("/api/board/tasks", **headers)
    assert answer.status_code == 401
    return answer.json()


def test_a_refused_call_says_how_to_send_a_key_and_where_one_comes_from():
    from rest_framework.authtoken.models import Token

    key = Token.objects.get(user=make_client("ada").user).key
    before = fingerprint()
    # It said "Authentication credentials were not provided." and "invalid token".
    missing = refusal()
    assert missing["error"] == "unauthenticated"
    assert "Authorization: Token <key>" in missing["detail"]
    assert "clawboo create_agent_token" in missing["detail"]
    # A key sent as Bearer (as /mcp/ takes it) was "not provided" too.
    bearer = refusal(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert "Authorization: Token <key>" in bearer["detail"] and "Bearer" in bearer["detail"]
    wrong = refusal(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert wrong["detail"].startswith("invalid token")
    assert "clawboo create_agent_token" in wrong["detail"]
    assert fingerprint() == before
    # The key itself still works, as Token.
    assert APIClient().get("/api/whoami", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


@pytest.fixture
def refusing_server() -> Iterator[str]:
    """A server answering every call with the API's own 401 for an unknown key."""
    body = json.dumps(refusal(HTTP_AUTHORIZATION="Token " + "0" * 40)).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_terminal_and_a_worker_say_what_to_do_with_a_refused_key(
    refusing_server, tmp_path, monkeypatch, capsys
):
    # The terminal said "401 unauthenticated: the key was refused" and no more.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("CLAWBOO_TOKEN", raising=False)
    monkeypatch.setenv("CLAWBOO_SERVER", refusing_server)
    people.save_login(refusing_server, "stale-key", "ada")
    with pytest.raises(people.Failure) as failed:
        people.Client.from_login().call("GET", "/api/whoami")
    assert failed.value.line.startswith("clawboo: 401 unauthenticated: the key was refused")
    assert f"clawboo login --server {refusing_server}" in failed.value.line
    # A key from the environment is the one to change.
    monkeypatch.setenv("CLAWBOO_TOKEN", "stale-key")
    with pytest.raises(people.Failure) as failed:
        people.Client.from_login().call("GET", "/api/whoami")
    assert "CLAWBOO_TOKEN" in failed.value.line
    # The worker printed the body as a Python dict and stopped.
    assert cli.worker(["--server", refusing_server, "--token", "stale-key"]) == cli.EXIT_REVOKED
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("clawboo worker: the server refused the token: invalid token")
    assert "{" not in line and "clawboo create_machine_token" in line
    # One answer: the server's advice to a person (a key from create_agent_token) is not
    # a worker host's, whose key create_machine_token mints.
    assert "create_agent_token" not in line, line
