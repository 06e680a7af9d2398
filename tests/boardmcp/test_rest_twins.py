"""Every MCP tool against its REST twin: the agent side acting on another agent's
task in its own team meets the same refusal through both doors -- the same error
code (REST's status is the code's one mapping, core.api.errors) -- and nothing is
written. A tool added without saying what its REST twin is fails here."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from rest_framework.test import APIClient

from board import store
from boardmcp import credentials
from boardmcp.tools import TOOLS, build_server
from core import machines, registry
from core.api.status import status_for
from core.models import AgentToken
from tests.api.conftest import make_client
from tests.api.test_roles_sweep import written

pytestmark = pytest.mark.django_db(transaction=True)

HANDOFF = {"handoffFrom": "x", "nextBestStep": "look"}
# Each tool: its REST twin on a task ``{id}`` (method, path, body), with the tool's
# own arguments besides task_id; None for a tool that takes no held task (its
# scoping has its own tests: test_protocol, test_roles_sweep).
TWINS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]] | None] = {
    "get_task": ("GET", "/api/board/tasks/{id}", {}, {}),
    "heartbeat": ("POST", "/api/board/tasks/{id}/heartbeat", {"ticket": "{ticket}"}, {}),
    "complete_task": ("POST", "/api/board/tasks/{id}/complete", {}, {}),
    "fail_task": ("POST", "/api/board/tasks/{id}/fail", {"error": "no"}, {"error": "no"}),
    "request_review": ("POST", "/api/board/tasks/{id}/transition", {"to": "in_review"}, {}),
    "write_handoff": (
        "POST",
        "/api/board/tasks/{id}/workspace/handoff",
        HANDOFF,
        {"handoff": HANDOFF},
    ),
    "comment": ("POST", "/api/board/tasks/{id}/comments", {"body": "hi"}, {"body": "hi"}),
    "link_dependency": (
        "POST",
        "/api/board/tasks/{id}/deps",
        {"depends_on": "{own}"},
        {"depends_on": "{own}"},
    ),
    "claim_task": ("POST", "/api/board/tasks/{id}/claim", {}, {}),
    "create_subtask": (
        "POST",
        "/api/board/tasks",
        {"title": "sub", "parent_task_id": "{id}"},
        {"title": "sub", "parent_task_id": "{id}"},
    ),
    "decide_approval": (
        "POST",
        "/api/board/tasks/{id}/approval",
        {"decision": "approve"},
        {"decision": "approve"},
    ),
    "list_tasks": None,
    "create_task": None,
    "read_handoff": None,
    "get_repository": None,
    "spend": None,
    "permission_prompt": None,
}


def test_every_mcp_tool_names_its_rest_twin() -> None:
    assert set(TWINS) == {fn.__name__ for fn, _ in TOOLS}


@pytest.fixture
def world() -> dict[str, Any]:
    """Ada's agent holds a task; Eve's agent, of the same team, holds one in
    progress and has one in review."""
    ada = make_client("ada")
    make_client("eve")
    from django.contrib.auth import get_user_model

    eve = get_user_model().objects.get(username="eve")
    for agent, owner in (("ada-bot", ada.user), ("eve-bot", eve)):
        registry.create_agent(
            id=agent,
            display_name=agent,
            team="default",
            runtime="human",
            owner=owner,
            max_concurrent=10,
        )
    own = store.create_task(title="mine", file_mutating=False).task.id
    ticket = store.claim(own, "ada-bot", "human").ticket
    assert ticket is not None
    held = store.create_task(title="eve's", file_mutating=False).task.id
    store.claim(held, "eve-bot", "human")
    review = store.create_task(title="eve's review", file_mutating=False).task.id
    store.await_review(review, ticket=store.claim(review, "eve-bot", "human").ticket)
    return {
        "own": own,
        "ticket": ticket,
        "tasks": [held, review],
        "agent key": AgentToken.objects.create(
            key=machines.new_key(), agent_id="ada-bot", user=ada.user
        ).key,
        "run credential": credentials.mint_run_credential("ada-bot", own, ticket),
    }


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    if isinstance(value, str):
        for name, text in names.items():
            value = value.replace("{" + name + "}", text)
    return value


def _rest_code(answer: Any) -> str:
    if answer.status_code < 400:
        return "ok"
    code = answer.json()["error"]
    assert status_for(code) == answer.status_code, (code, answer.status_code)
    return str(code)


def _mcp_code(answer: Any) -> str:
    return str(answer.structured_content["error"]) if answer.is_error else "ok"


@pytest.mark.parametrize("credential", ["agent key", "run credential"])
def test_another_agents_task_is_refused_alike_over_mcp_and_rest(world, credential):
    key = world[credential]
    caller = credentials.caller_for_key(key)
    assert caller is not None and caller.agent_id == "ada-bot"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    cases = [
        (name, task, twin)
        for name, twin in TWINS.items()
        if twin is not None
        for task in world["tasks"]
        # REST's move to the status a task already has is a no-op for anyone (200,
        # nothing written); request_review is no such move: it hands over a held task.
        if not (name == "request_review" and task == world["tasks"][1])
    ]

    async def over_mcp() -> list[Any]:
        async with Client(build_server(caller)) as client:
            answers = []
            for name, task, (_m, _p, _b, args) in cases:
                names = {"id": task, "own": world["own"]}
                arguments = {"task_id": task, **_fill(args, names)}
                if name == "create_subtask":
                    arguments.pop("task_id")
                answers.append(await client.call_tool(name, arguments))
            return answers

    before = written()
    mcp = anyio.run(over_mcp)
    assert written() == before
    for (name, task, (method, path, body, _args)), tool in zip(cases, mcp, strict=True):
        names = {"id": task, "own": world["own"], "ticket": world["ticket"]}
        rest = api.generic(
            method, _fill(path, names), _json(_fill(body, names)), "application/json"
        )
        assert _mcp_code(tool) == _rest_code(rest), (name, task, tool, rest.content[:300])
        if _mcp_code(tool) == "forbidden":
            detail = tool.structured_content["detail"]
            assert "eve-bot" not in detail or "acts as agent 'ada-bot' only" in detail, detail
    assert written() == before


def _json(body: dict[str, Any]) -> str:
    import json

    return json.dumps(body)
