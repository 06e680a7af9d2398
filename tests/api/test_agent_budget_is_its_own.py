"""GOVERNANCE §6: the governed never lock the governor out. An agent's key and a
run's credential authenticate as the agent's owner; the REST API's per-client rate
limit counted their requests against the owner's budget, so an agent flooding the
API made its person's own requests -- pausing it, denying what it asks -- answer
``429`` until the minute passed. A credential bound to one agent now spends that
agent's budget (as a run's credential already did over MCP); the person keeps
theirs."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board import store
from boardmcp import credentials
from core import machines, registry
from core.models import AgentToken

pytestmark = pytest.mark.django_db

LIMIT = 3


@pytest.fixture
def board(settings: Any) -> Any:
    cache.clear()
    settings.CLAWBOO_HTTP_RATE_LIMIT = LIMIT
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="human", owner=ada)
    held = store.create_task(title="held", file_mutating=False).task
    ticket = store.claim(held.id, "bot", "human").ticket
    yield {
        "agent key": AgentToken.objects.create(
            key=machines.new_key(), agent_id="bot", user=ada
        ).key,
        "run credential": credentials.mint_run_credential("bot", held.id, ticket),
        "person": Token.objects.create(user=ada).key,
    }
    cache.clear()


def client(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


@pytest.mark.parametrize("credential", ["agent key", "run credential"])
def test_an_agent_flooding_the_api_leaves_its_persons_budget_alone(board, credential):
    agent = client(board[credential])
    codes = [agent.get("/api/board/tasks").status_code for _ in range(LIMIT + 1)]
    assert codes == [200] * LIMIT + [429]

    # The owner still governs: pausing the agent is not rate limited by its flood.
    paused = client(board["person"]).post("/api/agents/bot/pause", {}, format="json")
    assert paused.status_code == 200, paused.content[:200]
    assert registry.get_agent("bot").state == "paused"


def test_an_agents_key_and_its_run_credential_share_the_agents_budget(board):
    key, run = client(board["agent key"]), client(board["run credential"])
    codes = [key.get("/api/board/tasks").status_code for _ in range(LIMIT)]
    codes.append(run.get("/api/board/tasks").status_code)
    assert codes == [200] * LIMIT + [429]


def test_a_persons_own_budget_still_holds(board):
    person = client(board["person"])
    codes = [person.get("/api/board/tasks").status_code for _ in range(LIMIT + 1)]
    assert codes == [200] * LIMIT + [429]
