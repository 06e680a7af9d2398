"""The storage layer: SQLite's contention recipe and the retrying write wrapper.

This module is the one place for both rules of seed 000's "contention recipe":

* every SQLite connection gets the five pragmas below the moment it opens, and
  every transaction starts ``BEGIN IMMEDIATE`` (``transaction_mode`` in settings);
* :func:`write` runs a write transaction and re-runs it *whole* on a transient lock
  error only (SQLite busy / busy-snapshot / locked; PostgreSQL serialization
  failure and deadlock), with jittered 20–150 ms sleeps under a wall-clock budget.

A function that returns "nothing happened" (a lost claim race, a 0-row update) is
returned as is: application-level conflicts are data, never retried, which is what
lets callers keep the never-retry-a-409 rule. Any other error propagates at once.
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.signals import connection_created
from django.db.utils import DatabaseError
from django.dispatch import receiver

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

SQLITE_PRAGMAS: tuple[tuple[str, str], ...] = (
    ("journal_mode", "WAL"),
    ("busy_timeout", "250"),
    ("wal_autocheckpoint", "50"),
    ("synchronous", "NORMAL"),
    ("foreign_keys", "ON"),
)

JITTER_MIN_MS = 20
JITTER_MAX_MS = 150

# Primary result codes (the low byte of an extended code): SQLITE_BUSY covers
# SQLITE_BUSY_SNAPSHOT (517) and SQLITE_BUSY_RECOVERY; SQLITE_LOCKED covers
# SQLITE_LOCKED_SHAREDCACHE.
_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
# PostgreSQL SQLSTATEs: serialization_failure, deadlock_detected.
_PG_TRANSIENT = {"40001", "40P01"}


@receiver(connection_created)
def apply_sqlite_pragmas(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Set the contention recipe on every new SQLite connection (no-op elsewhere)."""
    if connection.vendor != "sqlite":
        return
    memory = _is_memory_database(connection)
    if not memory:
        keep_wal_index(str(connection.settings_dict.get("NAME")))
    with connection.cursor() as cursor:
        for name, value in SQLITE_PRAGMAS:
            if name == "journal_mode" and memory:
                continue  # an in-memory database cannot be WAL; it has one connection anyway
            cursor.execute(f"PRAGMA {name}={value}")


# A WAL database is read through its wal-index (the ``-shm`` file). When a process's
# last connection closes, SQLite drops that index, and the next connection rebuilds
# it, allocating 32 kB on disk: with the disk full, every read -- opening a
# connection even -- then fails ("disk I/O error"). One idle connection per process
# and database file keeps the index in place for the process's lifetime, so reads
# need no disk space at all.
_keepers: dict[str, tuple[int, sqlite3.Connection]] = {}
_forked_keepers: list[sqlite3.Connection] = []
_keepers_guard = threading.Lock()


def keep_wal_index(path: str) -> None:
    """Hold one idle connection to the SQLite file at ``path`` (once per file)."""
    try:
        inode = os.stat(path).st_ino
    except OSError:
        return  # not created yet: the connection opening it makes it
    held = _keepers.get(path)
    if held is not None and held[0] == inode:
        return
    with _keepers_guard:
        held = _keepers.get(path)
        if held is not None and held[0] == inode:
            return
        try:
            keeper = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()  # maps the index
        except sqlite3.Error:
            return  # the disk is already full: nothing to keep; the read says why
        if held is not None:
            held[1].close()  # the file was replaced (a test database re-created)
        _keepers[path] = (inode, keeper)


def _is_memory_database(connection: Any) -> bool:
    name = str(connection.settings_dict.get("NAME") or "")
    return name == ":memory:" or "mode=memory" in name


