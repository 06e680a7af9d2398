"""Acceptance: two worker processes draining a team under a cap budget. The spend is
one figure in the database, so the team never spends more than its cap plus one
run's ceiling, and the 80 % and 100 % crossings are notified exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db.models import Sum

from board import store
from board.models import ExecutionProcess, Task
from board.store import spend
from core import registry
from core.models import Agent, Event
from tests.executor.test_spend import STAND_IN

ROOT = Path(__file__).resolve().parents[2]
CAP = 100
# Each run: 4 turns of 12500 input tokens of claude-opus-5-5 (4 $/M) = 5¢ a turn.
CEILING = 20


@pytest.mark.django_db(transaction=True)
def test_two_workers_draining_a_capped_team_stay_within_cap_plus_one_ceiling(
    tmp_path, database_url, state_dir
):
    claude = tmp_path / "claude"
    claude.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    claude.chmod(0o755)
    for agent in ("w1", "w2"):
        registry.create_agent(
            id=agent,
            display_name=agent,
            team="default",
            runtime="claude-code",
            settings={
                "binary": str(claude),
                "extra_args": ["--turns", "4", "--input-tokens", "12500", "--every", "0.3"],
            },
        )
    budget = spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "day",
            "limit_cents": CAP,
            "mode": "cap",
        },
    )
    for n in range(20):
        store.create_task(title=f"job {n}", file_mutating=False, max_run_cents=CEILING)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state_dir),
        "CLAWBOO_HEARTBEAT_MS": "1000",
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "work", "--agent", agent, "--once"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for agent in ("w1", "w2")
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err[-2000:]

    spent = ExecutionProcess.objects.aggregate(total=Sum("cost_cents"))["total"]
    assert CAP <= spent <= CAP + CEILING
    body = spend.get_budget(budget.pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (spent, "paused")
    assert Event.objects.filter(kind="budget_warning").count() == 1
    assert Event.objects.filter(kind="budget_exhausted").count() == 1
    # Both workers ran; the rest of the backlog waits for a person.
    assert set(ExecutionProcess.objects.values_list("agent_id", flat=True)) == {"w1", "w2"}
    assert Task.objects.filter(status="todo").count() > 10
    print(f"spent {spent}¢ of a {CAP}¢ cap (ceiling {CEILING}¢)")


# Many runs in flight with large usage reports: the pause alone (a run stops at its
# next report) would let every run in flight spend one more report past the cap --
# here each report is half a ceiling and eight runs go at once. The claim reserves
# the headroom of the runs in flight instead, so the cap is passed by one ceiling
# at most, however many runs go.
MANY_CAP = 90
TURN_CENTS = 10  # 25000 input tokens of claude-opus-5-5 (4 $/M)
PER_PROCESS = 4


def _settled(budget_id: int) -> bool:
    """The cap has paused the team and every run has closed."""
    return (
        spend.get_budget(budget_id).paused_until is not None
        and not ExecutionProcess.objects.filter(status="running").exists()
        and not Task.objects.filter(status="in_progress").exists()
    )


@pytest.mark.django_db(transaction=True)
def test_eight_agents_in_two_processes_with_large_reports_stay_within_cap_plus_one_ceiling(
    tmp_path, database_url, state_dir
):
    claude = tmp_path / "claude"
    claude.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    claude.chmod(0o755)
    groups = [[f"p{p}a{n}" for n in range(PER_PROCESS)] for p in range(2)]
    for agent in sum(groups, []):
        registry.create_agent(
            id=agent,
            display_name=agent,
            team="default",
            runtime="claude-code",
            settings={
                "binary": str(claude),
                # Two reports of 10¢: a run reaches its 20¢ ceiling at its second.
                "extra_args": ["--turns", "2", "--input-tokens", "25000", "--every", "0.4"],
            },
        )
    budget = spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "total",
            "limit_cents": MANY_CAP,
            "mode": "cap",
        },
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state_dir),
        "CLAWBOO_HEARTBEAT_MS": "1000",
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [sys.executable, "manage.py", "work", "--poll-ms", "200"]
            + [arg for agent in group for arg in ("--agent", agent)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for group in groups
    ]
    try:
        # The work is made once every agent of both processes has polled (its first
        # preflight is stored): on a loaded machine one process could otherwise
        # take every run the cap admits before the other has started.
        deadline = time.monotonic() + 120
        agents = sum(groups, [])
        while Agent.objects.filter(pk__in=agents, health_checked_at__isnull=False).count() < len(
            agents
        ):
            assert all(w.poll() is None for w in workers), "a worker process died"
            assert time.monotonic() < deadline, "the workers never polled"
            time.sleep(0.2)
        for n in range(24):
            store.create_task(title=f"job {n}", file_mutating=False, max_run_cents=CEILING)
        deadline = time.monotonic() + 180
        while not _settled(budget.pk) and time.monotonic() < deadline:
            assert all(w.poll() is None for w in workers), "a worker process died"
            time.sleep(0.2)
        assert _settled(budget.pk), "the cap never stopped the team"
        # Paused: the waiting workers (polling every 200 ms) claim nothing more.
        runs = ExecutionProcess.objects.count()
        time.sleep(1.5)
        assert ExecutionProcess.objects.count() == runs
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.communicate()

    spent = ExecutionProcess.objects.aggregate(total=Sum("cost_cents"))["total"]
    print(f"8 agents spent {spent}¢ of a {MANY_CAP}¢ cap (ceiling {CEILING}¢) in {runs} runs")
    assert MANY_CAP <= spent <= MANY_CAP + CEILING
    body = spend.get_budget(budget.pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (spent, "paused")
    assert Event.objects.filter(kind="budget_warning").count() == 1
    assert Event.objects.filter(kind="budget_exhausted").count() == 1
    # Runs still went side by side, from both processes.
    ran = set(ExecutionProcess.objects.values_list("agent_id", flat=True))
    assert {agent[:2] for agent in ran} == {"p0", "p1"}, ran
