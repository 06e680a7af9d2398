"""A list in a body costs what its cap allows, not what its length does.

A 2 MiB body holds ~200,000 ids or labels. A task create looked each ``depends_on``
id up with a query of its own, and the label and id lists dropped repeats by scanning
the list so far for each item (quadratic: 20,000 ids were 30 s of one server thread,
the whole body minutes); an agent's labels had no cap at all. Each list is now read
in one pass, refused at its cap, and ``depends_on`` is looked up in one query."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from mcp.client.client import Client

from board import checks, store
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry
from core.errors import ValidationFailed
from core.models import AgentToken
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db


def test_a_task_waits_on_at_most_the_cap_of_tasks_named_in_one_body(api, unchanged):
    ids = [f"x{i}" for i in range(checks.DEPENDS_ON_MAX + 1)]
    with unchanged():
        response = api.post("/api/board/tasks", {"title": "t", "depends_on": ids}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "depends_on"
    assert f"at most {checks.DEPENDS_ON_MAX}" in response.json()["detail"]


def test_the_tasks_a_create_waits_on_are_looked_up_in_one_query(api):
    deps = [store.create_task(title=f"d{i}").task.id for i in range(200)]
    with CaptureQueriesContext(connection) as queries:
        response = api.post("/api/board/tasks", {"title": "t", "depends_on": deps}, format="json")
    assert response.status_code == 201, response.json()
    assert sorted(response.json()["depends_on"]) == sorted(deps)
    assert len(queries) < 100  # was one per dependency, and more


def test_a_dependency_of_another_team_still_answers_as_a_missing_one(api):
    registry.ensure_team("other-team")
    hidden = store.create_task(title="theirs", team="other-team").task.id
    response = api.post("/api/board/tasks", {"title": "t", "depends_on": [hidden]}, format="json")
    missing = api.post("/api/board/tasks", {"title": "t", "depends_on": ["nope"]}, format="json")
    assert response.status_code == missing.status_code == 400
    assert response.json()["detail"] == f"depends_on: no task {hidden!r}"
    assert missing.json()["detail"] == "depends_on: no task 'nope'"


def test_a_label_list_is_refused_at_the_label_past_the_cap_without_reading_on():
    # The item after the cap is not even a label: only a refusal at the cap says the
    # rest went unread.
    labels: list[Any] = [f"l{i}" for i in range(checks.LABELS_MAX + 1)] + [5]
    with pytest.raises(ValidationFailed, match=f"at most {checks.LABELS_MAX} labels"):
        checks.check_labels(labels)
    repeated = ["same"] * 100_000 + ["other"]
    assert checks.check_labels(repeated) == ["same", "other"]


def test_an_agent_serves_at_most_the_cap_of_labels(api, agent, unchanged):
    labels = [f"l{i}" for i in range(registry.AGENT_LABELS_MAX + 1)]
    with unchanged():
        response = api.patch(f"/api/agents/{agent.id}", {"labels": labels}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "labels"
    kept = api.patch(f"/api/agents/{agent.id}", {"labels": ["a", "b", "a"] * 1000}, format="json")
    assert kept.status_code == 200 and kept.json()["labels"] == ["a", "b"]


@pytest.mark.django_db(transaction=True)
def test_an_mcp_create_names_at_most_the_cap_of_dependencies_and_writes_nothing():
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    registry.create_agent(id="far", display_name="far", team="default", runtime="human", owner=ada)
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="far", user=ada).key
    caller = credentials.caller_for_key(key)
    assert caller is not None
    dep = store.create_task(title="dep").task.id
    before = fingerprint()

    async def go() -> Any:
        async with Client(build_server(caller)) as client:
            return await client.call_tool(
                "create_task",
                {"title": "t", "depends_on": [dep] * 5 + [f"x{i}" for i in range(1001)]},
            )

    answer = anyio.run(go)
    assert answer.is_error
    assert f"at most {checks.DEPENDS_ON_MAX}" in answer.content[0].text
    assert fingerprint() == before


def test_an_agents_labels_never_grow_past_what_claim_next_can_ask(api, agent):
    # claim-next asks one ordered lookup per label of the claimer (board.store.ready
    # route_parts), in one compound SELECT: SQLite holds 500 terms. An agent patched
    # to 20,000 labels made every claim-next as it a 500.
    refused = api.patch(
        f"/api/agents/{agent.id}", {"labels": [f"l{i}" for i in range(600)]}, format="json"
    )
    assert refused.status_code == 400
    most = [f"l{i}" for i in range(registry.AGENT_LABELS_MAX)]
    assert api.patch(f"/api/agents/{agent.id}", {"labels": most}, format="json").status_code == 200
    store.create_task(title="gpu work", file_mutating=False, route={"labels": [most[-1]]})
    claimed = api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")
    assert claimed.status_code == 200, claimed.json()
    assert claimed.json()["task"]["title"] == "gpu work"
