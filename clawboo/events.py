"""The durable per-team event log: the only writer of ``events``.

:func:`append` is called *inside* the mutation's transaction, so an event exists
exactly when its mutation committed. Live delivery (websockets, chat narration)
hangs off :func:`on_committed` and runs strictly after commit.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from clawboo import storage
from clawboo.models import Event, Team

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
    """
    found = storage.fetch_one(_NEXT_SEQ_SQL, [team_id])
    if found is None:
        raise LookupError(f"unknown team {team_id!r}")
    return int(found[1][0])


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
    transaction.on_commit(lambda: _deliver(event))
    return event


_INSERT_SQL = (
    f"INSERT INTO {Event._meta.db_table} "  # noqa: S608 - table name only
    "(team_id, seq, kind, task_id, prev_status, payload, created_at, tenant_id) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, NULL)"
)


def append_derived(
    team_id: str,
    kind: str,
    *,
    task_id: str | None,
    prev_status: str | None,
    payload_sql: str,
    source_sql: str,
    params: list[Any],
    at: dt.datetime | None = None,
) -> str:
    """Like :func:`append`, but the payload is a SQL expression over the one row of
    ``source_sql`` (``FROM … WHERE …``), built by the database inside the INSERT
    instead of in Python; ``params`` bind the payload's placeholders, then the
    source's. ``at`` stamps the event (default: now). Returns the payload as
    stored (JSON text).

    For writes whose lock-held time matters (the claim): nothing is built in
    Python while the write lock is held; the Event is made, and delivered, after
    commit (and only when someone in this process listens).
    """
    if not connection.in_atomic_block:
        raise RuntimeError("events.append_derived must run inside the mutation's transaction")
    seq = next_seq(team_id)
    created_at = at or timezone.now()
    found = storage.fetch_one(
        _DERIVED_SQL.format(payload=payload_sql, source=source_sql),
        [
            team_id,
            seq,
            kind,
            task_id,
            prev_status,
            connection.ops.adapt_datetimefield_value(created_at),
            *params,
        ],
    )
    if found is None:
        raise LookupError(f"no source row for the {kind!r} event of {task_id!r}")
    payload = found[1][0]
    _deliver_after_commit(team_id, kind, task_id, prev_status, seq, payload, created_at)
    return payload if isinstance(payload, str) else json.dumps(payload)


_NEXT_SEQ_SQL = (
    f"UPDATE {Team._meta.db_table} SET last_event_seq = last_event_seq + 1 "  # noqa: S608
    "WHERE id = %s RETURNING last_event_seq"
)
_DERIVED_SQL = (
    f"INSERT INTO {Event._meta.db_table} "  # noqa: S608 - table name only
    "(team_id, seq, kind, task_id, prev_status, created_at, payload, tenant_id) "
    "SELECT %s, %s, %s, %s, %s, %s, {payload}, NULL {source} RETURNING payload"
)


def chained_sql(source: str, payload_sql: str) -> str:
    """PostgreSQL: CTE members that append one event for the one row of the
    data-modifying CTE ``source`` (which must yield ``id`` and ``team_id``), so a
    mutation and its event are a single statement.

    Appends ``seq_alloc`` and ``ev`` (``RETURNING seq, payload, created_at``) to a
    ``WITH`` list; binds, in order: kind, prev_status, created_at, then whatever
    ``payload_sql`` binds. Hand what ``ev`` returned to :func:`chained_written`.
    """
    team = Team._meta.db_table
    return (
        f"seq_alloc AS (UPDATE {team} SET last_event_seq = {team}.last_event_seq + 1 "  # noqa: S608
        f"FROM {source} WHERE {team}.id = {source}.team_id "
        f"RETURNING {team}.id AS team_id, {team}.last_event_seq AS seq), "
        f"ev AS (INSERT INTO {Event._meta.db_table} "
        "(team_id, seq, kind, task_id, prev_status, created_at, payload, tenant_id) "
        "SELECT s.team_id, s.seq, %s, t.id, %s::varchar, %s, "
        f"{payload_sql}, NULL FROM {source} t JOIN seq_alloc s ON s.team_id = t.team_id "
        "RETURNING seq, payload, created_at)"
    )


def chained_written(
    team_id: str,
    kind: str,
    *,
    task_id: str,
    prev_status: str | None,
    seq: int,
    payload: Any,
    created_at: Any,
) -> None:
    """Deliver the event a :func:`chained_sql` statement wrote, after its commit
    (at once when the statement ran in autocommit: it has committed)."""
    _deliver_after_commit(team_id, kind, task_id, prev_status, int(seq), payload, created_at)


def _deliver_after_commit(
    team_id: str,
    kind: str,
    task_id: str | None,
    prev_status: str | None,
    seq: int,
    payload: Any,
    created_at: Any,
) -> None:
    def deliver() -> None:
        if not _anyone_wants(team_id):
            return  # nobody in this process listens: skip building the Event
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

    transaction.on_commit(deliver)


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
