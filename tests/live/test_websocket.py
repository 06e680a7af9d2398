"""The board websocket: auth, after-commit delivery, rollback silence, gap-free replay."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.authtoken.models import Token

from board import store
from clawboo.asgi import application
from core import registry

pytestmark = pytest.mark.django_db(transaction=True)


def token_for(username: str, teams: tuple[str, ...] = ("default",)) -> str:
    user = get_user_model().objects.create_user(username=username, password="pw")
    for team in teams:
        registry.add_member(team, user)
    return Token.objects.create(user=user).key


def communicator(path: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost")])


async def frames_until(ws: WebsocketCommunicator, predicate: Any, timeout: float = 5) -> list:
    seen = []
    while True:
        frame = await ws.receive_json_from(timeout=timeout)
        seen.append(frame)
        if predicate(frame, seen):
            return seen


def test_anonymous_and_foreign_team_are_refused():
    registry.create_team("red", "Red")
    key = token_for("ada")

    async def closed_with(ws: WebsocketCommunicator) -> tuple[bool, int]:
        # Accepted, then closed: a close before accept would be an HTTP 403 at the
        # handshake, and the client would never see the documented code.
        connected, _ = await ws.connect()
        message = await ws.receive_output()
        assert message["type"] == "websocket.close"
        return connected, message["code"]

    async def scenario() -> tuple[Any, Any]:
        anon = await closed_with(communicator("/ws/board/?team=default"))
        other = await closed_with(communicator(f"/ws/board/?team=red&token={key}"))
        return anon, other

    anon, other = async_to_sync(scenario)()
    assert anon == (True, 4401)
    assert other == (True, 4403)


def test_a_committed_change_arrives_after_commit_with_narration():
    key = token_for("ada")

    async def scenario() -> list:
        ws = communicator(f"/ws/board/?team=default&token={key}")
        assert (await ws.connect())[0]
        hello = await ws.receive_json_from()
        assert hello["type"] == "hello"
        await database_sync_to_async(store.create_task)(title="Fix login")
        frames = await frames_until(ws, lambda f, s: f["type"] == "chat")
        await ws.disconnect()
        return [hello, *frames]

    hello, change, chat = async_to_sync(scenario)()
    assert change["type"] == "task-change" and change["kind"] == "added"
    assert change["task"]["title"] == "Fix login" and change["seq"] == hello["seq"] + 1
    assert change["prev_status"] is None
    # The narration line rides with the change it narrates (same seq, right after it).
    assert chat["seq"] == change["seq"] and "Fix login" in chat["body"]


def test_a_rolled_back_write_emits_nothing():
    key = token_for("ada")

    def doomed() -> None:
        with pytest.raises(RuntimeError), transaction.atomic():
            store.create_task(title="never")
            raise RuntimeError("roll back")

    async def scenario() -> bool:
        ws = communicator(f"/ws/board/?team=default&token={key}")
        await ws.connect()
        await ws.receive_json_from()
        await database_sync_to_async(doomed)()
        quiet = await ws.receive_nothing(timeout=0.5)
        await ws.disconnect()
        return quiet

    assert async_to_sync(scenario)() is True


def test_since_replays_a_burst_of_500_with_no_gap_or_duplicate(settings):
    key = token_for("ada")
    task = store.create_task(title="busy").task
    start = store.get_task(task.id).revision

    def burst(n: int) -> None:
        for i in range(n):
            store.set_priority(task.id, i + 1)

    async def scenario() -> tuple[int, list[int], list[int]]:
        live = communicator(f"/ws/board/?team=default&token={key}")
        await live.connect()
        hello = await live.receive_json_from()
        await database_sync_to_async(burst)(250)
        # A late client asks for everything since the hello while the burst goes on.
        late = communicator(f"/ws/board/?team=default&token={key}")
        await late.connect()
        await late.receive_json_from()
        await late.send_json_to({"type": "since", "seq": hello["seq"]})
        await database_sync_to_async(burst)(250)
        from core import events

        last = await database_sync_to_async(events.latest_seq)("default")
        got_live = [f["seq"] for f in await frames_until(live, lambda f, s: f["seq"] == last)]
        got_late = [f["seq"] for f in await frames_until(late, lambda f, s: f["seq"] == last)]
        await live.disconnect()
        await late.disconnect()
        return hello["seq"], got_live, got_late

    first, got_live, got_late = async_to_sync(scenario)()
    expected = list(range(first + 1, got_live[-1] + 1))
    assert got_live == expected
    assert got_late == expected
    assert store.get_task(task.id).revision == start + 500


def test_frames_arriving_out_of_order_are_delivered_in_sequence():
    from core import events, live

    key = token_for("ada")
    held: list = []
    events.unsubscribe(live.publish)
    events.subscribe(held.append)
    try:

        async def scenario() -> list[int]:
            ws = communicator(f"/ws/board/?team=default&token={key}")
            await ws.connect()
            await ws.receive_json_from()
            for title in ("one", "two", "three"):
                await database_sync_to_async(store.create_task)(title=title)
            task_events = [e for e in held if e.kind == "added"]
            # Another server's frame for the newest change arrives first, then a stale
            # duplicate of the oldest: the consumer fills the gap from the log.
            await database_sync_to_async(live.publish)(task_events[-1])
            await database_sync_to_async(live.publish)(task_events[0])
            last = task_events[-1].seq
            # The last change is followed by its narration line (same seq).
            got = await frames_until(ws, lambda f, s: f["seq"] >= last and f["type"] == "chat")
            quiet = await ws.receive_nothing(timeout=0.3)
            await ws.disconnect()
            assert quiet
            changes = [f["seq"] for f in got if f["type"] == "task-change"]
            chats = [f["seq"] for f in got if f["type"] == "chat"]
            assert chats == changes  # each change is followed by its narration
            return changes

        seqs = async_to_sync(scenario)()
    finally:
        events.unsubscribe(held.append)
        events.subscribe(live.publish)
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert len(seqs) >= 3


def test_a_change_dropped_with_nothing_after_it_arrives_by_the_shared_tail_check(monkeypatch):
    from core import consumers, events, live

    key = token_for("ada")
    monkeypatch.setattr(consumers, "TAIL_CHECK_SECONDS", 0.2)

    async def scenario() -> tuple[list, list, int]:
        clients = [communicator(f"/ws/board/?team=default&token={key}") for _ in range(2)]
        for ws in clients:
            await ws.connect()
            await ws.receive_json_from()
        # One look at the head serves every client of the team in this process.
        watchers = [t for (_, team), t in consumers._tails.items() if team == "default"]
        sharing = len(watchers[0].consumers) if len(watchers) == 1 else 0
        events.unsubscribe(live.publish)  # the layer loses this change, for everyone
        try:
            await database_sync_to_async(store.create_task)(title="dropped")
        finally:
            events.subscribe(live.publish)
        got = [await frames_until(ws, lambda f, s: f["type"] == "task-change") for ws in clients]
        for ws in clients:
            await ws.disconnect()
        return got[0], got[1], sharing

    first, second, sharing = async_to_sync(scenario)()
    assert sharing == 2
    assert [f["task"]["title"] for f in first] == ["dropped"]
    assert [f["task"]["title"] for f in second] == ["dropped"]
    assert not [team for (_, team) in consumers._tails if team == "default"]
