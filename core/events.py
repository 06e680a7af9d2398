"""The durable per-team event log: the only writer of ``events``.

:func:`append` is called *inside* the mutation's transaction, so an event exists
exactly when its mutation committed; it is delivered to the listeners (the live
board, with its narration) by ``transaction.on_commit``, strictly after commit.
An event that may have made work claimable also wakes idle workers
(:mod:`core.wakeups`), at commit.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from core import wakeups
from core.models import Event, Team

log = logging.getLogger(__name__)

# Called after commit with each committed event; the live board registers here.
_listeners: list[Callable[[Event], None]] = []


def subscribe(listener: Callable[[Event], None]) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def unsubscribe(listener: Callable[[Event], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)


# Events after which nothing can have become claimable: the rest wake idle workers.
_QUIET_KINDS = frozenset(
    {
        "claimed",
        "commented",
        "cost_changed",
        "budget_stopped",
        "budget_warning",
        "budget_exhausted",
        "dependency_added",
        "verification_overridden",
        "routine_fired",
        "routine_dispatched",
        "routine_completed",
        "routine_error",
        "run_step",
        "run_stalled",
    }
)

# Precompiled: every board mutation runs both in its transaction.
_BUMP_SEQ_SQL = (
    f"UPDATE {Team._meta.db_table} SET last_event_seq = last_event_seq + 1 "  # noqa: S608
    "WHERE id = %s RETURNING last_event_seq"
)
_INSERT_SQL = (
    f"INSERT INTO {Event._meta.db_table} "  # noqa: S608 - table name only
    "(team_id, seq, kind, task_id, prev_status, payload, created_at, tenant_id) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, NULL)"
)


def next_seq(team_id: str) -> int:
    """Allocate the team's next sequence number.

    Must run inside the mutation's transaction. The UPDATE takes the team row's
    lock (PostgreSQL) or runs under the database write lock (SQLite), so a later
    sequence number can only be handed out after the earlier one commits: the
    sequence a client replays is gapless and in commit order.
    """
    with connection.cursor() as cursor:
        cursor.execute(_BUMP_SEQ_SQL, [team_id])
        found = cursor.fetchone()
    if found is None:
        raise LookupError(f"unknown team {team_id!r}")
    return int(found[0])


def append(
    team_id: str,
    kind: str,
    payload: dict[str, Any],
    *,
    task_id: str | None = None,
    prev_status: str | None = None,
) -> Event:
    """Record one event in the current transaction and deliver it after commit."""
    if not connection.in_atomic_block:
        raise RuntimeError("events.append must run inside the mutation's transaction")
    event = Event(
        team_id=team_id,
        seq=next_seq(team_id),
        kind=kind,
        task_id=task_id,
        prev_status=prev_status,
        payload=payload,
        created_at=timezone.now(),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_SQL,
            [
                team_id,
                event.seq,
                kind,
                task_id,
                prev_status,
                json.dumps(payload),
                connection.ops.adapt_datetimefield_value(event.created_at),
            ],
        )
    if kind not in _QUIET_KINDS:
        wakeups.notify(wakeups.BOARD)
    transaction.on_commit(lambda: _deliver(event))
    return event


def _deliver(event: Event) -> None:
    for listener in list(_listeners):
        try:
            listener(event)
        except Exception:  # best-effort: a listener never fails the write that committed
            log.exception("event listener failed for %s", event)


def prune(cutoff: dt.datetime | None, *, keep_last: int | None = None, batch: int = 5_000) -> int:
    """Delete each team's events older than ``cutoff`` and beyond its newest
    ``keep_last``; return how many.

    A team's sequence only grows, so what goes is a prefix of its log. Deleted in
    short transactions of ``batch`` events, so writers wait behind none of them for
    long. A replay that asks for what went is told to reload (:func:`replay_gap`).
    """
    from django.db.models import Max, Min

    from core import storage

    removed = 0
    for team_id, head in Team.objects.values_list("id", "last_event_seq"):
        high = -1
        if cutoff is not None:
            stale = Event.objects.filter(team_id=team_id, created_at__lt=cutoff)
            high = stale.aggregate(high=Max("seq"))["high"] or -1
        if keep_last is not None:
            high = max(high, head - keep_last)
        low = Event.objects.filter(team_id=team_id).aggregate(low=Min("seq"))["low"]
        if low is None:
            continue
        while low <= high:
            upto = min(low + batch - 1, high)
            removed += storage.write(_delete_range, team_id, low, upto)
            low = upto + 1
    return removed


def _delete_range(team_id: str, low: int, high: int) -> int:
    return Event.objects.filter(team_id=team_id, seq__gte=low, seq__lte=high).delete()[0]


def replay_gap(team_id: str, seq: int) -> int | None:
    """If events after ``seq`` were pruned, the oldest one kept (0: none kept); else
    None — the log still holds everything after ``seq``."""
    if seq >= latest_seq(team_id):
        return None
    oldest = (
        Event.objects.filter(team_id=team_id).order_by("seq").values_list("seq", flat=True).first()
    )
    if oldest is None:
        return 0
    return oldest if oldest > seq + 1 else None


def since(team_id: str, seq: int, *, limit: int = 1000) -> list[Event]:
    """Events of a team after ``seq``, oldest first (for replay on reconnect)."""
    return list(Event.objects.filter(team_id=team_id, seq__gt=seq).order_by("seq")[:limit])


def latest_seq(team_id: str) -> int:
    value = Team.objects.filter(id=team_id).values_list("last_event_seq", flat=True).first()
    return int(value or 0)
