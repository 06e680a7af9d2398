"""The task page's "Claim for agent": typed with the status left as it was, it claims
the todo task through the board's one claim (it was dropped without a word), its
refusals are shown beside it, and where a claim cannot go the form says what to do."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import registry
from tests.board.test_task_admin import change_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


@pytest.fixture
def agent():
    return registry.create_agent(
        id="worker-1",
        display_name="Worker",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )


def page(operator, task, **fields: str):
    return operator.post(f"/admin/board/task/{task.id}/change/", change_form(task, **fields))


def test_an_agent_typed_without_a_status_claims_the_todo_task(operator, agent):
    task = store.create_task(title="claim me", team="default").task
    response = page(operator, task, claim_agent=agent.pk)
    assert response.status_code == 302, response.content.decode()[:2000]
    claimed = store.get_task(task.id)
    assert (claimed.status, claimed.assignee_agent_id, claimed.attempts) == (
        "in_progress",
        agent.pk,
        1,
    )


def test_a_claim_the_board_refuses_is_shown_beside_the_agent_and_writes_nothing(operator, agent):
    registry.pause_agent(agent.pk, "maintenance", by="op")
    task = store.create_task(title="claim me", team="default").task
    response = page(operator, task, claim_agent=agent.pk)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "paused" in " ".join(errors["claim_agent"])
    after = store.get_task(task.id)
    assert (after.status, after.assignee_agent_id, after.revision) == (
        "todo",
        None,
        task.revision,
    )


def test_an_agent_typed_for_a_task_no_claim_takes_says_what_to_do(operator, agent):
    task = store.create_task(title="later", team="default", status="backlog").task
    response = page(operator, task, claim_agent=agent.pk)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["claim_agent"]
    assert "takes a todo task" in error and "In progress" in error
    assert store.get_task(task.id).revision == task.revision


def test_an_agent_typed_with_another_status_is_refused_on_the_form(operator, agent):
    task = store.create_task(title="t", team="default").task
    response = page(operator, task, status="backlog", claim_agent=agent.pk)
    assert response.status_code == 200
    [error] = response.context["adminform"].form.errors["claim_agent"]
    assert "In progress" in error
    assert store.get_task(task.id).status == "todo"


def test_choosing_in_progress_with_an_agent_still_claims(operator, agent):
    task = store.create_task(title="t", team="default").task
    response = page(operator, task, status="in_progress", claim_agent=agent.pk)
    assert response.status_code == 302
    assert store.get_task(task.id).assignee_agent_id == agent.pk
