"""The storage layer (issue 2, item 2): the SQLite pragmas on every connection and
the write wrapper's four rules — retry only transient lock errors with jittered
20–150 ms backoff re-running the whole transaction; return a 0-row result
unretried; propagate anything else at once; give up on a wall-clock budget."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import IntegrityError, connection, connections, transaction
from django.db.utils import OperationalError
from django.test import override_settings

from board import store
from board.models import Task
from core import storage
from core.models import Team

pytestmark = pytest.mark.django_db(transaction=True)


def on_sqlite() -> bool:
    return connection.vendor == "sqlite"


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record every backoff pause the wrapper takes (and still take it)."""
    taken: list[float] = []
    real_sleep = time.sleep

    def recording_sleep(seconds: float) -> None:
        taken.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(storage.time, "sleep", recording_sleep)
    return taken


def raise_transient(kind: str) -> None:
    """Raise a real transient lock error of ``kind`` from inside a transaction."""
    if on_sqlite():
        code = {"busy": 5, "busy_snapshot": 517, "locked": 6}[kind]
        text = "database table is locked" if kind == "locked" else "database is locked"
        cause = sqlite3.OperationalError(text)
        cause.sqlite_errorcode = code  # what the driver sets on Python 3.11+
        raise OperationalError(text) from cause
    sqlstate = {"busy": "40001", "busy_snapshot": "40001", "locked": "40P01"}[kind]
    with connection.cursor() as cursor:
        cursor.execute(
            f"DO $$ BEGIN RAISE EXCEPTION 'transient' USING ERRCODE = '{sqlstate}'; END $$"
        )


def test_every_new_sqlite_connection_gets_the_contention_pragmas():
    if not on_sqlite():
        pytest.skip("pragmas are SQLite's")
    fresh = connections.create_connection("default")
    try:
        with fresh.cursor() as cursor:
            values = {}
            for name in ("journal_mode", "busy_timeout", "wal_autocheckpoint", "synchronous"):
                cursor.execute(f"PRAGMA {name}")
                values[name] = cursor.fetchone()[0]
            cursor.execute("PRAGMA foreign_keys")
            values["foreign_keys"] = cursor.fetchone()[0]
    finally:
        fresh.close()
    assert values == {
        "journal_mode": "wal",
        "busy_timeout": 250,
        "wal_autocheckpoint": 50,
        "synchronous": 1,  # NORMAL
        "foreign_keys": 1,
    }
    assert fresh.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


@pytest.mark.parametrize("kind", ["busy", "busy_snapshot", "locked"])
def test_a_transient_lock_error_reruns_the_whole_transaction(kind, sleeps):
    calls: list[int] = []

    def fn() -> str:
        calls.append(1)
        Team.objects.create(pk=f"attempt-{len(calls)}", name="x")
        if len(calls) < 3:
            raise_transient(kind)  # the row above must roll back with it
        return "done"

    assert storage.write(fn) == "done"
    assert len(calls) == 3
    # Only the third attempt's writes survived: each retry re-ran everything.
    assert list(Team.objects.filter(pk__startswith="attempt-").values_list("pk", flat=True)) == [
        "attempt-3"
    ]
    assert len(sleeps) == 2
    assert all(0.020 <= s <= 0.150 for s in sleeps)


def test_backoff_pauses_are_jittered_between_20_and_150_ms(sleeps):
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        if len(calls) <= 8:
            raise_transient("busy")

    storage.write(fn)
    assert len(sleeps) == 8
    assert all(0.020 <= s <= 0.150 for s in sleeps)
    assert len(set(sleeps)) > 1  # jittered, not a fixed step


@contextlib.contextmanager
def sqlite_write_lock_held_for(seconds: float) -> Iterator[None]:
    """Another connection holds SQLite's write lock, releasing it after ``seconds``."""
    if not on_sqlite():
        pytest.skip("the database-wide write lock is SQLite's")
    holder = sqlite3.connect(
        connection.settings_dict["NAME"], isolation_level=None, check_same_thread=False
    )
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(seconds, holder.rollback)
    release.start()
    try:
        yield
    finally:
        release.join()
        holder.close()


def test_a_sqlite_write_waits_out_a_lock_held_by_another_connection(sleeps):
    """A real SQLITE_BUSY at BEGIN IMMEDIATE, released before the budget runs out."""
    calls: list[int] = []
    with sqlite_write_lock_held_for(0.4):
        started = time.monotonic()
        storage.write(lambda: calls.append(1) or Team.objects.create(pk="after-lock", name="x"))
        elapsed = time.monotonic() - started
    assert Team.objects.filter(pk="after-lock").exists()
    assert calls == [1]  # the failed attempts never got as far as the body
    assert sleeps  # it backed off at least once
    assert 0.35 <= elapsed < 1.5


