"""``POST /api/board/claim-next`` answers ``409 budget_paused`` when every task the
agent could take is held by paused caps (routine, task tree), not 204 (GOVERNANCE §3);
204 stays the answer when nothing is ready at all."""

from __future__ import annotations

import pytest

from board import store
from board.models import Task
from board.store import spend

pytestmark = pytest.mark.django_db


def spent_run(task_id: str, cents: int, agent: str) -> None:
    claimed = store.claim(task_id, agent, "command")
    assert claimed.ok, claimed.outcome
    run = store.open_execution(task_id, claimed.ticket)
    store.close_execution(run.id, "succeeded", cost_cents=cents)
    store.release(task_id, ticket=claimed.ticket)


def cap(scope: str, scope_id: str) -> None:
    spend.create_budget(
        "default",
        {"scope": scope, "scope_id": scope_id, "window": "day", "limit_cents": 10, "mode": "cap"},
    )


def claim_next(api, agent):
    return api.post("/api/board/claim-next", {"agent_id": agent.id}, format="json")


def test_nothing_ready_is_still_204(api, agent):
    assert claim_next(api, agent).status_code == 204


def test_every_ready_task_under_paused_routine_or_tree_caps_answers_409(api, agent):
    root = store.create_task(title="root").task
    child = store.create_task(title="child", parent_task_id=root.id).task
    fired = store.create_task(title="fired", metadata={"routine_id": "nightly"}).task
    cap("task_tree", root.id)
    cap("routine", "nightly")
    spent_run(child.id, 10, agent.id)
    spent_run(fired.id, 10, agent.id)
    before = list(Task.objects.order_by("id").values_list("id", "status", "revision"))

    answer = claim_next(api, agent)

    assert answer.status_code == 409, answer.content
    body = answer.json()
    assert body["error"] == "budget_paused" and body["scope"] in ("task_tree", "routine")
    assert "resume" in body["detail"]
    # A 4xx writes nothing.
    assert list(Task.objects.order_by("id").values_list("id", "status", "revision")) == before


def test_other_work_is_taken_past_a_paused_tree(api, agent):
    root = store.create_task(title="root").task
    cap("task_tree", root.id)
    spent_run(root.id, 10, agent.id)
    other = store.create_task(title="other").task
    answer = claim_next(api, agent)
    assert answer.status_code == 200 and answer.json()["task"]["id"] == other.id
