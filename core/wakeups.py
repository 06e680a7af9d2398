"""Wake waiting loops when the database changes, instead of polling for the change.

An idle executor worker waits for work to become claimable; the routines ticker
waits for a poke. Both wait here on a *topic* (:data:`BOARD`, :data:`ROUTINES`)
with a slow safety-net timeout, and are woken:

* in-process, by :func:`notify` once the write that calls it commits;
* across processes on PostgreSQL, by ``LISTEN``/``NOTIFY``: :func:`notify` sends
  ``pg_notify`` in the writer's transaction (PostgreSQL delivers it only at
  commit), and one listener thread per process, on a connection of its own, wakes
  the local waiters;
* across processes on SQLite, by one watcher thread per process that reads
  ``PRAGMA data_version`` on a connection of its own every
  :data:`SQLITE_WATCH_S`: it changes whenever another connection commits, and
  reading it is a check of shared memory, not of the disk. Any commit wakes every
  topic; a woken loop re-checks the database, so a spurious wake costs one query.

The contract for a waiter: read :func:`seen` *before* looking at the database,
then :func:`wait` with that value, so a change that lands between the look and the
wait is not lost.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from typing import Any

from django.db import connection, connections, transaction

log = logging.getLogger(__name__)

BOARD = "clawboo_board"  # work may have become claimable
ROUTINES = "clawboo_routines"  # a routine was written: the ticker re-arms
TOPICS = (BOARD, ROUTINES)
SQLITE_WATCH_S = 0.01
# A listener that lost its connection retries after this long, and until then
# waiters fall back on their own timeouts.
RECONNECT_S = 1.0

_cond = threading.Condition()
_generation: dict[str, int] = dict.fromkeys(TOPICS, 0)
_watcher: threading.Thread | None = None
_watcher_for: str | None = None
_stopping = threading.Event()


def notify(topic: str) -> None:
    """Announce, from inside a write transaction, that waiters on ``topic`` should
    look again once it commits (never if it rolls back)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [topic])
    transaction.on_commit(lambda: _bump((topic,)))


def seen(topic: str) -> int:
    """The change count of ``topic`` this process has seen; hand it to :func:`wait`."""
    _ensure_watcher()
    with _cond:
        return _generation[topic]


def wait(topic: str, since: int, timeout: float) -> bool:
    """Block until ``topic`` changed after ``since`` (True) or ``timeout`` passed."""
    _ensure_watcher()
    deadline = time.monotonic() + timeout
    with _cond:
        while _generation[topic] == since:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            _cond.wait(remaining)
        return True


def stop_watching(timeout: float = 10.0) -> None:
    """End this process's watcher (before its database goes away: tests)."""
    global _watcher
    with _cond:
        watcher, _watcher = _watcher, None
    _stopping.set()
    if watcher is not None:
        watcher.join(timeout)
    _stopping.clear()


def wake_all() -> None:
    """Wake every waiter of this process now (a loop that is stopping)."""
    _bump(TOPICS)


def _bump(topics: tuple[str, ...]) -> None:
    with _cond:
        for topic in topics:
            _generation[topic] += 1
        _cond.notify_all()


def _ensure_watcher() -> None:
    """Start this process's cross-process watcher for the default database, once."""
    global _watcher, _watcher_for
    settings_dict = connections["default"].settings_dict
    key = f"{connection.vendor}:{settings_dict.get('NAME')}"
    with _cond:
        if _watcher is not None and _watcher.is_alive() and _watcher_for == key:
            return
        target = _listen_postgresql if connection.vendor == "postgresql" else _watch_sqlite
        if connection.vendor == "sqlite" and _in_memory(settings_dict):
            return  # one process, one connection: in-process wakes are all there is
        _watcher_for = key
        _watcher = threading.Thread(
            target=target, args=(dict(settings_dict),), name="clawboo-wakeups", daemon=True
        )
        _watcher.start()


def _in_memory(settings_dict: dict[str, Any]) -> bool:
    name = str(settings_dict.get("NAME") or "")
    return name == ":memory:" or "mode=memory" in name


def _watch_sqlite(settings_dict: dict[str, Any]) -> None:
    name = str(settings_dict["NAME"])
    outage = _ListenerOutage("SQLite change watcher")
    while not _stopping.is_set():
        try:
            conn = sqlite3.connect(name, uri=name.startswith("file:"), check_same_thread=False)
            try:
                version = conn.execute("PRAGMA data_version").fetchone()[0]
                outage.back()
                while not _stopping.wait(SQLITE_WATCH_S):
                    now = conn.execute("PRAGMA data_version").fetchone()[0]
                    if now != version:
                        version = now
                        _bump(TOPICS)
            finally:
                conn.close()
        except sqlite3.Error:
            outage.lost()
            _stopping.wait(RECONNECT_S)


def _listen_postgresql(settings_dict: dict[str, Any]) -> None:
    outage = _ListenerOutage("PostgreSQL change listener")
    while not _stopping.is_set():
        wrapper = connections.create_connection("default")
        try:
            wrapper.ensure_connection()
            raw = wrapper.connection
            raw.autocommit = True
            for topic in TOPICS:
                raw.execute(f"LISTEN {topic}")
            outage.back()
            _bump(TOPICS)  # anything that changed while nobody listened
            while not _stopping.is_set():
                for note in raw.notifies(timeout=0.5):
                    _bump((note.channel,))
        except Exception:
            if _stopping.is_set():
                break
            outage.lost()
            _stopping.wait(RECONNECT_S)
        finally:
            try:
                wrapper.close()
            except Exception:  # noqa: S110 - closing a broken connection
                pass


class _ListenerOutage:
    """A listener's lost connection, logged once when lost and once when back (it
    retries every RECONNECT_S, and a log line per retry would drown the log)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.down = False

    def lost(self) -> None:
        if self.down:
            log.debug("%s: still no connection", self.name, exc_info=True)
            return
        self.down = True
        log.warning("%s lost its connection; retrying", self.name, exc_info=True)

    def back(self) -> None:
        if self.down:
            self.down = False
            log.warning("%s reconnected", self.name)
