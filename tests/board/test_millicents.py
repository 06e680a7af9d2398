"""Cost is kept in millicents, so a run under half a cent counts (it used to round
to 0, and many cheap runs never reached a budget). Every ``*_cents`` the API shows
is the millicent figure rounded half up, and the rules compare that rounding."""

from __future__ import annotations

import pytest

from board import store
from board.money import cents_of
from board.store import spend
from executor import pricing

pytestmark = pytest.mark.django_db


def cheap_run(task_id: str, millicents: int, agent: str = "ada") -> None:
    claimed = store.claim(task_id, agent, "command")
    assert claimed.ok, claimed.outcome
    run = store.open_execution(task_id, claimed.ticket)
    store.close_execution(run.id, "succeeded", cost_millicents=millicents)
    store.release(task_id, ticket=claimed.ticket)


def test_the_rounding_is_half_up_to_whole_cents():
    assert [cents_of(m) for m in (0, 1, 499, 500, 1499, 1500, 30_015)] == [0, 0, 0, 1, 1, 2, 30]


def test_a_run_under_half_a_cent_is_priced_and_kept():
    # 750 input tokens of claude-opus-5-5 (400 ¢ per million) = 0.3 ¢.
    usage = pricing.usage_of(pricing.Tokens(tokens_in=750, model="claude-opus-5-5"))
    assert (usage.cost_cents, usage.millicents, usage.cost_status) == (0, 300, "estimated")


def test_cheap_runs_add_up_on_the_task_its_tree_and_the_usage_report(default_team):
    root = store.create_task(title="root").task
    child = store.create_task(title="child", parent_task_id=root.id).task
    for _ in range(4):
        cheap_run(child.id, 300)
    (run, *_) = store.list_executions(child.id)
    assert run.as_dict()["cost_cents"] == 0 and run.as_dict()["cost_millicents"] == 300
    assert store.get_task(child.id).as_dict()["cost"]["cents"] == 1  # 1.2 ¢
    assert store.get_task(root.id).as_dict()["cost"]["tree_cents"] == 1
    report = spend.usage_report(["default"], store.now())
    assert report.teams[0]["today"] == 1


def test_runs_under_half_a_cent_reach_a_cap_budget(default_team):
    budget = spend.create_budget(
        "default",
        {"scope": "team", "scope_id": "default", "window": "day", "limit_cents": 1, "mode": "cap"},
    )
    tasks = [store.create_task(title=f"t{n}").task for n in range(3)]
    cheap_run(tasks[0].id, 300)
    body = spend.get_budget(budget.pk).as_dict(store.now())
    assert (body["spent_millicents"], body["spent_cents"], body["status"]) == (300, 0, "active")
    cheap_run(tasks[1].id, 300)
    body = spend.get_budget(budget.pk).as_dict(store.now())
    # 0.6 ¢ shows as 1 ¢: at its 1 ¢ limit, so the cap pauses (shown and status agree).
    assert (body["spent_millicents"], body["spent_cents"], body["status"]) == (600, 1, "paused")
    assert store.claim(tasks[2].id, "ada", "command").outcome == "budget_paused"


def test_a_new_budget_starts_from_the_millicents_its_scope_spent(default_team):
    task = store.create_task(title="t").task
    cheap_run(task.id, 400)
    cheap_run(task.id, 400)
    budget = spend.create_budget(
        "default",
        {"scope": "task_tree", "scope_id": task.id, "window": "day", "limit_cents": 5},
    )
    body = budget.as_dict(store.now())
    assert (body["spent_millicents"], body["spent_cents"]) == (800, 1)


def test_cents_alone_still_mean_cents(default_team):
    task = store.create_task(title="t").task
    claimed = store.claim(task.id, "ada", "command")
    run = store.open_execution(task.id, claimed.ticket)
    closed = store.close_execution(run.id, "succeeded", cost_cents=7)
    assert (closed.cost_cents, closed.cost_millicents) == (7, 7000)
