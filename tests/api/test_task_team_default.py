"""A task filed without ``team`` lands where the caller means it: under its parent's
team (a tree never crosses teams), else in the team of the one agent the key acts as,
else in ``default``. An agent of another team filing a plain task was told
``team: no team 'default'``, and a subtask named by id ``parent_task_id: no task``."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from board import store
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import fingerprint, make_client

pytestmark = pytest.mark.django_db


def agent_key(user, agent_id: str) -> APIClient:
    client = APIClient()
    key = AgentToken.objects.create(key=machines.new_key(), agent_id=agent_id, user=user).key
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_a_task_with_no_team_goes_to_its_parents_team_else_its_agents_else_default():
    registry.create_team("acme", "Acme")
    person = make_client("ada", teams=("default", "acme"))
    registry.create_agent(
        id="bot", display_name="Bot", team="acme", runtime="human", owner=person.user
    )
    parent = store.create_task(title="parent", team="acme", file_mutating=False).task
    bot = agent_key(person.user, "bot")

    filed = bot.post("/api/board/tasks", {"title": "from the bot"}, format="json")
    assert filed.status_code == 201, filed.json()
    assert filed.json()["team"] == "acme"
    assert filed.json()["approval"]["state"] == "required"  # delegation, as before

    sub = person.post(
        "/api/board/tasks", {"title": "sub", "parent_task_id": parent.id}, format="json"
    )
    assert sub.status_code == 201, sub.json()
    assert (sub.json()["team"], sub.json()["parent_task_id"]) == ("acme", parent.id)

    plain = person.post("/api/board/tasks", {"title": "plain"}, format="json")
    assert plain.json()["team"] == "default"  # a person with no parent: as before

    # A team named is the team asked for: a tree still never crosses teams.
    before = fingerprint()
    crossed = person.post(
        "/api/board/tasks",
        {"title": "x", "team": "default", "parent_task_id": parent.id},
        format="json",
    )
    assert crossed.status_code == 400 and crossed.json()["field"] == "parent_task_id"
    assert fingerprint() == before
