"""GOVERNANCE §6: a person claims, heartbeats and settles as their own agents, over
MCP as over REST. A person's own key acted as no agent over /mcp: every agent tool
refused it ("use a token minted for an agent"), so what REST let them do with
``agent_id`` took an agent's key over MCP. The tools now take ``agent``, asked by
REST's own rule (core.api.access.act_as); driven here through the project's ASGI app,
with the person's own key, one JSON-RPC call per request as a stateless client does."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from clawboo.asgi import application
from core import registry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ada() -> str:
    """Ada's own key; ada owns agent ada-bot, eve (of her team) owns eve-bot."""
    users = get_user_model().objects
    for name in ("ada", "eve"):
        user = users.create_user(name)
        registry.add_member("default", user)
        registry.create_agent(
            id=f"{name}-bot",
            display_name=name,
            team="default",
            runtime="human",
            owner=user,
            max_concurrent=10,
        )
    return str(Token.objects.create(user=users.get(username="ada")).key)


def calls(key: str, steps: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each step's answer: {"error": bool, "body": the tool's JSON}, in order."""

    async def go() -> list[dict[str, Any]]:
        transport = httpx.ASGITransport(app=application)
        headers = {
            "Authorization": f"Token {key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        answers = []
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            for number, (name, arguments) in enumerate(steps, 1):
                message = {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {"name": name, "arguments": arguments},
                }
                answer = await http.post("/mcp", content=json.dumps(message), headers=headers)
                assert answer.status_code == 200, answer.text[:300]
                result = answer.json()["result"]
                body = json.loads(result["content"][0]["text"])
                answers.append({"error": result["isError"], "body": body})
        return answers

    return anyio.run(go)


def test_a_persons_key_claims_heartbeats_and_completes_as_their_own_agent_over_mcp(ada):
    task = store.create_task(title="mine to do", file_mutating=False).task.id
    claimed, beat, beat_named, completed = calls(
        ada,
        [
            ("claim_task", {"task_id": task, "agent": "ada-bot"}),
            # Named or not: the holder, their own agent, as REST's heartbeat acts.
            ("heartbeat", {"task_id": task}),
            ("heartbeat", {"task_id": task, "agent": "ada-bot"}),
            ("complete_task", {"task_id": task, "agent": "ada-bot", "output": "done"}),
        ],
    )
    assert not claimed["error"], claimed
    assert claimed["body"]["task"]["assignee_agent_id"] == "ada-bot"
    assert claimed["body"]["ticket"]
    assert not beat["error"] and not beat_named["error"], (beat, beat_named)
    assert beat_named["body"]["lease_until"] >= beat["body"]["lease_until"]
    assert not completed["error"], completed
    assert store.get_task(task).status == "done"


def test_a_persons_key_claims_next_and_fails_as_their_own_agent_over_mcp(ada):
    task = store.create_task(title="mine to try", file_mutating=False).task.id
    claimed, failed = calls(
        ada,
        [
            ("claim_task", {"agent": "ada-bot"}),
            ("fail_task", {"task_id": task, "agent": "ada-bot", "error": "cannot"}),
        ],
    )
    assert claimed["body"]["task"]["id"] == task, claimed
    assert not failed["error"], failed
    # Its one attempt spent: blocked for a person, as fail_task says.
    assert failed["body"]["outcome"] == "recorded", failed
    assert failed["body"]["task"]["status"] == store.get_task(task).status == "blocked"


def test_a_persons_key_acts_as_no_one_elses_agent_over_mcp_and_writes_nothing(ada):
    todo = store.create_task(title="to do", file_mutating=False).task.id
    held = store.create_task(title="eve's", file_mutating=False).task.id
    store.claim(held, "eve-bot", "human")
    before = [store.get_task(t).as_dict() for t in (todo, held)]
    answers = calls(
        ada,
        [
            ("claim_task", {"task_id": todo, "agent": "eve-bot"}),
            ("claim_task", {"task_id": todo}),
            ("heartbeat", {"task_id": held}),
            ("heartbeat", {"task_id": held, "agent": "eve-bot"}),
            ("complete_task", {"task_id": held}),
            ("fail_task", {"task_id": held, "error": "no", "agent": "ghost"}),
        ],
    )
    assert [a["body"]["error"] for a in answers] == [
        "forbidden",
        "validation_error",  # naming none: as REST's claim, "agent is required"
        "forbidden",
        "forbidden",
        "forbidden",
        "validation_error",
    ], answers
    assert answers[0]["body"]["field"] == "agent"
    assert "belongs to another user" in answers[0]["body"]["detail"]
    assert [store.get_task(t).as_dict() for t in (todo, held)] == before