@pytest.mark.parametrize("result", [None, 0])
def test_a_zero_row_result_is_returned_unretried(result, sleeps):
    calls: list[int] = []

    def fn() -> int | None:
        calls.append(1)
        updated = Task.objects.filter(pk="no-such-task").update(priority=5)
        assert updated == 0
        return None if result is None else updated

    assert storage.write(fn) == result
    assert calls == [1]
    assert sleeps == []


def test_a_lost_claim_race_is_data_and_is_not_retried(default_team, sleeps):
    task = store.create_task(title="t").task
    assert store.claim(task.id, "ada").ok
    sleeps.clear()
    started = time.monotonic()
    assert store.claim(task.id, "bob").outcome == "conflict"
    assert sleeps == []
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("error", ["integrity", "value"])
def test_any_other_error_propagates_at_once(error, sleeps):
    Team.objects.create(pk="taken", name="x")
    calls: list[int] = []

    def fn() -> None:
        calls.append(1)
        if error == "integrity":
            Team.objects.create(pk="taken", name="again")
        raise ValueError("not a lock problem")

    expected: type[Exception] = IntegrityError if error == "integrity" else ValueError
    with pytest.raises(expected):
        storage.write(fn)
    assert calls == [1]
    assert sleeps == []


def test_a_lock_held_past_the_budget_gives_up_after_about_1_5_seconds(sleeps):
    """Held by another real connection on SQLite; on PostgreSQL every attempt hits a
    serialization failure. Either way the wrapper stops on the clock."""
    calls: list[int] = []
    holder: Any = None
    if on_sqlite():
        holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")

    def fn() -> None:
        calls.append(1)
        raise_transient("busy")

    started = time.monotonic()
    try:
        with pytest.raises(storage.WriteBudgetExceeded):
            storage.write(fn)
    finally:
        if holder is not None:
            holder.rollback()
            holder.close()
    elapsed = time.monotonic() - started
    assert 1.45 <= elapsed < 2.1
    attempts = len(sleeps) + 1
    assert attempts > 3  # it kept trying until the clock said stop
    assert sum(sleeps) <= 1.5 + 1e-6  # the last pause is clamped to what was left


@override_settings(CLAWBOO_DB_WRITE_BUDGET_MS=400)
def test_the_budget_is_wall_clock_not_an_attempt_count(sleeps):
    def fn() -> None:
        raise_transient("busy")

    started = time.monotonic()
    with pytest.raises(storage.WriteBudgetExceeded):
        storage.write(fn)
    elapsed = time.monotonic() - started
    assert 0.38 <= elapsed < 0.8


def test_twenty_writers_on_one_sqlite_file_let_no_lock_error_escape(default_team, race):
    if not on_sqlite():
        pytest.skip("SQLite's single-writer lock")
    results = race([["write-storm", "--agent", f"w{i}", "--count", "10"] for i in range(20)])

    assert [r["errors"] for r in results] == [[]] * 20
    assert sum(r["done"] for r in results) == 200
    assert Task.objects.filter(status="backlog").count() == 200


@pytest.mark.django_db(transaction=True)
def test_threads_of_one_process_write_at_once_and_every_write_lands(default_team):
    """Eight threads writing at once (as daphne's request threads do): every write
    lands with its event, and none is held anywhere near the retry budget."""
    import threading

    from django.db import connection

    from board import store
    from core.models import Event

    if connection.vendor != "sqlite":
        pytest.skip("the process-local write lock is SQLite's")
    errors: list[BaseException] = []
    slowest: list[float] = []

    def writer(n: int) -> None:
        try:
            for i in range(25):
                began = time.monotonic()
                store.create_task(title=f"t{n}-{i}")
                slowest.append(time.monotonic() - began)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert store.list_tasks().count() == 200
    assert Event.objects.filter(kind="added").count() == 200
    assert max(slowest) < 1.0  # queued behind at most a few peers, never a busy timeout


# --- driver_write: the claim's transaction on the driver connection -------------

_TEAM_INSERT = "INSERT INTO teams (id, name, last_event_seq, created_at) VALUES (%s, %s, 0, %s)"


def insert_team(team_id: str) -> None:
    storage.fetch_row(_TEAM_INSERT + " RETURNING id", [team_id, team_id, "2026-01-01 00:00:00"])


def test_driver_write_commits_and_runs_its_side_effects_only_after_the_commit(sleeps):
    seen: list[bool] = []

    def body() -> str:
        insert_team("driven")
        storage.on_commit(lambda: seen.append(Team.objects.filter(pk="driven").exists()))
        assert seen == []  # not yet: the write lock is still held
        return "done"

    assert storage.driver_write(body) == "done"
    assert seen == [True]  # after commit, and the row was there to see
    assert connection.get_autocommit() and not connection.in_atomic_block


