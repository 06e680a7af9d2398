"""GOVERNANCE §5, §6: work the agent side files is delegation, and waits for a
person's approval -- by every door and with every credential. A machine token acts
for its bound agents as their keys do; over MCP it acts as no agent, and its
``create_task`` and ``create_subtask`` filed work as nobody, so it skipped the
approval an agent's own key would meet. Both doors now ask one rule
(``board.access.files_as``): the work is filed as the credential's one agent, and
a machine token of several agents names the one it files as (REST's
``created_by_agent_id``, the MCP tools' ``agent``), else is refused, nothing written.
A person's own credential files as nobody: no approval needed."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from mcp.client.client import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board import store
from board.models import Task
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry
from core.models import Agent, AgentToken
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db(transaction=True)

CREDENTIALS = ["agent key", "run credential", "machine token"]


def world() -> dict[str, Any]:
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    for agent in ("far", "near"):
        registry.create_agent(
            id=agent, display_name=agent, team="default", runtime="human", owner=ada
        )
    held = store.create_task(title="held", file_mutating=False).task
    ticket = store.claim(held.id, "far", "human").ticket
    return {
        "held": held.id,
        "keys": {
            "agent key": AgentToken.objects.create(
                key=machines.new_key(), agent_id="far", user=ada
            ).key,
            "run credential": credentials.mint_run_credential("far", held.id, ticket),
            "machine token": machines.mint("laptop", ["far"])[1],
            "machine token of two agents": machines.mint("rack", ["far", "near"])[1],
            "person": Token.objects.create(user=ada).key,
        },
    }


def mcp(key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    caller = credentials.caller_for_key(key)
    assert caller is not None

    async def go() -> list[Any]:
        async with Client(build_server(caller)) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(go)


def filed(answer: Any) -> Task:
    assert not answer.is_error, answer.structured_content
    return store.get_task(json.loads(answer.content[0].text)["task"]["id"])


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_work_the_agent_side_files_over_mcp_waits_for_a_persons_approval(credential):
    board = world()
    top, child = mcp(
        board["keys"][credential],
        [
            ("create_task", {"title": "delegated"}),
            ("create_subtask", {"title": "split off", "parent_task_id": board["held"]}),
        ],
    )
    for task in (filed(top), filed(child)):
        assert task.created_by_agent_id == "far", credential
        assert task.approval_state == "required", credential


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_work_the_agent_side_files_over_rest_waits_for_a_persons_approval(credential):
    board = world()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {board['keys'][credential]}")
    answer = api.post("/api/board/tasks", {"title": "delegated"}, format="json")
    assert answer.status_code == 201, answer.content[:200]
    assert answer.json()["created_by_agent_id"] == "far"
    assert answer.json()["approval"]["state"] == "required"


def test_a_machine_token_of_several_agents_files_nothing_over_mcp():
    board = world()
    before = fingerprint()
    answers = mcp(
        board["keys"]["machine token of two agents"],
        [
            ("create_task", {"title": "delegated"}),
            ("create_subtask", {"title": "split off", "parent_task_id": board["held"]}),
        ],
    )
    for answer in answers:
        assert answer.is_error
        assert answer.structured_content["error"] == "validation_error"
        # The tool's own argument: naming one there files as it (below).
        assert answer.structured_content["field"] == "agent"
    assert fingerprint() == before


def test_a_machine_token_of_several_agents_names_the_one_it_files_as_over_mcp():
    board = world()
    created, split = mcp(
        board["keys"]["machine token of two agents"],
        [
            ("create_task", {"title": "delegated", "agent": "near"}),
            (
                "create_subtask",
                {"title": "split off", "parent_task_id": board["held"], "agent": "far"},
            ),
        ],
    )
    for answer, agent in ((created, "near"), (split, "far")):
        task = filed(answer)
        assert task.created_by_agent_id == agent
        assert task.approval["state"] == "required"


def test_a_person_files_work_over_mcp_that_needs_no_approval():
    board = world()
    (answer,) = mcp(board["keys"]["person"], [("create_task", {"title": "mine"})])
    task = filed(answer)
    assert task.created_by_agent_id is None
    assert task.approval_state is None


def two_teams() -> dict[str, str]:
    """A machine token bound to an agent of ``default`` and one of ``ops``, and a
    person owning both agents."""
    ada = get_user_model().objects.get_or_create(username="ada")[0]
    registry.create_team("ops")
    registry.add_member("default", ada)
    registry.add_member("ops", ada)
    for agent, team in (("here", "default"), ("there", "ops")):
        registry.create_agent(id=agent, display_name=agent, team=team, runtime="human", owner=ada)
    return {
        "machine token": machines.mint("rack", ["here", "there"])[1],
        "person": Token.objects.create(user=ada).key,
    }


@pytest.mark.parametrize("credential", ["machine token", "person"])
def test_a_task_is_never_filed_as_another_teams_agent(credential):
    keys = two_teams()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {keys[credential]}")
    before = fingerprint()
    refused = api.post(
        "/api/board/tasks",
        {"title": "as the other team", "team": "default", "created_by_agent_id": "there"},
        format="json",
    )
    assert refused.status_code == 400, refused.content[:200]
    assert refused.json()["error"] == "validation_error"
    assert refused.json()["field"] == "created_by_agent_id"
    assert "of team 'ops'" in refused.json()["detail"]
    assert fingerprint() == before
    own = api.post(
        "/api/board/tasks",
        {"title": "as its own team", "team": "ops", "created_by_agent_id": "there"},
        format="json",
    )
    assert own.status_code == 201, own.content[:200]
    assert own.json()["created_by_agent_id"] == "there"
    assert own.json()["approval"]["state"] == "required"


def test_an_agent_key_files_nothing_in_another_of_its_owners_teams():
    two_teams()
    key = AgentToken.objects.create(
        key=machines.new_key(), agent_id="here", user=get_user_model().objects.get(username="ada")
    ).key
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    before = fingerprint()
    refused = api.post("/api/board/tasks", {"title": "elsewhere", "team": "ops"}, format="json")
    assert refused.status_code == 400, refused.content[:200]
    assert refused.json()["field"] == "team"
    assert fingerprint() == before


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_a_credential_of_one_agent_claims_without_naming_it(credential):
    board = world()
    Agent.objects.filter(pk="far").update(max_concurrent=2)  # it holds one task already
    waiting = store.create_task(title="next up", file_mutating=False).task
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {board['keys'][credential]}")
    claimed = api.post("/api/board/claim-next", {}, format="json")
    assert claimed.status_code == 200, claimed.content[:200]
    assert claimed.json()["task"]["id"] == waiting.id
    assert claimed.json()["task"]["assignee_agent_id"] == "far"


@pytest.mark.parametrize("credential", ["person", "machine token of two agents"])
def test_a_claim_naming_no_agent_by_a_credential_of_none_or_several_is_400(credential):
    board = world()
    store.create_task(title="next up", file_mutating=False)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {board['keys'][credential]}")
    before = fingerprint()
    for path in ("/api/board/claim-next", f"/api/board/tasks/{board['held']}/claim"):
        refused = api.post(path, {}, format="json")
        assert refused.status_code == 400, refused.content[:200]
        assert refused.json()["field"] == "agent_id"
    assert fingerprint() == before
