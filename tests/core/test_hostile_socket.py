"""The board's socket as a hostile client meets it: frames that are not JSON, not an
object, huge, or ask for a sequence or a log no one could have; a subscription to
another team's board, or to a team named with odd or unstorable text. Each bad frame
answers an ``error`` frame and the socket stays open (the next good ``since`` is
answered); a team the caller may not see is closed 4403 before anything is sent;
nothing is written."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from clawboo.asgi import application
from core import registry
from core.consumers import CLOSE_FORBIDDEN, SEQ_MAX
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db(transaction=True)

MB = "x" * (1 << 20)
BAD_FRAMES = {
    "not JSON": "{",
    "a JSON array": "[1, 2]",
    "a JSON string": '"since"',
    "a number": "3",
    "an unknown type": '{"type": "subscribe", "team": "blue"}',
    "a megabyte of text": MB,
    "a megabyte inside a frame": json.dumps({"type": "since", "seq": MB}),
    "seq past 64 bits": '{"type": "since", "seq": 9223372036854775808}',
    "seq past the bound": json.dumps({"type": "since", "seq": SEQ_MAX + 1}),
    "seq negative": '{"type": "since", "seq": -1}',
    "seq a float": '{"type": "since", "seq": 1e309}',
    "seq true": '{"type": "since", "seq": true}',
    "watch-log of a NUL id": '{"type": "watch-log", "task": "\\u0000"}',
    "watch-log of a lone surrogate": '{"type": "watch-log", "task": "\\ud800"}',
    "watch-log with a huge offset": '{"type": "watch-log", "task": "t", "offset": 1e400}',
    "deeply nested": "[" * 100_000 + "]" * 100_000,
}


@pytest.fixture
def key() -> str:
    """Ada's token: a member of default, not of blue."""
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    registry.create_team("blue", "Blue")
    store.create_task(title="blue's", team="blue")
    return Token.objects.create(user=ada).key


def test_a_bad_frame_is_an_error_frame_and_the_socket_stays_open(key):
    before = fingerprint()

    async def go() -> dict[str, Any]:
        ws = WebsocketCommunicator(application, f"/ws/board/?team=default&token={key}")
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=5))["type"] == "hello"
        answers = {}
        for what, frame in BAD_FRAMES.items():
            await ws.send_to(text_data=frame)
            answers[what] = await ws.receive_json_from(timeout=5)
        await ws.send_json_to({"type": "since", "seq": 0})
        await ws.receive_nothing(timeout=0.5)  # replay of whatever the log holds
        await ws.send_json_to({"type": "since", "seq": "x"})
        answers["still open"] = await ws.receive_json_from(timeout=5)
        await ws.disconnect()
        return answers

    answers = async_to_sync(go)()
    for what, answer in answers.items():
        assert answer["type"] == "error", (what, answer)
        assert answer["error"] == "validation_error" and answer["detail"], (what, answer)
    assert fingerprint() == before


@pytest.mark.parametrize(
    "team",
    ["blue", "no-such-team", "😀\u202e", "a" * 5000],
    ids=["another team's", "absent", "odd", "long"],
)
def test_a_board_the_caller_may_not_see_is_closed_4403_before_a_frame(key, team):
    before = fingerprint()

    async def go() -> Any:
        ws = WebsocketCommunicator(application, f"/ws/board/?team={quote(team)}&token={key}")
        await ws.connect()
        frame = await ws.receive_output(timeout=5)
        await ws.disconnect()
        return frame

    frame = async_to_sync(go)()
    assert frame == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}, frame
    assert fingerprint() == before


@pytest.mark.parametrize(
    "team", ["%00", "a%00b", "%ED%A0%80"], ids=["NUL", "inner NUL", "surrogate"]
)
def test_a_team_named_with_unstorable_text_is_refused_not_a_crash(key, team):
    async def go() -> Any:
        ws = WebsocketCommunicator(application, f"/ws/board/?team={team}&token={key}")
        await ws.connect()
        frame = await ws.receive_output(timeout=5)
        await ws.disconnect()
        return frame

    frame = async_to_sync(go)()
    assert frame["type"] == "websocket.close" and frame["code"] == CLOSE_FORBIDDEN, frame
