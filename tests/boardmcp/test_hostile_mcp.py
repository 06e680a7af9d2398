"""``/mcp`` as a hostile client meets it, over the project's own ASGI app: bodies that
are not JSON-RPC, a version or method that does not exist, unknown tools, arguments
of the wrong shape, unstorable, out of range or huge, and another team's task. No
answer is a 5xx, each is JSON of a bounded size, a tool's refusal is the board's
error body (``{"error", "detail", "retryable"}``), and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from django.contrib.auth import get_user_model

from board import store
from clawboo.asgi import application
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db(transaction=True)

MB = "x" * (1 << 20)
ANSWER_MAX = 4096


def rpc(method: str, params: Any = None, **extra: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, **extra}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


def call(name: str, arguments: Any) -> bytes:
    return rpc("tools/call", {"name": name, "arguments": arguments})


@pytest.fixture
def world() -> dict[str, str]:
    """Ada's agent far works on default; blue holds a task far must never reach."""
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    registry.create_agent(id="far", display_name="Far", team="default", runtime="human", owner=ada)
    registry.create_team("blue", "Blue")
    blue = store.create_task(title="blue's", team="blue").task.id
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="far", user=ada).key
    return {"key": key, "blue": blue}


def post_all(key: str, bodies: dict[str, bytes]) -> dict[str, httpx.Response]:
    async def go() -> dict[str, httpx.Response]:
        transport = httpx.ASGITransport(app=application)
        headers = {
            "Authorization": f"Token {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            return {
                what: await http.post("/mcp", content=raw, headers=headers)
                for what, raw in bodies.items()
            }

    return anyio.run(go)


def test_a_message_that_is_no_json_rpc_request_is_a_protocol_error(world):
    bodies = {
        "not JSON": b"{",
        "an array of nothing": b"[]",
        "a string": json.dumps(MB).encode(),
        "a number": b"3",
        "version 1.0": json.dumps({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}).encode(),
        "no such method": rpc("nope/nope"),
        "params not an object": rpc("tools/call", [1, 2]),
        "arguments not an object": call("get_task", [1]),
        # The SDK's parser refuses a lone surrogate before any tool sees it.
        "a lone surrogate": call("create_task", {"title": "\ud800"}),
        "over the body limit": b'{"pad": "' + b"x" * (3 << 20) + b'"}',
    }
    before = fingerprint()
    answers = post_all(world["key"], bodies)
    for what, answer in answers.items():
        assert answer.status_code < 500, (what, answer.text[:300])
        assert len(answer.content) <= ANSWER_MAX, (what, len(answer.content))
        body = answer.json()
        # JSON-RPC's error object, or the door's envelope for a body over the limit.
        assert "error" in body, (what, body)
    assert answers["over the body limit"].status_code == 413
    assert fingerprint() == before


def test_a_bad_tool_call_is_the_boards_refusal_and_writes_nothing(world):
    bodies = {
        "an unknown tool": call("drop_table", {}),
        "a megabyte tool name": call("n" * (1 << 20), {}),
        "a megabyte title": call("create_task", {"title": MB}),
        "a megabyte description": call("create_task", {"title": "t", "description": MB}),
        "a NUL in an id": call("get_task", {"task_id": "a\x00b"}),
        "an id past 64 bits": call("get_task", {"task_id": 2**63}),
        "a limit past 64 bits": call("list_tasks", {"limit": 2**63}),
        "an unknown argument": call("list_tasks", {"drop": True}),
        "another team's task": call("get_task", {"task_id": world["blue"]}),
        "another team's comment": call("comment", {"task_id": world["blue"], "body": "hi"}),
        "claiming another team's": call("claim_task", {"task_id": world["blue"]}),
    }
    before = fingerprint()
    answers = post_all(world["key"], bodies)
    for what, answer in answers.items():
        assert answer.status_code == 200, (what, answer.text[:300])
        assert len(answer.content) <= ANSWER_MAX, (what, len(answer.content))
        result = answer.json()["result"]
        assert result["isError"] is True, (what, result)
        refusal = json.loads(result["content"][0]["text"])
        assert set(refusal) >= {"error", "detail", "retryable"}, (what, refusal)
    assert fingerprint() == before
    named = json.loads(answers["an unknown tool"].json()["result"]["content"][0]["text"])
    assert named["error"] == "not_found" and "drop_table" in named["detail"]
    # It was dropped unread: the list answered unfiltered, as if filtered.
    unknown = json.loads(answers["an unknown argument"].json()["result"]["content"][0]["text"])
    assert (unknown["error"], unknown["field"]) == ("validation_error", "drop"), unknown
    assert "status" in unknown["detail"]
    for what in ("another team's task", "another team's comment", "claiming another team's"):
        refusal = json.loads(answers[what].json()["result"]["content"][0]["text"])
        assert refusal["error"] == "not_found", (what, refusal)
