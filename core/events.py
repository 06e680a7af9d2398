"""The durable per-team event log: the only writer of ``events``.

:func:`append` is called *inside* the mutation's transaction, so an event exists
exactly when its mutation committed. Live delivery (websockets, chat narration)
hangs off :func:`on_committed` and runs strictly after commit.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from django.db import connection
from django.utils import timezone

from core import storage
from core.models import Event, Team

log = logging.getLogger(__name__)

# Called after commit with each committed event; the live board registers here.
_listeners: list[Callable[[Event], None]] = []
# Optional per-listener "does anyone here want team T's events?", asked before an
# Event is even built for delivery (the claim's hot path skips it when nobody does).
_interest: dict[Callable[[Event], None], Callable[[str], bool]] = {}


def subscribe(
    listener: Callable[[Event], None], *, wants: Callable[[str], bool] | None = None
) -> None:
    if listener not in _listeners:
        _listeners.append(listener)
    if wants is not None:
        _interest[listener] = wants


def unsubscribe(listener: Callable[[Event], None]) -> None:
    if listener in _listeners:
        _listeners.remove(listener)
    _interest.pop(listener, None)


def _anyone_wants(team_id: str) -> bool:
    for listener in _listeners:
        wants = _interest.get(listener)
        if wants is None or wants(team_id):
            return True
    return False


def next_seq(team_id: str) -> int:
    """Allocate the team's next sequence number.

    Must run inside the mutation's transaction. The UPDATE takes the team row's
    lock (PostgreSQL) or runs under the database write lock (SQLite), so a later
    sequence number can only be handed out after the earlier one commits.
    On PostgreSQL it queues for the row like the claim (:func:`chained_sql`):
    every taker of the row takes the queue first, so the two locks are always
    taken in one order.
    """
    return _bump_seq(team_id, 1)


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
    # A precompiled INSERT: every board mutation writes one of these in its
    # transaction, so the ORM's per-call query building is worth skipping.
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
    storage.on_commit(lambda: _deliver(event))
    return event


_INSERT_SQL = (
    f"INSERT INTO {Event._meta.db_table} "  # noqa: S608 - table name only
    "(team_id, seq, kind, task_id, prev_status, payload, created_at, tenant_id) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, NULL)"
)


class TextEvent(NamedTuple):
    """An event to append with its payload already JSON text and its stamp as the
    backend stores it (:func:`append_texts`)."""

    team_id: str
    kind: str
    task_id: str | None
    prev_status: str | None
    payload: str
    stored_at: Any


def append_texts(rows: Sequence[TextEvent]) -> list[int]:
    """Append ``rows`` in order, in the current write transaction, and return
    their sequence numbers; nothing is delivered (hand each to :func:`written`
    once the write has committed).

    For writes whose lock-held time matters (the claim and the claim combiner's
    batch of claims, in a :func:`~core.storage.driver_write`): one sequence
    bump per team for all its rows and one ``executemany`` of precompiled
    INSERTs, nothing built in Python while the write lock is held beyond the
    parameter lists.
    """
    if not storage.in_write():
        raise RuntimeError("events.append_texts must run inside the mutation's transaction")
    if not rows:
        return []
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.team_id] = counts.get(row.team_id, 0) + 1
    # Teams in one order (sorted), so two batches never wait on each other's rows.
    first = {team: _bump_seq(team, counts[team]) - counts[team] + 1 for team in sorted(counts)}
    seqs = []
    params = []
    for row in rows:
        seq = first[row.team_id]
        first[row.team_id] = seq + 1
        seqs.append(seq)
        params.append(
            (row.team_id, seq, row.kind, row.task_id, row.prev_status, row.payload, row.stored_at)
        )
    storage.execute_many(_INSERT_SQL, params)
    return seqs


def _bump_seq(team_id: str, count: int) -> int:
    """Take ``count`` sequence numbers of the team's; returns the last of them."""
    if connection.vendor == "postgresql":
        found = storage.fetch_row(_BUMP_SEQ_QUEUED_SQL, [count, team_id, team_id])
    else:
        found = storage.fetch_row(_BUMP_SEQ_SQL, [count, team_id])
    if found is None:
        raise LookupError(f"unknown team {team_id!r}")
    return int(found[0])


