"""Crash recovery (issue 3): a real worker is SIGKILLed mid-run; the stale sweep, the
lapse sweep and the boot orphan pass recover its task, a second pass is a no-op, and
a live, beating execution is spared."""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone
from django_q.tasks import async_task

from board import store
from board.checks import DEFAULT_LEASE_MS
from board.models import ExecutionProcess, Task
from board.store.recovery import ORPHAN_ERROR, STALE_ERROR, stale_ttl
from core.models import Event
from ops.metrics import LEASE_LAPSED
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
    assert store.run_boot_passes() == {"orphans": [], "stale": [], "lapsed": []}
    assert ExecutionProcess.objects.get(pk=live_run).status == "running"


def _kinds(task_id: str) -> list[str]:
    return list(
        Event.objects.filter(task_id=task_id).order_by("seq").values_list("kind", flat=True)
    )


def test_the_scheduled_sweep_releases_a_killed_workers_lapsed_lease_with_no_claim(
    default_team, run_worker
):
    # A worker is SIGKILLed mid-run and nobody claims afterwards. Its lease lapses
    # before the task goes stale (the default lease is shorter than the stale TTL):
    # the scheduled sweep alone hands it back, as the claim path would have.
    task = store.create_task(title="will crash").task
    run_id = crash_a_worker(run_worker, task.id)
    lapsed = dt.timedelta(milliseconds=DEFAULT_LEASE_MS, seconds=1)
    assert lapsed < stale_ttl()

    with time_machine.travel(timezone.now() + lapsed, tick=False):
        assert store.release_stale() == []  # not stale yet: the stale pass alone waits
        assert store.get_task(task.id).status == "in_progress"
        # The schedule's job, by its dotted name, as a q2 worker runs it.
        assert async_task("ops.periodic.stale_sweep", sync=True)
        assert store.release_lapsed_leases() == []  # a second pass is a no-op

    released = store.get_task(task.id)
    assert (released.status, released.assignee_agent_id, released.abandonments) == ("todo", None, 1)
    assert released.lease_until is None
    run = ExecutionProcess.objects.get(pk=run_id)
    assert (run.status, run.error) == ("timed_out", LEASE_LAPSED)
    assert _kinds(task.id)[-1] == "released"
    assert store.claim(task.id, "phoenix").task.attempts == 2  # a fresh claim re-acquires


def test_a_claim_that_never_opened_its_run_is_released_when_its_lease_lapses(default_team):
    # Claimed, then its worker died before opening the run (a remote worker claims
    # and opens in two calls): no running execution, so the stale sweep never sees
    # it, however long it waits. The lapse sweep does.
    task = store.create_task(title="claimed, never started").task
    assert store.claim(task.id, "gone", lease_ms=5_000).ok

    with time_machine.travel(timezone.now() + dt.timedelta(days=1), tick=False):
        assert store.release_stale() == []
        assert store.get_task(task.id).status == "in_progress"
        assert async_task("ops.periodic.stale_sweep", sync=True)

    released = store.get_task(task.id)
    assert (released.status, released.abandonments) == ("todo", 1)
    assert _kinds(task.id)[-1] == "released"


def test_a_claim_whose_run_closed_unsettled_is_released_when_its_lease_lapses(default_team):
    # The run ended and was closed, but the task was never settled (the worker
    # died, or its write failed, in between): again no running execution.
    task = store.create_task(title="ran, never settled").task
    got = store.claim(task.id, "gone", lease_ms=5_000)
    run = store.open_execution(task.id, got.ticket)
    ExecutionProcess.objects.filter(pk=run.id).update(
        status="completed", finished_at=timezone.now()
    )

    with time_machine.travel(timezone.now() + dt.timedelta(seconds=6), tick=False):
        assert store.release_lapsed_leases() == [task.id]
        assert store.release_lapsed_leases() == []

    assert store.get_task(task.id).status == "todo"
    assert ExecutionProcess.objects.get(pk=run.id).status == "completed"  # left as it ended


def test_the_lapse_sweep_leaves_a_live_lease_and_the_third_lapse_blocks(default_team, live):
    live_id, _, live_run = live
    task = store.create_task(title="keeps lapsing").task
    for _ in range(3):
        assert store.claim(task.id, "gone", lease_ms=1_000).ok
        with time_machine.travel(timezone.now() + dt.timedelta(seconds=2), tick=False):
            assert store.release_lapsed_leases() == [task.id]
    parked = store.get_task(task.id)
    assert (parked.status, parked.abandonments) == ("blocked", 3)
    assert _kinds(task.id)[-1] == "blocked"
    assert store.get_task(live_id).status == "in_progress"
    assert ExecutionProcess.objects.get(pk=live_run).status == "running"


@pytest.mark.postgresql_only
def test_the_lapse_sweep_skips_a_task_a_concurrent_claim_holds_locked(default_team):
    # A claim (or renewal) holding the task's row: the sweep does not wait for it
    # and does not release under it; once the holder is done, the sweep sees the
    # row as the holder left it.
    task = store.create_task(title="contended").task
    assert store.claim(task.id, "gone", lease_ms=1_000).ok
    Task.objects.filter(pk=task.id).update(lease_until=timezone.now() - dt.timedelta(seconds=1))
    locked, done = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic():
                list(Task.objects.select_for_update().filter(pk=task.id))
                locked.set()
                done.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert locked.wait(30)
        assert store.release_lapsed_leases() == []  # skipped, not blocked on
    finally:
        done.set()
        thread.join(30)
    assert store.release_lapsed_leases() == [task.id]
    assert store.get_task(task.id).abandonments == 1
