"""Periodic work is django-q2 schedules: registered idempotently, and run by any
deployment with a qcluster — the README's four separate commands, no ``up``."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.utils import timezone
from django_q.models import Schedule, Success
from django_q.tasks import async_task

from board import store
from board.models import ExecutionProcess, Task
from core.models import Event
from ops import periodic
from tests.conftest import ROOT

NAMES = {job.name for job in periodic.PERIODIC}


@pytest.mark.django_db
def test_registering_twice_leaves_one_schedule_per_job(settings):
    Schedule.objects.all().delete()
    periodic.register()
    Schedule.objects.create(name="clawboo.prune", func="ops.periodic.prune")  # a racing copy
    settings.CLAWBOO_BOARD_STALE_SWEEP_MS = 150_000
    assert set(periodic.register()) == NAMES
    rows = Schedule.objects.filter(name__in=NAMES)
    assert sorted(r.name for r in rows) == sorted(NAMES)
    sweep = rows.get(name="clawboo.stale-sweep")
    assert (sweep.func, sweep.schedule_type, sweep.minutes, sweep.repeats) == (
        "ops.periodic.stale_sweep",
        Schedule.MINUTES,
        3,  # 150 s, in django-q2's whole minutes
        -1,
    )


@pytest.mark.django_db
def test_the_jobs_run_where_a_q2_worker_runs_them(default_team):
    task = store.create_task(title="gone quiet").task
    got = store.claim(task.id, "ghost", lease_ms=60_000)
    store.open_execution(task.id, got.ticket)
    Event.objects.update(created_at=timezone.now() - dt.timedelta(days=400))
    Task.objects.filter(pk=task.id).update(updated_at=timezone.now() - dt.timedelta(days=1))

    # Q_CLUSTER is sync in the tests: the worker's call, by the schedule's dotted name.
    assert async_task("ops.periodic.stale_sweep", sync=True)
    assert store.get_task(task.id).status == "todo"
    async_task("ops.periodic.prune", sync=True)
    assert not Event.objects.filter(created_at__lt=timezone.now() - dt.timedelta(days=300))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            # The leader only, as `up` does: qcluster stops its own processes in
            # order, and one signalled behind its back leaves it waiting (20 s here).
            proc.send_signal(signal.SIGTERM)
    # How they stop is not under test here: a short grace, then SIGKILL.
    grace = time.monotonic() + 5
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, grace - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:  # the leader, and whatever of its group outlived it
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


@pytest.mark.django_db(transaction=True)
def test_the_four_separate_commands_sweep_a_stale_task_and_prune_old_events(
    default_team, database_url, tmp_path
):
    # Nothing registered beforehand: the cluster's own start writes the schedules.
    Schedule.objects.all().delete()
    task = store.create_task(title="its worker died").task
    got = store.claim(task.id, "ghost", lease_ms=60_000)
    store.open_execution(task.id, got.ticket)
    old = set(Event.objects.values_list("pk", flat=True))
    Event.objects.filter(pk__in=old).update(created_at=timezone.now() - dt.timedelta(days=5))

    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "CLAWBOO_DB_WRITE_BUDGET_MS": "10000",
        "CLAWBOO_Q_WORKERS": "1",
        # Short settings: a run is stale a second after its last beat, history older
        # than a day goes, the sweep asks for every second (a minute, for django-q2).
        "CLAWBOO_BOARD_STALE_TTL_MS": "1000",
        "CLAWBOO_BOARD_STALE_SWEEP_MS": "1000",
        "CLAWBOO_HISTORY_RETENTION_DAYS": "1",
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    commands = {
        "daphne": [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(_free_port())]
        + ["clawboo.asgi:application"],
        # The product's settings with the scheduler's first look 15 s in, not after
        # half a minute (tests/fast_scheduler_settings.py); the schedules are still
        # the ones this cluster's own start writes.
        "qcluster": [*manage, "qcluster", "--settings", "tests.fast_scheduler_settings"],
        "ticker": [*manage, "ticker"],
        "work": [*manage, "work", "--all"],
    }
    procs = [_start(argv, env, tmp_path / f"{name}.log") for name, argv in commands.items()]

    def logs() -> str:
        return "\n".join(
            f"--- {name}\n{(tmp_path / f'{name}.log').read_text(errors='replace')[-2000:]}"
            for name in commands
        )

    try:
        # The schedules are due at once; the scheduler looks 15 s after the cluster
        # starts and every 30 s after (tests/fast_scheduler_settings.py).
        deadline = time.monotonic() + 150
        while True:
            swept = store.get_task(task.id).status == "todo"
            pruned = not Event.objects.filter(pk__in=old).exists()
            # ...and the schedules did it (no boot pass runs outside `up`): the
            # cluster recorded the sweep's result, one task released.
            recorded = [s.result for s in Success.objects.filter(func="ops.periodic.stale_sweep")]
            if swept and pruned and 1 in recorded:
                break
            for name, proc in zip(commands, procs, strict=True):
                assert proc.poll() is None, f"{name} exited {proc.returncode}\n{logs()}"
            assert time.monotonic() < deadline, f"{swept=} {pruned=} {recorded=}\n{logs()}"
            time.sleep(0.25)
    finally:
        _stop(procs)

    assert NAMES <= set(Schedule.objects.values_list("name", flat=True))
    run = ExecutionProcess.objects.get(task_id=task.id)
    assert run.status == "timed_out"


@pytest.mark.django_db
def test_the_approval_expiry_runs_as_a_schedule(default_team, settings):
    settings.CLAWBOO_APPROVAL_TTL_MS = 60_000
    waiting = store.create_task(title="risky", labels=["risk"]).task
    Task.objects.filter(pk=waiting.id).update(approval_at=timezone.now() - dt.timedelta(minutes=5))
    periodic.register()
    assert Schedule.objects.get(name="clawboo.approval-expiry").func == (
        "ops.periodic.expire_approvals"
    )

    async_task("ops.periodic.expire_approvals", sync=True)

    assert store.get_task(waiting.id).approval["state"] == "expired"


def test_the_landing_recover_job_leaves_another_hosts_recent_landing_alone():
    """Another host's landing lock is not this host's to see: its pending landing is
    judged dead only once it is long past; this host's at once (its lock proves it)."""
    import socket
    import time as clock

    from worktrees import service

    now = clock.time()
    assert service.settled_here_now({"host": socket.gethostname(), "started_at": now})
    assert service.settled_here_now({"started_at": now})  # an older record: no host
    assert not service.settled_here_now({"host": "elsewhere", "started_at": now - 10})
    old = now - service.FOREIGN_LANDING_S - 1
    assert service.settled_here_now({"host": "elsewhere", "started_at": old})
    names = {job.name: job.func for job in periodic.PERIODIC}
    assert names["clawboo.landing-recover"] == "ops.periodic.recover_landings"
