"""Two daphne servers sharing one Redis channel layer: a change made through server A
reaches a websocket connected to server B."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest
import websockets
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from core import registry
from tests.fixtures.servers import redis_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_mutation_through_server_a_reaches_a_socket_on_server_b(daphne):
    url = redis_url()
    if url is None:
        pytest.skip("Redis is not answering on localhost")
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    key = Token.objects.create(user=user).key
    env = {"CLAWBOO_REDIS_URL": url}
    server_a, server_b = daphne(env), daphne(env)

    async def scenario() -> dict:
        ws_url = server_b.replace("http", "ws") + f"/ws/board/?team=default&token={key}"
        async with websockets.connect(ws_url, origin=server_b) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert hello["type"] == "hello"
            request = urllib.request.Request(
                server_a + "/api/board/tasks",
                data=json.dumps({"title": "Across"}).encode(),
                headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
                method="POST",
            )
            await asyncio.to_thread(urllib.request.urlopen, request, timeout=10)
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame["type"] == "task-change":
                    return frame

    frame = asyncio.run(scenario())
    assert frame["kind"] == "added" and frame["task"]["title"] == "Across"


@pytest.mark.timing
def test_a_claim_another_process_makes_reaches_a_socket_within_a_second_with_no_shared_layer(
    daphne,
):
    """A claim (like a comment or a run's step) frees no work, so it wakes no idle
    worker; the board of a server with no shared layer still shows it at once, on
    either database."""
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    key = Token.objects.create(user=user).key
    ids = [store.create_task(title=f"t{n}").task.id for n in range(5)]
    for task_id in ids:  # one each: an agent holds one task at a time by default
        registry.create_agent(
            id=f"worker-{task_id}", display_name="W", team="default", runtime="command"
        )
    server = daphne({"CLAWBOO_REDIS_URL": ""})

    async def scenario() -> list[float]:
        ws_url = server.replace("http", "ws") + f"/ws/board/?team=default&token={key}"
        took = []
        async with websockets.connect(ws_url, origin=server) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert hello["type"] == "hello"
            for task_id in ids:
                await asyncio.sleep(0.4)  # apart: each waits for its own look
                written = time.monotonic()
                claimed = await asyncio.to_thread(store.claim, task_id, f"worker-{task_id}")
                assert claimed.ok, claimed
                while True:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    if frame.get("kind") == "claimed" and frame["task"]["id"] == task_id:
                        took.append(time.monotonic() - written)
                        break
        return took

    took = asyncio.run(scenario())
    assert max(took) < 1.0, f"claims showed after {[round(t, 2) for t in took]} s"
