"""A run's close sent by several processes at once (a remote worker's close retried
while the first is still being served, a recovery pass closing it too): the run is
closed once, and its spend counts once -- on the run, its task and the budget over
it -- whichever close got there first."""

from __future__ import annotations

import pytest

from board import store
from board.models import ExecutionProcess
from board.store import spend

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
