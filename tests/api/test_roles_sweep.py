"""GOVERNANCE §6, walked rather than listed: for every write operation of the
OpenAPI schema and every MCP tool, each agent-side credential (an agent's key of a
staff owner, a run's credential, a machine token, the critic's credential) that
the roles table does not admit is refused -- ``403 person_required`` for a verb
kept for people, ``403 forbidden`` otherwise -- and nothing is written. The
table's completeness is tests/core/test_roles.py's; this proves every door reads
it, so a view or tool added with a check of its own cannot slip by."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from drf_spectacular.generators import SchemaGenerator
from mcp.client.client import Client
from rest_framework.test import APIClient

from board import store
from board.models import Task, ToolApproval
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry, roles
from core.models import AgentToken
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db

SAFE = {"get", "head", "options", "trace"}
KINDS = {
    "agent key": "agent",
    "run credential": "agent",
    "machine token": "machine",
    "critic credential": "reviewer",
}


def write_operations() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        (method.upper(), route)
        for route, operations in schema["paths"].items()
        for method in operations
        if method not in SAFE
    )


def written() -> dict[str, Any]:
    return {
        **fingerprint(),
        "task_rows": list(
            Task.objects.order_by("pk").values_list(
                "pk", "status", "verdict", "human_override", "approval_state", "metadata"
            )
        ),
        "tools": list(ToolApproval.objects.values_list("pk", "state")),
    }


@pytest.fixture
def keys() -> dict[str, str]:
    """The agent side's credentials, the agent's owner staff: a staff owner lends its
    agents nothing."""
    boss = get_user_model().objects.create_user("boss", is_staff=True, is_superuser=True)
    registry.add_member("default", boss)
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="human", owner=boss)
    held = store.create_task(title="held", file_mutating=False).task
    ticket = store.claim(held.id, "bot", "human").ticket
    return {
        "agent key": AgentToken.objects.create(
            key=machines.new_key(), agent_id="bot", user=boss
        ).key,
        "run credential": credentials.mint_run_credential("bot", held.id, ticket),
        "machine token": machines.mint("laptop", ["bot"])[1],
        "critic credential": credentials.mint_run_credential(
            "bot", held.id, ticket, read_only=True
        ),
    }


def expected(row: roles.Verb) -> str:
    return "forbidden" if row.admits & roles.AGENT_SIDE else "person_required"


@pytest.mark.parametrize("credential", sorted(KINDS))
def test_every_write_the_table_keeps_from_a_credential_is_refused_and_writes_nothing(
    keys, credential
):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {keys[credential]}")
    kind = KINDS[credential]
    before = written()
    refused = 0
    for method, route in write_operations():
        row = roles.TABLE[f"{method} {route}"]
        if kind in row.admits or "anonymous" in row.admits:
            continue  # admitted (or a door that takes no credential at all)
        url = re.sub(r"\{[^}]+\}", "x1", route)
        answer = api.generic(method, url, "{}", content_type="application/json")
        assert answer.status_code == 403, (credential, method, route, answer.content[:200])
        assert answer.json()["error"] == expected(row), (method, route, answer.json())
        refused += 1
    assert refused >= 30  # the walk reached the API
    assert written() == before


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The least arguments a tool's input schema takes: the refusal, not the
    validation, must answer."""
    values: dict[str, Any] = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        if "enum" in spec:
            values[name] = spec["enum"][0]
        elif spec.get("type") == "integer":
            values[name] = 0
        elif spec.get("type") == "object":
            values[name] = {}
        else:
            values[name] = "x1"
    return values


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("credential", sorted(KINDS))
def test_every_mcp_tool_the_table_keeps_from_a_credential_is_refused(keys, credential):
    caller = credentials.caller_for_key(keys[credential])
    assert caller is not None and caller.principal.kind == KINDS[credential]

    async def sweep() -> list[tuple[str, Any]]:
        answers = []
        async with Client(build_server(caller)) as client:
            for tool in (await client.list_tools()).tools:
                row = roles.TABLE[f"mcp {tool.name}"]
                if caller.principal.kind in row.admits:
                    continue
                answer = await client.call_tool(tool.name, arguments(tool.input_schema))
                answers.append((tool.name, row, answer))
        return answers

    before = written()
    answers = anyio.run(sweep)
    assert answers  # every credential here is kept from something
    for name, row, answer in answers:
        assert answer.is_error, (credential, name)
        assert answer.structured_content["error"] == expected(row), (name, answer)
    assert written() == before