def test_driver_write_rolls_back_on_any_error_and_runs_no_side_effect(sleeps):
    effects: list[int] = []

    def body() -> None:
        insert_team("rolled-back")
        storage.on_commit(lambda: effects.append(1))
        raise ValueError("refused after the insert")

    with pytest.raises(ValueError):
        storage.driver_write(body)
    assert not Team.objects.filter(pk="rolled-back").exists()
    assert effects == [] and sleeps == []
    storage.driver_write(insert_team, "next-one")  # the connection is usable again
    assert Team.objects.filter(pk="next-one").exists()


def test_driver_write_reruns_the_whole_transaction_on_a_transient_lock_error(sleeps):
    attempts: list[int] = []

    def body() -> None:
        attempts.append(1)
        insert_team(f"attempt-{len(attempts)}")
        if len(attempts) < 3:
            raise_transient("busy")

    storage.driver_write(body)
    assert len(attempts) == 3 and len(sleeps) == 2
    ids = set(Team.objects.filter(pk__startswith="attempt-").values_list("pk", flat=True))
    assert ids == {"attempt-3"}  # the failed attempts left nothing behind


def test_driver_write_waits_out_a_lock_held_by_another_connection(sleeps):
    with sqlite_write_lock_held_for(0.4):
        started = time.monotonic()
        storage.driver_write(insert_team, "after-the-holder")
        elapsed = time.monotonic() - started
    assert Team.objects.filter(pk="after-the-holder").exists()
    assert 0.35 <= elapsed < 1.5


def test_driver_write_inside_an_atomic_block_is_part_of_it(sleeps):
    effects: list[int] = []
    with pytest.raises(RuntimeError), transaction.atomic():
        storage.driver_write(
            lambda: (insert_team("inside"), storage.on_commit(lambda: effects.append(1)))
        )
        assert Team.objects.filter(pk="inside").exists()
        raise RuntimeError("the outer block rolls back")
    assert not Team.objects.filter(pk="inside").exists()
    assert effects == []


# --- the checkpointer (SQLite) ------------------------------------------------------

FRAME = 4096 + 24  # a WAL frame: one page and its header


def grow_wal(conn: sqlite3.Connection, commits: int) -> None:
    for _ in range(commits):  # each commit: a page of its own, and the table's root
        conn.execute("INSERT INTO filler (body) VALUES (randomblob(3000))")


def wal_frames(path: Any) -> int:
    return os.path.getsize(f"{path}-wal") // FRAME


@pytest.fixture
def wal_file(tmp_path: Any) -> Iterator[tuple[Any, sqlite3.Connection]]:
    """A SQLite file in WAL mode and a writer on it with the storage recipe."""
    path = tmp_path / "wal.sqlite3"
    writer = storage.connect_sqlite(str(path))
    writer.execute("CREATE TABLE filler (id INTEGER PRIMARY KEY, body BLOB)")
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # start from an empty WAL
    yield path, writer
    writer.close()


def wait_for(predicate: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.django_db(transaction=False)
def test_a_poked_checkpointer_backfills_the_wal_so_the_writer_restarts_it(wal_file):
    path, writer = wal_file
    checkpointer = storage.Checkpointer(str(path))
    try:
        grow_wal(writer, 7)
        before = wal_frames(path)
        assert 7 <= before < 25  # two of these stay under the writer's own autocheckpoint

        checkpointer.poke()
        assert wait_for(lambda: checkpointer.runs == 1)
        grow_wal(writer, 7)

        # Backfilled, so the writer wrote its next frames from the WAL's top again
        # (growing on, the file would have taken another `before` frames).
        assert wal_frames(path) <= before + 2
    finally:
        checkpointer.stop()
    assert not checkpointer.is_alive()


@pytest.mark.django_db(transaction=False)
def test_without_a_checkpoint_the_wal_grows_until_the_writer_checkpoints(wal_file):
    path, writer = wal_file
    grow_wal(writer, 7)
    before = wal_frames(path)

    grow_wal(writer, 7)

    assert wal_frames(path) >= 2 * before - 2  # (the control of the test above)


@pytest.mark.django_db(transaction=False)
def test_a_checkpointer_that_cannot_open_its_database_stops_quietly(tmp_path):
    (tmp_path / "not-a-database").write_bytes(b"x" * 4096)
    checkpointer = storage.Checkpointer(str(tmp_path / "not-a-database"))

    assert wait_for(lambda: not checkpointer.is_alive())
    checkpointer.poke()  # nobody listens, nothing hangs
    checkpointer.stop()
    assert checkpointer.runs == 0