# PostgreSQL: a transaction-scoped advisory lock per team, taken in front of the
# team's sequence row by everyone who takes the row (as a subquery of the UPDATE,
# so before the row is touched): see chained_sql.
_SEQ_QUEUE = "SELECT pg_advisory_xact_lock(hashtextextended('clawboo.event-seq:' || {team}, 0))"
_BUMP_SEQ = (
    f"UPDATE {Team._meta.db_table} SET last_event_seq = last_event_seq + %s "  # noqa: S608
    "{queue}WHERE id = %s RETURNING last_event_seq"
)
_BUMP_SEQ_SQL = _BUMP_SEQ.format(queue="")
_BUMP_SEQ_QUEUED_SQL = _BUMP_SEQ.format(queue=f"FROM ({_SEQ_QUEUE.format(team='%s')}) AS queued ")


def chained_sql(source: str) -> str:
    """PostgreSQL: CTE members that append one event for the one row of the
    data-modifying CTE ``source`` (which must yield ``id``, ``team_id`` and the
    payload as ``event_payload``), so a mutation and its event are a single
    statement. The payload is built in ``source`` (its ``RETURNING``), before the
    team's sequence row is locked: that lock is held until the commit.

    Racing statements queue for the sequence row on a per-team advisory lock
    first (:data:`_SEQ_QUEUE`), so the row itself is never contended: a row lock's
    waiters all wake at each commit and race again, and with a dozen claims in
    flight those herds halved the throughput (``bench/claim.py``); the lock
    manager wakes one waiter at a time. The row lock still does the ordering.

    Appends ``seq_alloc`` and ``ev`` (``RETURNING seq, created_at``) to a ``WITH``
    list; binds, in order: kind, prev_status, created_at. Hand what ``ev``
    returned to :func:`written`.
    """
    team = Team._meta.db_table
    return (
        f"seq_alloc AS (UPDATE {team} SET last_event_seq = {team}.last_event_seq + 1 "  # noqa: S608
        f"FROM {source} CROSS JOIN LATERAL ({_SEQ_QUEUE.format(team=f'{source}.team_id')}) "
        f"AS queued WHERE {team}.id = {source}.team_id "
        f"RETURNING {team}.id AS team_id, {team}.last_event_seq AS seq), "
        f"ev AS (INSERT INTO {Event._meta.db_table} "
        "(team_id, seq, kind, task_id, prev_status, created_at, payload, tenant_id) "
        "SELECT s.team_id, s.seq, %s, t.id, %s::varchar, %s, t.event_payload, NULL "
        f"FROM {source} t JOIN seq_alloc s ON s.team_id = t.team_id "
        "RETURNING seq, created_at)"
    )


def written(
    team_id: str,
    kind: str,
    *,
    task_id: str,
    prev_status: str | None,
    seq: int,
    payload: Any,
    created_at: Any,
) -> None:
    """Deliver an event written without delivery — by a :func:`chained_sql`
    statement, or :func:`append_texts` — after its commit
    (at once outside a write transaction: it has committed)."""
    deliver = functools.partial(
        _deliver_if_wanted, team_id, kind, task_id, prev_status, int(seq), payload, created_at
    )
    if storage.in_write():
        storage.on_commit(deliver)
    else:
        deliver()  # (the claim's hot path: no on_commit machinery for a committed write)


def _deliver_if_wanted(
    team_id: str,
    kind: str,
    task_id: str | None,
    prev_status: str | None,
    seq: int,
    payload: Any,
    created_at: Any,
) -> None:
    if not _anyone_wants(team_id):
        return  # nobody in this process listens (mostly so): skip building the Event
    _deliver(
        Event(
            team_id=team_id,
            seq=seq,
            kind=kind,
            task_id=task_id,
            prev_status=prev_status,
            payload=json.loads(payload) if isinstance(payload, str | bytes) else payload,
            created_at=created_at,
        )
    )


def _deliver(event: Event) -> None:
    for listener in list(_listeners):
        wants = _interest.get(listener)
        if wants is not None and not wants(event.team_id):
            continue
        try:
            listener(event)
        except Exception:  # best-effort: a listener never fails the write that committed
            log.exception("event listener failed for %s", event)


def since(team_id: str, seq: int, *, limit: int = 1000) -> list[Event]:
    """Events of a team after ``seq``, oldest first (for replay on reconnect)."""
    return list(Event.objects.filter(team_id=team_id, seq__gt=seq).order_by("seq")[:limit])


def latest_seq(team_id: str) -> int:
    value = Team.objects.filter(id=team_id).values_list("last_event_seq", flat=True).first()
    return int(value or 0)
