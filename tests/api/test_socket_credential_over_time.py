"""GOVERNANCE §6 over time: a board socket holds no more than its credential does.

A socket opened with a machine token, an agent's key or a person's session went on
receiving its team's board after the token was revoked, the key deleted, the session
signed out or the person removed from the team -- for as long as the socket stayed
open. The socket now looks at its credential again every
``STANDING_CHECK_SECONDS`` and closes (4401: the credential is gone; 4403: the team
is no longer the caller's) at the first look that finds it void."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from board import store
from clawboo.asgi import application
from core import consumers, machines, registry
from core.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHENTICATED
from core.models import AgentToken, Team

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def quick_looks(monkeypatch):
    monkeypatch.setattr(consumers, "STANDING_CHECK_SECONDS", 0.2, raising=False)


def after(path: str, void: Callable[[], Any], headers: list[tuple[bytes, bytes]] = ()) -> Any:
    """Open the socket, see its hello, void its credential, change the board: the
    socket's close code, or (still open after a quiet spell) the frames it was sent."""

    async def go() -> Any:
        ws = WebsocketCommunicator(application, path, headers=list(headers))
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "hello"
        await database_sync_to_async(void)()
        await database_sync_to_async(store.create_task)(title="after the credential went")
        texts: list[str] = []
        while True:
            if await ws.receive_nothing(timeout=3):
                break  # quiet: still open
            frame = await ws.receive_output(timeout=1)
            if frame["type"] == "websocket.close":
                await ws.disconnect()
                return frame["code"]
            texts.append(frame.get("text", ""))
        await ws.disconnect()
        return texts

    return async_to_sync(go)()


def test_a_revoked_machine_tokens_socket_is_closed():
    registry.create_agent(id="far", display_name="F", team="default", runtime="human")
    token, key = machines.mint("laptop", ["far"])
    closed = after(f"/ws/board/?team=default&token={key}", lambda: machines.revoke(token.pk))
    assert closed == CLOSE_UNAUTHENTICATED


def test_a_deleted_agent_keys_socket_is_closed():
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    registry.create_agent(id="far", display_name="F", team="default", runtime="human", owner=ada)
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="far", user=ada)
    closed = after(f"/ws/board/?team=default&token={key.key}", key.delete)
    assert closed == CLOSE_UNAUTHENTICATED


def session_socket(user: Any) -> list[tuple[bytes, bytes]]:
    browser = Client()
    browser.force_login(user)
    cookie = browser.cookies["sessionid"].value
    return [(b"cookie", f"sessionid={cookie}".encode()), (b"origin", b"http://localhost")]


def test_a_session_socket_closes_once_its_person_leaves_the_team_or_signs_out():
    ada = get_user_model().objects.create_user(username="ada", password="pw")
    registry.add_member("default", ada)
    headers = session_socket(ada)
    left = after(
        "/ws/board/?team=default",
        lambda: Team.objects.get(pk="default").members.remove(ada),
        headers,
    )
    assert left == CLOSE_FORBIDDEN
    registry.add_member("default", ada)
    headers = session_socket(ada)
    from django.contrib.sessions.models import Session

    signed_out = after("/ws/board/?team=default", lambda: Session.objects.all().delete(), headers)
    assert signed_out == CLOSE_UNAUTHENTICATED


def test_a_socket_whose_credential_holds_stays_open():
    registry.create_agent(id="far", display_name="F", team="default", runtime="human")
    _, key = machines.mint("laptop", ["far"])
    frames = after(f"/ws/board/?team=default&token={key}", lambda: None)
    assert isinstance(frames, list) and any("task-change" in text for text in frames)
