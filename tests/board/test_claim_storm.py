"""The atomic claim under real OS-process races (issue 2): one winner per task,
and a drain by many processes hands every task out exactly once."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from board import store
from board.models import Task
from core.models import Event, Team
from tests.board.seed import bulk_tasks
from tests.conftest import read_json_line

pytestmark = pytest.mark.django_db(transaction=True)


def test_twelve_processes_racing_for_one_task_leave_one_winner(default_team, race):
    task = store.create_task(title="the only task").task

    results = race([["claim", task.id, "--agent", f"w{i}"] for i in range(12)])

    outcomes = Counter(r["outcome"] for r in results)
    assert outcomes == {"ok": 1, "conflict": 11}
    fresh = store.get_task(task.id)
    assert fresh.status == "in_progress"
    assert fresh.attempts == 1
    winner = next(i for i, r in enumerate(results) if r["outcome"] == "ok")
    assert fresh.assignee_agent_id == f"w{winner}"


@pytest.mark.parametrize("n", [500, pytest.param(2000, marks=pytest.mark.slow)], ids=str)
def test_twelve_processes_drain_the_board_each_task_claimed_exactly_once(default_team, race, n):
    # 500 tasks keep twelve processes racing for every claim from start to end (each
    # takes ~40); -m slow drains 2000, the soak.
    ids = bulk_tasks(n)

    results = race([["drain", "--agent", f"w{i}"] for i in range(12)])

    claimed = [task_id for r in results for task_id in r["claimed"]]
    assert len(claimed) == n
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
    assert Event.objects.filter(kind="claimed").count() == n
    assert Team.objects.get(pk="default").last_event_seq == seqs[-1]


def test_a_frozen_claimer_does_not_slow_another_process_claims(default_team, run_worker):
    # Claims coordinate only in the database: a process stopped between two of its
    # claims (SIGSTOP) holds nothing the next claimer waits for.
    bulk_tasks(40)
    frozen = run_worker("claim-loop", "--agent", "frozen", "--pause-ms", "20")
    other = None
    try:
        assert read_json_line(frozen)["claimed"] is not None
        os.kill(frozen.pid, signal.SIGSTOP)
        other = run_worker("claim-loop", "--agent", "other", "--pause-ms", "0")
        answers = [read_json_line(other) for _ in range(10)]
    finally:
        for proc in (frozen, other):
            if proc is not None:
                proc.kill()
                proc.wait()

    assert all(a["claimed"] is not None for a in answers)
    assert max(a["seconds"] for a in answers) < 0.5
    held = set(Task.objects.filter(assignee_agent_id="other").values_list("id", flat=True))
    assert {a["claimed"] for a in answers} <= held


# Four agents with different labels, runtimes and limits, and the routes the storm's
# tasks carry (in turn): every route is taken by at least one of them.
STORM_AGENTS = {
    "gpu": {"runtime": "command", "labels": ["gpu"], "max_concurrent": 2},
    "ssd": {"runtime": "command", "labels": ["ssd"], "max_concurrent": 3},
    "both": {"runtime": "codex", "labels": ["gpu", "ssd"], "max_concurrent": 2},
    "plain": {"runtime": "claude-code", "labels": [], "max_concurrent": 1},
}
STORM_ROUTES = [
    None,
    {"agent": "gpu"},
    {"runtime": "codex"},
    {"labels": ["gpu"]},
    {"labels": ["ssd"]},
    {"labels": ["gpu", "ssd"]},
    {"runtime": "claude-code"},
]


@pytest.mark.parametrize("n", [600, pytest.param(2000, marks=pytest.mark.slow)], ids=str)
def test_twelve_processes_of_four_routed_agents_take_only_their_tasks_within_limits(
    default_team, race, n
):
    from board.store.ready import routes_to
    from board.store.tasks import route_columns
    from core import registry

    for name, spec in STORM_AGENTS.items():
        registry.create_agent(id=name, display_name=name, team="default", **spec)
    # Each process finishes what it claims, under its agent's limit: 600 tasks keep all
    # twelve busy for many rounds of each route; -m slow drains 2000.
    ids = bulk_tasks(n)
    for i, task_id in enumerate(ids):
        route = STORM_ROUTES[i % len(STORM_ROUTES)]
        if route is not None:
            Task.objects.filter(pk=task_id).update(
                **route_columns({"labels": None, "agent": None, "runtime": None, **route})
            )

    names = list(STORM_AGENTS)
    results = race(
        [["route-drain", "--agent", names[i % 4]] for i in range(12)] + [["sample-held"]],
        # What is raced is the route and the limit, not the write budget.
        extra_env={"CLAWBOO_DB_WRITE_BUDGET_MS": "60000"},
        timeout=600,
    )

    drains, sample = results[:12], results[12]
    claimed = [(task_id, names[i % 4]) for i, r in enumerate(drains) for task_id in r["claimed"]]
    assert len(claimed) == n
    assert Counter(t for t, _ in claimed).most_common(1)[0][1] == 1  # each claimed once
    assert {t for t, _ in claimed} == set(ids)
    tasks = Task.objects.in_bulk(ids)
    for task_id, agent in claimed:
        spec = STORM_AGENTS[agent]
        assert routes_to(tasks[task_id], agent, spec["runtime"], spec["labels"]), (task_id, agent)
    assert set(Task.objects.values_list("status", flat=True)) == {"done"}
    assert sample["samples"] > 1
    for agent, most in sample["most"].items():
        assert most <= STORM_AGENTS[agent]["max_concurrent"], (agent, most)
