"""Long-running loops outlive their database: notice a dead connection, drop it,
back off, reconnect, and say so once each way.

Django closes a broken connection only between requests; a loop that is not a
request (the executor workers, the routines ticker, a beater) keeps a connection
that a server restart or ``pg_terminate_backend`` broke and fails every query on
it forever. Each loop therefore calls :func:`fresh` before an iteration (the
check Django runs between requests) and hands a database error to its
:class:`Outage`, which closes the connection, logs "database unavailable" once,
and tells the loop how long to wait before trying again (doubling, capped, so a
database that comes back is used again within :data:`BACKOFF_MAX_S`). The first
iteration that gets through logs "database back" once.

What this process last saw (:func:`last_outage`) is written with its heartbeat,
so ``/healthz`` (served by another process) can say when a part lost the
database and when it got it back.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import connection
from django.db.utils import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

log = logging.getLogger(__name__)

T = TypeVar("T")

BACKOFF_MIN_S = 0.2
BACKOFF_MAX_S = 2.0


def is_unavailable(exc: BaseException) -> bool:
    """True for an error that says the database cannot be used right now (a dead or
    refused connection, a file that cannot be opened or stays locked), as opposed
    to an error in what was asked."""
    from core.storage import WriteBudgetExceeded

    return isinstance(exc, OperationalError | InterfaceError | WriteBudgetExceeded)


def fresh() -> None:
    """Drop this thread's connection if an error made it unusable, so the next
    query opens a new one (Django's check between requests, without its
    ``CONN_MAX_AGE`` part: a loop keeps a healthy connection). Never raises."""
    if connection.connection is None or connection.in_atomic_block:
        return
    if not connection.errors_occurred:
        return
    try:
        usable = connection.is_usable()
    except DatabaseError:
        usable = False
    if usable:
        connection.errors_occurred = False
    else:
        drop()


def drop() -> None:
    """Close this thread's connection whatever state it is in."""
    try:
        connection.close()
    except DatabaseError:
        # Closing a connection the server already dropped can fail; Django has
        # forgotten it either way (``connection.connection`` is reset).
        connection.connection = None


_state_lock = threading.Lock()
_lost_at: dt.datetime | None = None
_back_at: dt.datetime | None = None
_down = 0  # loops of this process that are waiting for the database now


def last_outage() -> tuple[dt.datetime | None, dt.datetime | None]:
    """When a loop of this process last lost the database, and when it got it
    back (None while it is still down, or never lost)."""
    with _state_lock:
        return _lost_at, (_back_at if _down == 0 else None)


class Outage:
    """One loop's view of the database between iterations."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.down_since: float | None = None
        self._delay = BACKOFF_MIN_S

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def lost(self, exc: BaseException) -> float:
        """The iteration failed on the database: drop the connection, log once per
        outage, and return how many seconds to wait before the next try."""
        global _lost_at, _down
        drop()
        if self.down_since is None:
            self.down_since = time.monotonic()
            self._delay = BACKOFF_MIN_S
            log.warning(
                "%s: database unavailable (%s: %s); reconnecting with backoff",
                self.name,
                type(exc).__name__,
                str(exc).strip().splitlines()[0] if str(exc).strip() else "",
            )
            with _state_lock:
                _lost_at = timezone.now()
                _down += 1
        delay = self._delay
        self._delay = min(self._delay * 2, BACKOFF_MAX_S)
        return delay

    def ok(self) -> None:
        """The iteration reached the database: if it was lost, say it is back."""
        global _back_at, _down
        if self.down_since is None:
            return
        spent = time.monotonic() - self.down_since
        self.down_since = None
        log.warning("%s: database back after %.1f s", self.name, spent)
        with _state_lock:
            _back_at = timezone.now()
            _down = max(_down - 1, 0)


def patiently(fn: Callable[[], T], name: str, patience_s: float) -> T:
    """Run ``fn``; while the database is unavailable, reconnect with backoff and run
    it again, for up to ``patience_s`` (then the error propagates). For a write
    that must not be lost to a brief outage: a run's outcome, a fire's enqueue."""
    outage = Outage(name)
    deadline = time.monotonic() + patience_s
    while True:
        try:
            result = fn()
        except Exception as exc:
            if not is_unavailable(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(outage.lost(exc))
            continue
        outage.ok()
        return result
