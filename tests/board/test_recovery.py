"""Crash recovery (issue 3): a real worker is SIGKILLed mid-run; the stale sweep and
the boot orphan pass recover its task, a second pass is a no-op, and a live,
beating execution is spared."""

from __future__ import annotations

import datetime as dt
import os
import signal

import pytest
import time_machine
from django.utils import timezone

from board import store
from board.models import ExecutionProcess
from board.store.recovery import ORPHAN_ERROR, STALE_ERROR, stale_ttl
from tests.conftest import read_json_line

pytestmark = pytest.mark.django_db(transaction=True)


def crash_a_worker(run_worker, task_id: str) -> int:
    """Start a worker that claims ``task_id``, opens an execution and heartbeats;
    once it has beaten twice, SIGKILL it. Returns the execution id."""
    proc = run_worker("crash-worker", task_id, "--agent", "doomed", "--beat-ms", "50")
    try:
        started = read_json_line(proc)
        assert started["outcome"] == "ok", started
        while read_json_line(proc).get("beat", 0) < 2:
            pass
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = ExecutionProcess.objects.get(pk=started["execution"])
    assert (run.status, run.pid) == ("running", proc.pid)
    assert store.get_task(task_id).status == "in_progress"
    return run.id


@pytest.fixture
def live(default_team):
    """A run that is alive and beating in this process."""
    task = store.create_task(title="alive").task
    got = store.claim(task.id, "healthy", lease_ms=3_600_000)
    run = store.open_execution(task.id, got.ticket)
    return task.id, got.ticket, run.id


def test_the_stale_sweep_releases_a_killed_workers_task(default_team, run_worker, live):
    task = store.create_task(title="will crash").task
    run_id = crash_a_worker(run_worker, task.id)
    live_id, live_ticket, live_run = live

    with time_machine.travel(timezone.now() + stale_ttl() + dt.timedelta(seconds=1), tick=False):
        assert store.heartbeat(live_id, live_ticket).recorded
        assert store.release_stale() == [task.id]
        assert store.release_stale() == []

    released = store.get_task(task.id)
    assert (released.status, released.assignee_agent_id, released.abandonments) == ("todo", None, 1)
    run = ExecutionProcess.objects.get(pk=run_id)
    assert (run.status, run.error) == ("timed_out", STALE_ERROR)
    assert store.get_task(live_id).status == "in_progress"
    assert ExecutionProcess.objects.get(pk=live_run).status == "running"
    assert store.claim(task.id, "phoenix").task.attempts == 2  # a fresh claim re-acquires


def test_the_boot_pass_reaps_an_orphan_once_and_spares_a_live_run(default_team, run_worker, live):
    task = store.create_task(title="will crash").task
    run_id = crash_a_worker(run_worker, task.id)
    live_id, live_ticket, live_run = live

    with time_machine.travel(timezone.now() + stale_ttl() + dt.timedelta(seconds=1), tick=False):
        assert store.heartbeat(live_id, live_ticket).recorded
        assert store.reconcile_orphans() == [task.id]
        reaped = ExecutionProcess.objects.get(pk=run_id)
        assert (reaped.status, reaped.error) == ("failed", ORPHAN_ERROR)
        assert reaped.recovery_tombstone
        assert store.get_task(task.id).status == "todo"
        # Second pass: a no-op (no infinite auto-resume).
        revision = store.get_task(task.id).revision
        assert store.reconcile_orphans() == []
        assert store.get_task(task.id).revision == revision
        assert (
            ExecutionProcess.objects.get(pk=run_id).recovery_tombstone == reaped.recovery_tombstone
        )

    assert ExecutionProcess.objects.get(pk=live_run).status == "running"
    assert store.get_task(live_id).status == "in_progress"


def test_a_run_that_is_not_yet_stale_survives_the_boot_pass(default_team, live):
    live_id, _, live_run = live
    assert store.run_boot_passes() == {"orphans": [], "stale": []}
    assert ExecutionProcess.objects.get(pk=live_run).status == "running"
