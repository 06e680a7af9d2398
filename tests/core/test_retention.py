"""Bounded history: old events, chat and idempotency records are pruned, and a
replay that asks for what went is told to reload, never handed a silent gap."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board import store
from clawboo.asgi import application
from core import events, registry, retention
from core.models import ChatMessage, Event, IdempotencyRecord

pytestmark = pytest.mark.django_db(transaction=True)

LONG_AGO = timezone.now() - dt.timedelta(days=90)


def history(default_team: str) -> int:
    """Ten events, the first six stamped long ago; returns the team's head."""
    for n in range(10):
        store.create_task(title=f"t{n}")
    Event.objects.filter(team_id=default_team, seq__lte=6).update(created_at=LONG_AGO)
    return events.latest_seq(default_team)


def test_prune_drops_the_old_prefix_of_each_log_and_keeps_the_rest(default_team):
    head = history(default_team)
    registry.ensure_team("other")
    store.create_task(title="recent, elsewhere", team="other")

    report = retention.prune()

    assert report.events == 6
    kept = list(Event.objects.filter(team_id=default_team).values_list("seq", flat=True))
    assert sorted(kept) == list(range(7, head + 1))
    assert Event.objects.filter(team_id="other").count() == 1
    assert store.list_tasks().count() == 11  # the board itself is never pruned


def test_retention_zero_keeps_everything(default_team, settings):
    settings.CLAWBOO_HISTORY_RETENTION_DAYS = 0
    history(default_team)
    assert retention.prune().events == 0
    assert Event.objects.count() == 10


def test_a_count_bound_keeps_each_team_s_newest_events(default_team, settings):
    settings.CLAWBOO_HISTORY_RETENTION_DAYS = 0
    settings.CLAWBOO_HISTORY_MAX_EVENTS = 4
    for n in range(10):
        store.create_task(title=f"t{n}")

    assert retention.prune().events == 6
    assert sorted(Event.objects.values_list("seq", flat=True)) == [7, 8, 9, 10]
    assert retention.prune().events == 0


def test_old_chat_and_expired_idempotency_records_go_too(default_team):
    from core import chat

    chat.post(default_team, "old news", author="ada")
    chat.post(default_team, "fresh", author="ada")
    ChatMessage.objects.filter(body="old news").update(created_at=LONG_AGO)
    user = get_user_model().objects.create_user(username="ada")
    IdempotencyRecord.objects.create(
        user=user, key="k", method="POST", path="/api/x", body_sha256="0" * 64,
        status=201, response={}, created_at=LONG_AGO,
    )  # fmt: skip

    call_command("prune", stdout=io.StringIO())

    assert list(ChatMessage.objects.values_list("body", flat=True)) == ["fresh"]
    assert not IdempotencyRecord.objects.exists()


def _client(default_team: str) -> tuple[APIClient, str]:
    user = get_user_model().objects.create_user(username="viewer", password="pw")
    registry.add_member(default_team, user)
    key = Token.objects.create(user=user).key
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api, key


def test_a_rest_replay_from_before_the_kept_log_says_reload(default_team):
    head = history(default_team)
    retention.prune()
    api, _ = _client(default_team)

    gone = api.get(f"/api/teams/{default_team}/events?since=2").json()
    kept = api.get(f"/api/teams/{default_team}/events?since=7").json()

    assert gone == {"seq": head, "events": [], "reload": True}
    assert kept["reload"] is False and kept["events"]


def test_a_websocket_replay_from_before_the_kept_log_gets_a_reload_frame(default_team):
    head = history(default_team)
    retention.prune()
    _, key = _client(default_team)

    async def scenario() -> list[dict]:
        ws = WebsocketCommunicator(
            application,
            f"/ws/board/?team={default_team}&token={key}",
            headers=[(b"origin", b"http://localhost")],
        )
        connected, _ = await ws.connect()
        assert connected
        frames = [await ws.receive_json_from(timeout=5)]  # hello
        await ws.send_json_to({"type": "since", "seq": 3})
        frames.append(await ws.receive_json_from(timeout=5))
        await ws.disconnect()
        return frames

    hello, reload = async_to_sync(scenario)()
    assert hello["type"] == "hello" and hello["seq"] == head
    assert reload["type"] == "reload" and reload["seq"] == head and reload["oldest_seq"] == 7
