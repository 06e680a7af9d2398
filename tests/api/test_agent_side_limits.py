"""GOVERNANCE §6: the agent side never changes what governs it. A task's own run
ceiling (``max_run_cents``) wins over its agent's default, a person's setting, and
its ``metadata.base_branch`` over its repository's (where the work lands): work the
agent side files with either would raise its own limit or choose where it lands,
behind an approval that reads as the work's. Filing a task with one is a people verb
for the agent side (``403 person_required``, nothing written); a person still sets
them."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board.models import Task
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
    ("metadata.base_branch", {"metadata": {"base_branch": "release"}}),
]


@pytest.mark.parametrize(("field", "extra"), GOVERNING, ids=[f for f, _ in GOVERNING])
@pytest.mark.parametrize("credential", ["agent key", "machine token"])
def test_the_agent_side_files_no_task_with_its_own_limit_or_base(keys, credential, field, extra):
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


def test_a_person_sets_a_tasks_run_ceiling_and_base_branch(keys):
    answer = key_client(keys["person"]).post(
        "/api/board/tasks",
        {"title": "costly", "max_run_cents": 500, "metadata": {"base_branch": "release"}},
    )
    assert answer.status_code == 201, answer.content[:300]
    task = Task.objects.get(pk=answer.json()["id"])
    assert (task.max_run_cents, task.metadata["base_branch"]) == (500, "release")
