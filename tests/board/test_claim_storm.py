"""The atomic claim under real OS-process races (issue 2): one winner per task,
and a drain by many processes hands every task out exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from board import store
from board.models import Task
from core.models import Event, Team
from tests.board.seed import bulk_tasks

pytestmark = pytest.mark.django_db(transaction=True)

# Claims race directly, or through this machine's claim combiner (board.store.combiner).
PATHS = pytest.mark.parametrize(
    "combiner_env",
    [
        {"CLAWBOO_CLAIM_COMBINER": "0"},
        {"CLAWBOO_CLAIM_COMBINER": "1", "CLAWBOO_CLAIM_COMBINER_CROWD": "1"},
    ],
    ids=["direct", "combined"],
)


@PATHS
def test_twelve_processes_racing_for_one_task_leave_one_winner(default_team, race, combiner_env):
    task = store.create_task(title="the only task").task

    results = race([["claim", task.id, "--agent", f"w{i}"] for i in range(12)], combiner_env)

    outcomes = Counter(r["outcome"] for r in results)
    assert outcomes == {"ok": 1, "conflict": 11}
    fresh = store.get_task(task.id)
    assert fresh.status == "in_progress"
    assert fresh.attempts == 1
    winner = next(i for i, r in enumerate(results) if r["outcome"] == "ok")
    assert fresh.assignee_agent_id == f"w{winner}"


@PATHS
def test_twelve_processes_drain_two_thousand_tasks_each_claimed_exactly_once(
    default_team, race, combiner_env
):
    ids = bulk_tasks(2000)

    results = race([["drain", "--agent", f"w{i}"] for i in range(12)], combiner_env)

    claimed = [task_id for r in results for task_id in r["claimed"]]
    assert len(claimed) == 2000
    assert Counter(claimed).most_common(1)[0][1] == 1  # nobody got a task twice
    assert set(claimed) == set(ids)  # none lost
    assert not Task.objects.filter(status="todo").exists()
    assert set(Task.objects.values_list("attempts", flat=True)) == {1}
    # More than one process did real work: it was a race, not a queue.
    assert sum(1 for r in results if r["claimed"]) > 1
    # Every claim wrote its event in its own transaction: per-team seq has no gaps.
    seqs = list(
        Event.objects.filter(team_id="default").order_by("seq").values_list("seq", flat=True)
    )
    assert seqs == list(range(1, len(seqs) + 1))
    assert Event.objects.filter(kind="claimed").count() == 2000
    assert Team.objects.get(pk="default").last_event_seq == seqs[-1]