def is_transient_lock_error(exc: BaseException) -> bool:
    """True for the lock errors that a re-run of the whole transaction can cure."""
    for err in _chain(exc):
        code = getattr(err, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
            return True
        if isinstance(err, sqlite3.OperationalError) and code is None:
            # Drivers older than Python 3.11 carry no code; match SQLite's own words.
            text = str(err).lower()
            if "database is locked" in text or "database table is locked" in text:
                return True
        sqlstate = getattr(err, "sqlstate", None) or getattr(err, "pgcode", None)
        if sqlstate in _PG_TRANSIENT:
            return True
    return False


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


class WriteBudgetExceeded(DatabaseError):
    """The database stayed locked for the whole write budget."""


def write_budget_seconds() -> float:
    return float(settings.CLAWBOO_DB_WRITE_BUDGET_MS) / 1000.0


def write(
    fn: Callable[P, T],
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """Run ``fn`` inside one write transaction, re-running it on transient lock errors.

    The transaction is ``BEGIN IMMEDIATE`` on SQLite and ``READ COMMITTED`` on
    PostgreSQL. Inside an enclosing ``atomic`` block the retry belongs to the
    outermost caller (a savepoint cannot be re-run on its own), so ``fn`` simply
    runs in a savepoint and any error propagates.
    """
    return _retrying(connections[DEFAULT_DB_ALIAS], fn, args, kwargs)


def _retrying(connection: Any, fn: Callable[..., T], args: Any, kwargs: dict[str, Any]) -> T:
    if connection.in_atomic_block:
        with transaction.atomic(using=connection.alias):
            return fn(*args, **kwargs)

    budget = write_budget_seconds()
    deadline = time.monotonic() + budget
    lock = _process_write_lock(connection)
    attempt = 0
    while True:
        attempt += 1
        if lock is not None and not lock.acquire(timeout=max(deadline - time.monotonic(), 0.001)):
            raise WriteBudgetExceeded(f"another thread held the write lock for {budget:.1f}s")
        try:
            with transaction.atomic(using=connection.alias):
                return fn(*args, **kwargs)
        except DatabaseError as exc:
            if not is_transient_lock_error(exc):
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WriteBudgetExceeded(
                    f"database stayed locked for {budget:.1f}s ({attempt} attempts)"
                ) from exc
            # Jitter spreads racers apart; the last sleep is clamped to what is left.
            pause = min(random.uniform(JITTER_MIN_MS, JITTER_MAX_MS) / 1000.0, remaining)
        finally:
            if lock is not None:
                lock.release()
        time.sleep(pause)


class FairWriteLock:
    """A re-entrant lock granted in arrival order.

    Threads of one process (daphne runs each request's view in its own thread)
    queue on it for SQLite's one writer instead of on SQLite's busy handler, which
    sleeps in steps of up to 100 ms however soon the lock frees up. In order,
    because a plain lock lets a releasing thread barge ahead of the waiters: under
    load one unlucky write could wait out its whole budget while later ones
    passed. Re-entrant: an after-commit hook may write again from the same thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._waiting: deque[object] = deque()

    def acquire(self, timeout: float) -> bool:
        me = threading.get_ident()
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            ticket = object()
            self._waiting.append(ticket)
            while self._owner is not None or self._waiting[0] is not ticket:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._waiting.remove(ticket)
                    self._cond.notify_all()  # the next in line may be first now
                    return False
                self._cond.wait(remaining)
            self._waiting.popleft()
            self._owner, self._depth = me, 1
            return True

    def release(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()


_write_locks: dict[str, FairWriteLock] = {}
_write_locks_guard = threading.Lock()


def _forget_write_locks() -> None:
    # A forked child has one thread; a lock that another thread of its parent held
    # at the fork would stay held in the child forever.
    global _write_locks_guard, _keepers_guard
    _write_locks.clear()
    _write_locks_guard = threading.Lock()
    # The parent's keepers are the parent's: never closed here (closing a SQLite
    # connection opened before a fork can drop the parent's locks), only forgotten.
    _forked_keepers.extend(conn for _, conn in _keepers.values())
    _keepers.clear()
    _keepers_guard = threading.Lock()


os.register_at_fork(after_in_child=_forget_write_locks)


def _process_write_lock(connection: Any) -> FairWriteLock | None:
    if connection.vendor != "sqlite":
        return None
    key = str(connection.settings_dict.get("NAME"))
    lock = _write_locks.get(key)  # a dict read is atomic; create under the guard
    if lock is None:
        with _write_locks_guard:
            lock = _write_locks.setdefault(key, FairWriteLock())
    return lock


def pool_stats(alias: str = DEFAULT_DB_ALIAS) -> dict[str, int] | None:
    """This process's PostgreSQL connection pool (``CLAWBOO_DB_POOL_*``): its bounds,
    the connections it holds now, how many of those are free and how many
    borrowers wait. None without a pool (SQLite, or the pool turned off)."""
    conn = connections[alias]
    if conn.vendor != "postgresql" or not conn.settings_dict.get("OPTIONS", {}).get("pool"):
        return None
    stats = conn.pool.get_stats()  # type: ignore[attr-defined]  # the PostgreSQL backend's
    return {
        "min_size": int(stats.get("pool_min", 0)),
        "max_size": int(stats.get("pool_max", 0)),
        "size": int(stats.get("pool_size", 0)),
        "available": int(stats.get("pool_available", 0)),
        "waiting": int(stats.get("requests_waiting", 0)),
        "timeouts": int(stats.get("requests_errors", 0)),
    }


# How soon PostgreSQL finds the connection of a held lock dead when its host went away
# without closing it (a power cut, a network split): idle, interval, probes.
LOCK_KEEPALIVES = (("tcp_keepalives_idle", 30), ("tcp_keepalives_interval", 10),
                   ("tcp_keepalives_count", 3))  # fmt: skip


def lock_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of :func:`lock_across_hosts` ``name``."""
    digest = hashlib.sha256(f"clawboo-lock:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextmanager
def lock_across_hosts(name: str, alias: str = DEFAULT_DB_ALIAS) -> Iterator[bool]:
    """Hold the lock ``name`` while the block runs, across every process on every host
    that shares the database: yields True, or False at once (holding nothing) when
    another holds it. Callers serialize their own host first (the per-path lock,
    :func:`worktrees.locks.path_lock`, whose files are the host's).

    PostgreSQL: a session advisory lock on a connection of its own -- not the pool's
    (a pooled connection would go back to the pool still holding it), not in any
    transaction the block runs -- closed when the block ends. A holder that dies lets
    go with its connection; one whose host vanished, once TCP keepalives find it dead
    (about a minute, :data:`LOCK_KEEPALIVES`). SQLite is one host's database, the
    per-path lock already serializes it: yields True."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        yield True
        return
    import psycopg  # the PostgreSQL backend's driver

    raw = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        with raw.cursor() as cursor:
            for knob, value in LOCK_KEEPALIVES:
                cursor.execute(f"SET {knob} = {int(value)}")
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [lock_key(name)])
            row = cursor.fetchone()
        yield bool(row and row[0])
    finally:
        raw.close()  # the session's end lets go of its lock
