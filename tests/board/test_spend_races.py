"""Spend written by several processes at once counts once. A run's close sent by
several (a remote worker's close retried while the first is still being served, a
recovery pass closing it too): the run is closed once, and its spend counts once --
on the run, its task and the budget over it -- whichever close got there first. A
paused cap resumed by two people at once: the grace is given once, not twice."""

from __future__ import annotations

import pytest

from board import store
from board.errors import BudgetPaused
from board.models import ExecutionProcess
from board.store import spend
from core.models import Event

pytestmark = pytest.mark.django_db(transaction=True)

CLOSES = (20, 30, 40, 50)  # each racer's final figure, in cents


def test_closes_racing_from_four_processes_charge_the_run_once(default_team, race):
    pk = spend.create_budget(
        "default", {"scope": "team", "scope_id": "default", "window": "day", "limit_cents": 10**6}
    ).pk
    task = store.create_task(title="t").task
    claimed = store.claim(task.id, "ada", "command")
    run = store.open_execution(task.id, claimed.ticket)
    spend.record_usage(run.id, spend.Usage(tokens_in=10, cost_cents=9, cost_status="estimated"))

    results = race([["close-run", str(run.id), "--cents", str(cents)] for cents in CLOSES])

    row = ExecutionProcess.objects.get(pk=run.id)
    assert row.status == "succeeded" and row.cost_cents in CLOSES
    # Every racer answers the one close that held: the later ones changed nothing.
    assert {r["cost_cents"] for r in results} == {row.cost_cents}, results
    assert store.get_task(task.id).cost_cents == row.cost_cents
    assert spend.get_budget(pk).spent_cents == row.cost_cents


def test_two_resumes_of_a_paused_cap_at_once_give_its_grace_once(default_team, race):
    pk = spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "day",
            "limit_cents": 100,
            "mode": "cap",
        },
    ).pk
    first = store.create_task(title="spends the cap").task
    claimed = store.claim(first.id, "ada", "command")
    run = store.open_execution(first.id, claimed.ticket)
    store.close_execution(run.id, "succeeded", tokens_in=10, cost_cents=120)  # over: paused
    second = store.create_task(title="waits").task
    with pytest.raises(BudgetPaused):
        store.claim(second.id, "ada", "command").raise_for_outcome(second.id)

    results = race([["resume-budget", str(pk), "--grace", "50"]] * 2)

    assert [r["pause_at_cents"] for r in results] == [170, 170]  # 120 spent + 50, each time
    assert spend.get_budget(pk).pause_at_cents == 170
    assert Event.objects.filter(kind="budget_resumed").count() == 2
    assert store.claim(second.id, "ada", "command").ok  # resumed
