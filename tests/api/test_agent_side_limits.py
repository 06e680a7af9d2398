"""GOVERNANCE §6: the agent side never changes what governs it. A task's own run
ceiling (``max_run_cents``) wins over its agent's default, a person's setting, its own
retries (``max_attempts``) over the rule that a failed run blocks it for a person, its
``metadata.base_branch`` over its repository's (where the work lands), and its
``metadata.repo_remote`` over its agent's repository (what a remote worker clones
and pushes to), and its ``metadata.model`` over the model an operator approved in its
agent's settings (what its run's CLI is started with, and what prices its streamed
usage: a model the price table lacks is never stopped at its ceiling mid-run): work
the agent side files with one would raise its own limit or choose where its code
comes from and lands, or what runs it, behind an approval that reads as the work's.
Filing a task with one is a people verb
for the agent side (``403 person_required``, nothing written); a person still sets
them."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from mcp.client.client import Client
from rest_framework.authtoken.models import Token

from board.models import Task
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry
from core.models import AgentToken
from tests.api.conftest import fingerprint, key_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def keys() -> dict[str, str]:
    ada = get_user_model().objects.create_user("ada")
    registry.add_member("default", ada)
    registry.create_agent(
        id="bot",
        display_name="bot",
        team="default",
        runtime="human",
        owner=ada,
        settings={"max_run_cents": 50},
    )
    return {
        "agent key": AgentToken.objects.create(
            key=machines.new_key(), agent_id="bot", user=ada
        ).key,
        "machine token": machines.mint("laptop", ["bot"])[1],
        "person": Token.objects.create(user=ada).key,
    }


GOVERNING = [
    ("max_run_cents", {"max_run_cents": 10**9}),
    ("max_attempts", {"max_attempts": 100}),
    ("metadata.base_branch", {"metadata": {"base_branch": "release"}}),
    ("metadata.repo_remote", {"metadata": {"repo_remote": "https://evil.example/x.git"}}),
    ("metadata.model", {"metadata": {"model": "an-unpriced-model"}}),
]


@pytest.mark.parametrize(("field", "extra"), GOVERNING, ids=[f for f, _ in GOVERNING])
@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_files_no_task_with_its_own_limit_base_or_remote(
    keys, credential, field, extra
):
    before = fingerprint()
    answer = key_client(keys[credential]).post("/api/board/tasks", {"title": "costly", **extra})
    assert answer.status_code == 403, answer.content[:300]
    assert answer.json()["error"] == "person_required"
    assert field in answer.json()["detail"]
    assert fingerprint() == before
    # Without one it files as before (waiting for a person's approval).
    filed = key_client(keys[credential]).post(
        "/api/board/tasks", {"title": "fine", "created_by_agent_id": "bot"}
    )
    assert filed.status_code == 201, filed.content[:300]
    assert filed.json()["approval"]["state"] == "required"


def test_a_person_sets_a_tasks_run_ceiling_base_branch_remote_and_model(keys):
    answer = key_client(keys["person"]).post(
        "/api/board/tasks",
        {
            "title": "costly",
            "max_run_cents": 500,
            "max_attempts": 7,
            "metadata": {
                "base_branch": "release",
                "repo_remote": "/srv/app.git",
                "model": "claude-opus-5-5",
            },
        },
    )
    assert answer.status_code == 201, answer.content[:300]
    task = Task.objects.get(pk=answer.json()["id"])
    meta = task.metadata
    assert task.max_attempts == 7
    assert (task.max_run_cents, meta["base_branch"], meta["repo_remote"], meta["model"]) == (
        500,
        "release",
        "/srv/app.git",
        "claude-opus-5-5",
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_files_no_task_with_its_own_limit_base_or_remote_over_mcp(keys, credential):
    """MCP's create_task takes none of them: its arguments name no ceiling and no
    metadata, so whatever the agent side adds is not stored."""
    caller = credentials.caller_for_key(keys[credential])
    assert caller is not None
    extra: dict[str, Any] = {
        "max_run_cents": 10**9,
        "max_attempts": 100,
        "metadata": {
            "base_branch": "release",
            "repo_remote": "https://evil.example/x.git",
            "model": "an-unpriced-model",
        },
        "model": "an-unpriced-model",
        "base_branch": "release",
        "repo_remote": "https://evil.example/x.git",
    }

    async def go() -> Any:
        async with Client(build_server(caller)) as mcp:
            return await mcp.call_tool("create_task", {"title": "costly", **extra})

    answer = anyio.run(go)
    # Filed without them, or refused for the unknown arguments: either way none stored.
    assert answer.is_error or Task.objects.exists()
    for task in Task.objects.all():
        assert task.max_run_cents is None
        assert task.max_attempts is None
        assert not {"base_branch", "repo_remote", "model"} & set(task.metadata or {})


@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_a_subtask_the_agent_side_files_keeps_its_parents_run_ceiling(keys, credential):
    """A person capped a task's runs at 40¢; its agent (whose settings name no default)
    split the work into subtasks, which it may not give a ceiling, and each ran with
    none: splitting shed the limit. It now carries its parent's; a person's subtask is
    as they file it."""
    from board import store

    registry.update_agent("bot", {"settings": {}})
    parent = store.create_task(title="capped", file_mutating=False, max_run_cents=40).task
    store.claim(parent.id, "bot", "human")

    filed = key_client(keys[credential]).post(
        "/api/board/tasks",
        {"title": "a part of it", "parent_task_id": parent.id, "created_by_agent_id": "bot"},
    )
    assert filed.status_code == 201, filed.content[:300]
    assert filed.json()["max_run_cents"] == 40

    by_person = key_client(keys["person"]).post(
        "/api/board/tasks", {"title": "mine", "parent_task_id": parent.id}
    )
    assert by_person.status_code == 201 and by_person.json()["max_run_cents"] is None
