"""Every long-running process outlives losing its database: real ``work --all``,
``ticker`` and ``qcluster`` processes keep dispatching and firing once it answers
again, say so once each way in their logs, and ``/healthz`` shows it."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.db.utils import OperationalError

from board import store
from core import beats, reconnect, registry
from core.models import Heartbeat
from routines import store as routine_store
from routines.models import RoutineFire
from routines.ticker import Ticker
from tests.conftest import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

BACK_WITHIN_S = 10.0


def poll(predicate: Callable[[], Any], deadline_s: float, what: str) -> Any:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def processes(database_url: str, tmp_path: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """The README's separate commands: workers, the ticker and the django-q2 cluster."""
    registry.create_agent(
        id="doer",
        display_name="Doer",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "CLAWBOO_BEAT_MS": "300",
        "CLAWBOO_LOG_LEVEL": "INFO",
        # Shared, so three processes starting at once never race to make one.
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
    }
    commands = {
        "workers": ["work", "--all", "--poll-ms", "1000"],
        "ticker": ["ticker"],
        "qcluster": ["qcluster"],
    }
    procs: dict[str, subprocess.Popen[bytes]] = {}
    logs = tmp_path / "logs"
    logs.mkdir()
    for name, argv in commands.items():
        with open(logs / f"{name}.log", "wb") as out:
            procs[name] = subprocess.Popen(
                [sys.executable, "manage.py", *argv],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    try:
        for part in ("workers", "ticker"):
            poll(
                lambda part=part: Heartbeat.objects.filter(part=part).exists(),
                60,
                f"the {part} beating",
            )
        yield procs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                # The leader only, as `up` does: qcluster stops its own processes in
                # order, and one signalled behind its back leaves it waiting (20 s here).
                proc.send_signal(signal.SIGTERM)
        # How they stop is not under test here: a short grace, then SIGKILL.
        grace = time.monotonic() + 5
        for proc in procs.values():
            try:
                proc.wait(timeout=max(0.1, grace - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:  # the leader, and whatever of its group outlived it
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)


def log_of(tmp_path: Path, name: str) -> str:
    return (tmp_path / "logs" / f"{name}.log").read_text(errors="replace")


def terminate_every_other_connection() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return len(cursor.fetchall())


@contextmanager
def database_refusing_connections() -> Iterator[None]:
    """A real outage: every connection but this test's is cut and none may open
    (asked from another database, as an operator would), until the block ends."""
    settings_dict = connection.settings_dict
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        mine = cursor.fetchone()[0]
    admin = psycopg.connect(
        host=settings_dict.get("HOST") or "127.0.0.1",
        port=settings_dict.get("PORT") or 5432,
        user=settings_dict.get("USER") or None,
        dbname="postgres",
        autocommit=True,
    )
    name = settings_dict["NAME"]
    try:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> %s",
            [name, mine],
        )
        yield
    finally:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        admin.close()


def hold_sqlite_write_lock(seconds: float) -> None:
    """Another writer holds SQLite's write lock for longer than any write budget."""
    raw = sqlite3.connect(connection.settings_dict["NAME"], timeout=30, isolation_level=None)
    try:
        raw.execute("BEGIN EXCLUSIVE")
        time.sleep(seconds)  # the outage itself, not a wait for a result
        raw.execute("COMMIT")
    finally:
        raw.close()


def fires(routine_id: str) -> int:
    return RoutineFire.objects.filter(
        routine_id=routine_id, outcome__in=("dispatched", "satisfied")
    ).count()


def dispatched_and_fired(routine_id: str, fired_before: int) -> None:
    """A new task is run by the workers, and the routine fired by the ticker (its
    task run in the cluster), each within BACK_WITHIN_S."""
    task = store.create_task(title="after the outage", file_mutating=False).task
    routine_store.run_routine_now(routine_id)
    poll(lambda: store.get_task(task.id).status == "done", BACK_WITHIN_S, "the task run")
    poll(
        lambda: fires(routine_id) > fired_before,
        BACK_WITHIN_S,
        "the routine fired",
    )


@pytest.mark.postgresql_only  # pg_terminate_backend; skipped before the processes start
def test_workers_ticker_and_cluster_survive_terminated_connections(processes, tmp_path, client):
    routine = routine_store.create_routine(agent_id="doer", team="default", cron_spec="0 0 1 1 *")
    for round_ in range(3):
        fired = fires(routine.id)
        task = store.create_task(title=f"mid-run {round_}", file_mutating=False).task
        assert terminate_every_other_connection() >= 3  # workers, ticker, cluster, listeners
        poll(lambda task=task: store.get_task(task.id).status == "done", BACK_WITHIN_S, "task")
        dispatched_and_fired(routine.id, fired)
    # A real outage: nobody may connect for a while, then the database answers again.
    with database_refusing_connections():
        poll(lambda: "database unavailable" in log_of(tmp_path, "workers"), 30, "workers see it")
        poll(lambda: "database unavailable" in log_of(tmp_path, "ticker"), 30, "ticker sees it")
        body = client.get("/healthz").json()  # this process's own connection was spared
        assert body["parts"]["database"]["ok"] is True
    dispatched_and_fired(routine.id, fires(routine.id))
    assert all(proc.poll() is None for proc in processes.values()), "a process exited"
    for name in ("workers", "ticker"):
        text = log_of(tmp_path, name)
        # Said once when lost and once when back, not at every retry.
        assert text.count("database unavailable") <= text.count("database back") + 1, text
        assert "database back" in text, text
    poll(
        lambda: client.get("/healthz").json()["parts"]["ticker"].get("db_back_at"),
        10,
        "healthz naming the ticker's outage",
    )
    ticker = client.get("/healthz").json()["parts"]["ticker"]
    assert ticker["db_lost_at"] and "database lost at" in ticker["detail"]


@pytest.mark.sqlite_only  # SQLite's file lock; skipped before the processes start
def test_workers_and_ticker_survive_a_sqlite_write_lock_held_past_every_budget(processes, tmp_path):
    routine = routine_store.create_routine(agent_id="doer", team="default", cron_spec="0 0 1 1 *")
    for round_ in range(2):
        fired = RoutineFire.objects.filter(routine_id=routine.id).count()
        task = store.create_task(title=f"under the lock {round_}", file_mutating=False).task
        routine_store.run_routine_now(routine.id)
        # Taken at once: the woken worker and ticker find the database locked.
        hold_sqlite_write_lock(4.0)
        poll(lambda task=task: store.get_task(task.id).status == "done", BACK_WITHIN_S, "task")
        poll(
            lambda fired=fired: RoutineFire.objects.filter(routine_id=routine.id).count() > fired,
            BACK_WITHIN_S,
            "the routine fired",
        )
    assert all(proc.poll() is None for proc in processes.values()), "a process exited"


def test_the_ticker_loop_reconnects_and_says_so_once_each_way(caplog):
    """In process: a tick that fails on the database three times running is retried
    with backoff, logged once as lost and once as back, and then ticks on."""
    ticker = Ticker(enqueue=lambda rid: None)
    calls = {"n": 0}
    real_tick = ticker.tick

    def flaky_tick():
        calls["n"] += 1
        if calls["n"] <= 3:
            raise OperationalError("server closed the connection unexpectedly")
        if calls["n"] >= 5:
            ticker.stop()
        return real_tick()

    ticker.tick = flaky_tick  # type: ignore[method-assign]
    ticker.wait = lambda delay_ms, marks=None: "timer"  # type: ignore[method-assign]
    runner = threading.Thread(target=ticker.run_forever)
    with caplog.at_level("WARNING", logger="core.reconnect"):
        runner.start()
        runner.join(timeout=30)
    assert not runner.is_alive()
    assert calls["n"] >= 5
    lines = [r.getMessage() for r in caplog.records if r.name == "core.reconnect"]
    assert sum("database unavailable" in line for line in lines) == 1, lines
    assert sum("database back" in line for line in lines) == 1, lines
    lost, back = reconnect.last_outage()
    assert lost is not None and back is not None and back >= lost


def test_healthz_names_when_a_part_lost_the_database_and_got_it_back(client):
    outage = reconnect.Outage("ticker")
    outage.lost(OperationalError("the connection is lost"))
    beats.beat("ticker")
    down = client.get("/healthz").json()["parts"]["ticker"]
    assert down["db_lost_at"] and down["db_back_at"] is None
    assert "not back" in down["detail"]
    outage.ok()
    beats.beat("ticker")
    back = client.get("/healthz").json()["parts"]["ticker"]
    assert back["db_back_at"] >= back["db_lost_at"]
    assert "back after" in back["detail"]
