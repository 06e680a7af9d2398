"""The atomic claim, claim-next with its dispatchers, leases and their lapse.

The claim is one conditional ``UPDATE … RETURNING`` (raw SQL: Django's
``QuerySet.update()`` returns no rows), kept in :func:`_claim_update`. A zero-row
result is data — ``conflict`` or ``not_found`` — and is never retried; only
transient lock errors are, by :func:`core.storage.write`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet
from django.db.models.base import ModelState

from board import checks, snapshot
from board.errors import ClaimConflict, TaskNotFound
from board.models import ExecutionStatus, Task
from board.store import combiner
from board.store._base import commit_change, db_time, lock_task, now
from board.store.executions import close_running
from board.store.tasks import (
    clear_claim,
    clear_verdict,
    list_tasks,
    ready_filter,
    with_label,
)
from board.store.tickets import Ticket, WriteOutcome, declined, recorded
from board.transitions import HELD_BY_CLAIM, Status
from core import events, storage
from core.errors import ValidationFailed
from core.models import Event

MAX_ABANDONMENTS = 3  # seed 001: fixed, separate from max_attempts
ABANDONED_ERROR = "abandoned: its lease lapsed {n} times without renewal"

Dispatcher = Literal["topological", "fifo", "priority"]
DISPATCH_ORDER: dict[str, tuple[str, ...]] = {
    # fifo and topological behave identically (seed 001): earliest created first;
    # readiness (all deps done) is the topological part.
    "topological": ("created_at", "id"),
    "fifo": ("created_at", "id"),
    "priority": ("-priority", "created_at", "id"),
}


@dataclass(frozen=True)
class ClaimResult:
    outcome: Literal["ok", "conflict", "not_found"]
    task: Task | None = None
    ticket: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def raise_for_outcome(self, task_id: str) -> ClaimResult:
        """The refusal as the one exception type per outcome (for the API)."""
        if self.outcome == "not_found":
            raise TaskNotFound(task_id)
        if self.outcome == "conflict":
            raise ClaimConflict(
                "the task is not claimable: someone else holds it, or it is not ready"
            )
        return self


# The claim's SET clause; binds what _set_params gives, in order.
_SET_SQL = (
    "assignee_agent_id = %s, assignee_runtime = %s, status = 'in_progress', "
    "updated_at = %s, lease_until = %s, lease_duration_ms = %s, "
    "attempts = attempts + 1, started_at = COALESCE(started_at, %s), "
    "revision = revision + 1"
)


def _set_params(
    db: BaseDatabaseWrapper, agent_id: str, runtime: str | None, at: dt.datetime, lease_ms: int
) -> list[Any]:
    stamp = db_time(at, db)
    return [
        agent_id,
        runtime,
        stamp,
        db_time(at + dt.timedelta(milliseconds=lease_ms), db),
        lease_ms,
        stamp,
    ]


def _guard(table: str | None = None) -> str:
    """The guard of seed 000's claim, re-checked by the UPDATE itself so that at most
    one concurrent caller can win (columns qualified by ``table`` when given).
    Readiness (deps done) comes from ready_filter()."""
    q = f"{table}." if table else ""
    return f"{q}status = 'todo' AND {q}assignee_agent_id IS NULL AND {q}dropped = %s"


_SENTINEL = "\x00claim-target\x00"
# Compiled claim SQL by shape: building the ORM candidate query is most of a claim's
# Python cost, and a worker asks the same shape (its team, its dispatcher) each time.
_SQL_CACHE: dict[tuple[Any, ...], tuple[str, list[Any]]] = {}

_CLAIMED = "claimed"
# The claim event's payload, a result column of the claim's own UPDATE.
_PAYLOAD = "event_payload"


# How the claim's UPDATE names the claimed row: SQLite's RETURNING does not see an
# alias of the updated table, so there it is the table's own name.
_ROW = {"postgresql": "t", "sqlite": Task._meta.db_table}


def _event_payload_sql(vendor: str) -> str:
    """The claim event's payload — what :func:`record_event` writes — as SQL over
    the claimed row; binds the previous status."""
    if vendor == "postgresql":
        build, mark = "jsonb_build_object", "%s::text"
    else:
        build, mark = "json_object", "%s"
    row = _ROW[vendor]
    return (
        f"{build}('task', {snapshot.body_sql(vendor, row)}, "
        f"'prev_status', {mark}, 'revision', {row}.revision)"
    )


_EVENT_PAYLOAD_SQL = {vendor: _event_payload_sql(vendor) for vendor in _ROW}


def _claim_sql(db: BaseDatabaseWrapper, candidates: QuerySet[Task]) -> tuple[str, list[Any]]:
    """The claim of the first of ``candidates`` as one conditional ``UPDATE``
    returning the claimed row and its event's payload, built by the database from
    the updated row (bound: the SET clause's values, the candidate query's, the
    guard's and the payload's previous status — see :func:`_prepare`).

    SQLite: one ``UPDATE … RETURNING`` under the database write lock; the event
    follows in the same transaction (:func:`events.append_texts`). PostgreSQL: one
    statement — the candidate picked ``FOR UPDATE SKIP LOCKED`` so racers move on
    to the next task, the conditional UPDATE, and the event appended by
    data-modifying CTEs — so the team's sequence row is locked only for the
    statement's own commit. Returns the SQL and the candidate query's parameters.
    """
    table = Task._meta.db_table
    pick_sql, pick_params = candidates.values("id")[:1].query.sql_with_params()
    payload = f"{_EVENT_PAYLOAD_SQL[db.vendor]} AS {_PAYLOAD}"
    if db.vendor == "postgresql":
        # The locking clause by hand: the ORM compiles select_for_update() only
        # inside a transaction, and this statement is its own transaction.
        pick_sql += f" FOR UPDATE OF {db.ops.quote_name(table)} SKIP LOCKED"
        sql = (
            f"WITH candidate AS ({pick_sql}), "  # noqa: S608 - composed from ORM SQL
            f"{_CLAIMED} AS (UPDATE {table} AS t SET {_SET_SQL} FROM candidate "
            f"WHERE t.id = candidate.id AND {_guard('t')} "
            f"RETURNING {_returning(db, 't')}, {payload}), {events.chained_sql(_CLAIMED)} "
            f"SELECT {_CLAIMED}.*, ev.seq, ev.created_at FROM {_CLAIMED}, ev"
        )
    else:
        sql = (
            f"UPDATE {table} SET {_SET_SQL} "  # noqa: S608 - composed from ORM SQL
            f"WHERE {table}.id = ({pick_sql}) AND {_guard(table)} "
            f"RETURNING {_returning(db, table)}, {payload}"
        )
    return sql, list(pick_params)


# What the claim's UPDATE returns besides its event's payload: the payload's task
# body carries the rest of the claimed row (snapshot.fields_from_body).
_RETURNED = ("id", "team_id", *snapshot.BEYOND_BODY)
_FIELD = {field.attname: field for field in Task._meta.concrete_fields}
# Declared column types for which Django registers sqlite3 converters.
_CONVERTED_DECLTYPES = frozenset({"bool", "date", "time", "datetime", "timestamp"})


def _returning(db: BaseDatabaseWrapper, table: str) -> str:
    """The :data:`_RETURNED` columns of the claimed row, by name (not ``*``: the
    statement is prepared once per connection, and a column added by a later
    migration must not change its result type under a running worker).

    SQLite: those with a converting declared type as expressions. sqlite3 runs
    Django's Python converters (text to datetime, 0/1 to bool) on declared types
    as a row is fetched — inside the write lock, for the claim. An expression has
    no declared type, so the row comes back raw and the ORM's own converters
    (:func:`_task_from_claim`) do that work after commit.
    """
    parts = []
    for name in _RETURNED:
        field = _FIELD[name]
        col = db.ops.quote_name(str(field.column))
        decltype = str(field.db_type(db) or "").split("(")[0].strip().lower()
        if db.vendor == "sqlite" and decltype == "bool":
            parts.append(f"({table}.{col} + 0) AS {col}")
        elif db.vendor == "sqlite" and decltype in _CONVERTED_DECLTYPES:
            parts.append(f"CAST({table}.{col} AS TEXT) AS {col}")
        else:
            parts.append(f"{table}.{col}")
    return ", ".join(parts)


class _Prepared(NamedTuple):
    """A claim statement with its parameters, made before any lock is taken."""

    sql: str
    params: list[Any]
    at: dt.datetime
    stamp: Any  # ``at`` as the backend stores it
    vendor: str
    agent_id: str


def _prepare(
    db: BaseDatabaseWrapper,
    key: tuple[Any, ...] | None,
    build: Callable[[], QuerySet[Task]],
    agent_id: str,
    runtime: str | None,
    lease_ms: int,
    target: str | None,
) -> _Prepared:
    """``key`` names the query's shape for the SQL cache (None: do not cache); a
    ``target`` task id is bound where the shape has the sentinel id."""
    at = now()
    set_params = _set_params(db, agent_id, runtime, at, lease_ms)
    cache_key = None if key is None else (db.alias, *key)
    cached = _SQL_CACHE.get(cache_key) if cache_key is not None else None
    if cached is None:
        cached = _claim_sql(db, build())
        if cache_key is not None:
            _SQL_CACHE[cache_key] = cached
    sql, pick_params = cached
    if target is not None:
        pick_params = [target if p == _SENTINEL else p for p in pick_params]
    vendor = db.vendor
    if vendor == "postgresql":
        params = [*pick_params, *set_params, False, _TODO, _KIND, _TODO, at]
    else:
        params = [*set_params, *pick_params, False, _TODO]
    return _Prepared(sql, params, at, set_params[2], vendor, agent_id)


_TODO = str(Status.TODO)
_KIND = "claimed"  # the claim event's kind
# Where a claim statement's result columns sit: the task's (_RETURNED), its event's
# payload, and on PostgreSQL the event's sequence number and stamp.
_WIDTH = len(_RETURNED)
_PAYLOAD_AT = _WIDTH
_TEAM_AT = _RETURNED.index("team_id")


class _Claimed(NamedTuple):
    """What a claim's statements gave back: the claimed row's :data:`_RETURNED`
    columns, its event's payload (JSON text), and the event's sequence number and
    stamp (for the delivery after commit)."""

    row: tuple[Any, ...]
    payload: Any
    seq: int
    created_at: Any


def _claim_statements(prepared: _Prepared) -> _Claimed | None:
    """Claim the first candidate and write its ``claimed`` event; deliver nothing.

    SQLite: call inside the write transaction (:func:`storage.driver_write`).
    PostgreSQL: outside a transaction the statement is its own (through
    ``storage.statement``); inside one (the claim combiner's batch) it joins it.
    """
    if prepared.vendor == "postgresql":
        row = storage.fetch_row(prepared.sql, prepared.params)
        return None if row is None else _claimed_pg(row)
    return _claim_rows([prepared])[0]


def _claim_rows(batch: list[_Prepared]) -> list[_Claimed | None]:
    """SQLite: the claims of ``batch`` in order, then their events (one sequence
    bump per team and one ``executemany``), inside the write transaction.

    The rows are turned into Tasks by the claimers after the locks are gone: this
    runs under the database's one write lock, and every microsecond here is paid
    by every racer (``bench/claim.py``).
    """
    rows = [storage.fetch_row(p.sql, p.params) for p in batch]
    won = [(p, row) for p, row in zip(batch, rows, strict=True) if row is not None]
    seqs = iter(
        events.append_texts(
            [
                events.TextEvent(row[_TEAM_AT], _KIND, row[0], _TODO, row[_PAYLOAD_AT], p.stamp)
                for p, row in won
            ]
        )
    )
    return [
        None if row is None else _Claimed(row[:_WIDTH], row[_PAYLOAD_AT], next(seqs), p.at)
        for p, row in zip(batch, rows, strict=True)
    ]


def _claimed_pg(row: tuple[Any, ...]) -> _Claimed:
    # PostgreSQL's claim statement returns its event's sequence number and stamp too.
    return _Claimed(row[:_WIDTH], row[_PAYLOAD_AT], row[_PAYLOAD_AT + 1], row[_PAYLOAD_AT + 2])


def claim_batch(batch: list[_Prepared]) -> list[_Claimed | None]:
    """Several prepared claims as one write transaction, in order (the claim
    combiner's batch; a later claim sees the earlier ones' rows claimed). Their
    events are written, not delivered: each claimer delivers its own."""
    if batch and batch[0].vendor == "postgresql":
        rows = storage.fetch_rows_atomically([(p.sql, p.params) for p in batch])
        return [None if row is None else _claimed_pg(row) for row in rows]
    return storage.driver_write(_claim_rows, batch)


def _deliver_claim(claimed: _Claimed) -> None:
    """The claim's event to this process's listeners, once its write committed."""
    events.written(
        claimed.row[_TEAM_AT],
        _KIND,
        task_id=claimed.row[0],
        prev_status=_TODO,
        seq=int(claimed.seq),
        payload=claimed.payload,
        created_at=claimed.created_at,
    )


def _claim_update(prepared: _Prepared) -> _Claimed | None:
    """The claim's statements, its event delivered after the write commits."""
    claimed = _claim_statements(prepared)
    if claimed is not None:
        _deliver_claim(claimed)
    return claimed


def _claim_fast(db: BaseDatabaseWrapper, prepared: _Prepared) -> _Claimed | None:
    """The claim with nothing to release first: through this machine's claim
    combiner when it answers (:mod:`board.store.combiner`), else as its own
    transaction — one statement on PostgreSQL, a driver-level write on SQLite."""
    if combiner.usable(db):
        try:
            claimed = combiner.claim(db, prepared)
        except combiner.ReplyLost:
            # The request went out and no answer came back: it may have committed.
            claimed = _claimed_by(db, prepared)
            if claimed is not None:
                _deliver_claim(claimed)
                return claimed
        else:
            if claimed is not combiner.NOT_RUN:
                if claimed is not None:
                    claimed = _Claimed(*claimed)
                    _deliver_claim(claimed)  # the combiner has committed it
                return claimed
    if prepared.vendor == "postgresql":
        return storage.statement(_claim_update, prepared)
    return storage.driver_write(_claim_update, prepared)


def _claimed_by(db: BaseDatabaseWrapper, prepared: _Prepared) -> _Claimed | None:
    """The claim ``prepared`` made, if it committed — the row it stamped (its
    agent, and ``updated_at`` set to the request's own stamp) with that row's
    claim event — read back as the claim's statement returns them."""
    table = Task._meta.db_table
    sql = (
        f"SELECT {_returning(db, table)}, e.payload, e.seq, e.created_at "  # noqa: S608
        # (team, seq) is the event log's index: read backwards from the newest event
        # of the task's team, the claim's is among the last.
        f"FROM {table} JOIN {Event._meta.db_table} e ON e.team_id = {table}.team_id "
        f"AND e.task_id = {table}.id AND e.kind = %s "
        f"WHERE {table}.assignee_agent_id = %s AND {table}.status = 'in_progress' "
        f"AND {table}.updated_at = %s ORDER BY e.seq DESC LIMIT 1"
    )
    with db.cursor() as cursor:
        cursor.execute(sql, [_KIND, prepared.agent_id, prepared.stamp])
        found = cursor.fetchone()
    if found is None:
        return None
    return _Claimed(tuple(found[:_WIDTH]), found[_WIDTH], found[_WIDTH + 1], found[_WIDTH + 2])


def _claim_once(
    key: tuple[Any, ...] | None,
    build: Callable[[], QuerySet[Task]],
    agent_id: str,
    runtime: str | None,
    lease_ms: int,
    *,
    target: str | None = None,
) -> Task | None:
    """One claim attempt as its own transaction, lapsed leases released first."""
    db = connections[DEFAULT_DB_ALIAS]
    prepared = _prepare(db, key, build, agent_id, runtime, lease_ms, target)
    lapsed_ids = [target] if target is not None else None
    if prepared.vendor == "postgresql":
        if _any_lapsed(db, prepared.at):
            storage.write(release_lapsed, prepared.at, lapsed_ids)
        claimed = _claim_fast(db, prepared)
    elif not _any_lapsed(db, prepared.at):
        # The common case: nothing to release, so the claim is the transaction's
        # only work, run on the driver connection (no ORM bookkeeping in the lock).
        claimed = _claim_fast(db, prepared)
    else:
        attempts = 0

        def run() -> _Claimed | None:
            nonlocal attempts, prepared
            attempts += 1
            if attempts > 1:  # a retry after a busy database: stamp it afresh
                prepared = _prepare(db, key, build, agent_id, runtime, lease_ms, target)
            release_lapsed(prepared.at, lapsed_ids)
            return _claim_update(prepared)

        claimed = storage.write(run)
    if claimed is None:
        return None
    row, payload = claimed.row, claimed.payload
    task_body = json.loads(payload)["task"] if isinstance(payload, str | bytes) else payload["task"]
    task = _task_from_claim(db, row, task_body)
    # The API answers with this same body (see board.api.task_body).
    task._snapshot = task_body  # type: ignore[attr-defined]
    return task


# How to convert a claim's returned columns as the ORM would, per database: each
# _RETURNED field's attribute name, its converters and the field.
_ROW_PLANS: dict[str, list[tuple[str, list[Any], Any]]] = {}


def _task_from_claim(
    db: BaseDatabaseWrapper, row: tuple[Any, ...], task_body: dict[str, Any]
) -> Task:
    """The claimed Task: its body's fields, and the returned columns the body does
    not show (converted as the ORM would).

    Built as ``Model.from_db`` leaves an instance — the field values and a
    ``_state`` saying which database it came from — but without running
    ``Model.__init__`` field by field: that, a RawQuerySet's per-call setup, and
    returning and converting every column inside the write lock were a quarter of
    a claim's time. ``Task`` defines no ``__init__`` of its own and nothing here
    listens to ``pre_init``/``post_init``; ``tests/board/test_snapshot.py`` checks
    the result equals the ORM's own for tasks in every shape.
    """
    plan = _ROW_PLANS.get(db.alias)
    if plan is None:
        plan = _ROW_PLANS[db.alias] = []
        for name in _RETURNED:
            field = _FIELD[name]
            converters = [
                *db.ops.get_db_converters(field.cached_col),
                *field.get_db_converters(db),
            ]
            plan.append((field.attname, converters, field))
    values = snapshot.fields_from_body(task_body)
    for (attname, converters, field), value in zip(plan, row, strict=True):
        if value is not None:
            for converter in converters:
                value = converter(value, field, db)
        values[attname] = value
    task = Task.__new__(Task)
    task.__dict__.update(values)
    state = task._state = ModelState()
    state.adding = False
    state.db = db.alias
    return task


def _check_runtime(runtime: Any) -> str | None:
    if runtime is None:
        return None
    if not isinstance(runtime, str) or not runtime or len(runtime) > 32:
        raise ValidationFailed("runtime", "must be a runtime name")
    return runtime


def claim(task_id: str, agent_id: Any, runtime: Any = None, *, lease_ms: Any = None) -> ClaimResult:
    """Claim one task for ``agent_id``: ``ok`` (with a ticket), ``conflict`` or ``not_found``.

    Refused (``conflict``) unless the task is todo, unassigned, not dropped, and
    every dependency is done. A lapsed lease on this task is released first, so
    an abandoned task is claimable as a fresh attempt. Never retried on conflict.
    """
    agent = checks.check_agent_id(agent_id)
    rt = _check_runtime(runtime)
    span = checks.check_lease_ms(lease_ms)

    task = _claim_once(
        ("one",),
        lambda: Task.objects.filter(ready_filter(), pk=_SENTINEL),
        agent,
        rt,
        span,
        target=task_id,
    )
    if task is None:
        if Task.objects.filter(pk=task_id).exists():
            return ClaimResult("conflict")
        return ClaimResult("not_found")
    return _claimed(task)


def _claimed(task: Task) -> ClaimResult:
    # Outside the transaction: signing the ticket needs nothing the lock protects.
    return ClaimResult("ok", task, Ticket.for_task(task).encode())


def claim_next(
    agent_id: Any,
    *,
    runtime: Any = None,
    dispatcher: Any = "topological",
    team: str | list[str] | None = None,
    label: str | None = None,
    lease_ms: Any = None,
    eligibility: Callable[[QuerySet[Task]], QuerySet[Task]] | None = None,
) -> ClaimResult | None:
    """Claim the next ready task in ``dispatcher`` order, or None if nothing is ready.

    ``eligibility`` narrows the candidates (never assert status in it: readiness
    is the board's call). The claim's own UPDATE re-checks eligibility, so under
    contention one worker wins a task and the others move on to the next.
    """
    agent = checks.check_agent_id(agent_id)
    rt = _check_runtime(runtime)
    span = checks.check_lease_ms(lease_ms)
    if dispatcher not in DISPATCH_ORDER:
        raise ValidationFailed("dispatcher", f"one of {', '.join(DISPATCH_ORDER)}")
    order = DISPATCH_ORDER[dispatcher]
    if label is not None:
        checks.check_label(label)

    teams = None if team is None else tuple(team if isinstance(team, list) else [team])
    if teams == ():
        return None  # a caller who sees no team has nothing to claim

    def candidates() -> QuerySet[Task]:
        qs = Task.objects.filter(ready_filter())
        if teams is not None:
            qs = qs.filter(team_id__in=list(teams))
        if label is not None:
            qs = with_label(qs, label)
        if eligibility is not None:
            qs = eligibility(qs)
        return qs.order_by(*order)

    key = None if eligibility is not None else ("next", dispatcher, teams, label)

    # On PostgreSQL a racer can lose the row between pick and update only if the
    # row changed under it; a few fresh picks settle that without spinning.
    for _ in range(3):
        task = _claim_once(key, candidates, agent, rt, span)
        if task is not None:
            return _claimed(task)
        if connection.vendor != "postgresql" or not _any_ready(team, label):
            return None
    return None


def _any_ready(team: str | list[str] | None, label: str | None) -> bool:
    qs = Task.objects.filter(ready_filter())
    if team is not None:
        qs = qs.filter(team_id__in=team if isinstance(team, list) else [team])
    if label is not None:
        qs = with_label(qs, label)
    return qs.exists()


def claim_by_classifier(
    agent_id: Any,
    classify: Callable[[list[Task]], str | None],
    *,
    runtime: Any = None,
    team: str | None = None,
    lease_ms: Any = None,
    limit: int = 100,
) -> ClaimResult | None:
    """The classifier dispatcher: ``classify`` picks one id among the ready tasks;
    the claim is then narrowed to it, so the compare-and-set still arbitrates."""
    candidates = list(list_tasks(team=team, ready=True)[:limit])
    if not candidates:
        return None
    picked = classify(candidates)
    if picked is None:
        return None
    result = claim(picked, agent_id, runtime, lease_ms=lease_ms)
    return result if result.ok else None


def claim_by_event(
    agent_id: Any,
    topic: str,
    topic_for: Callable[[Task], str | None],
    *,
    runtime: Any = None,
    team: str | None = None,
    lease_ms: Any = None,
    limit: int = 100,
) -> ClaimResult | None:
    """The event dispatcher: the first ready task (oldest first) whose topic matches."""
    ready = list_tasks(team=team, ready=True).order_by("created_at", "id")[:limit]
    for task in ready:
        if topic_for(task) != topic:
            continue
        result = claim(task.id, agent_id, runtime, lease_ms=lease_ms)
        if result.ok:
            return result
    return None


# --- leases ------------------------------------------------------------------


def release_lapsed(at: dt.datetime, task_ids: Iterable[str] | None = None) -> list[Task]:
    """Hand back in_progress tasks whose lease ran out, inside the caller's transaction.

    Each lapse counts an abandonment; the third parks the task ``blocked`` with an
    error instead of handing it out again. The task's running execution is
    closed ``timed_out``.
    """
    if not _any_lapsed(connection, at):
        # claim_next calls this on every claim; nearly always nothing has lapsed, and
        # building the ORM query below cost a quarter of a claim (bench/claim.py).
        return []
    qs = Task.objects.filter(status=Status.IN_PROGRESS, lease_until__lt=at)
    if task_ids is not None:
        qs = qs.filter(pk__in=list(task_ids))
    if connection.features.has_select_for_update:
        qs = qs.select_for_update(skip_locked=True)
    released = []
    for task in qs:
        released.append(_abandon(task, at, reason="lease lapsed"))
    return released


_ANY_LAPSED_SQL = (
    f"SELECT 1 FROM {Task._meta.db_table} "  # noqa: S608 - table name only
    "WHERE status = 'in_progress' AND lease_until < %s LIMIT 1"
)


# When this process last found no lapsed lease, per database: a lease that lapses
# is reclaimed within this window instead of on the very next claim, which saves
# the probe on nearly every claim of a busy worker (recovery takes a lease plus an
# idle wake anyway, seed 001).
LAPSE_CHECK_EVERY = dt.timedelta(milliseconds=250)
_quiet_until: dict[str, dt.datetime] = {}


def _any_lapsed(db: BaseDatabaseWrapper, at: dt.datetime) -> bool:
    """One cheap index probe (tasks_status_lease_idx) with precompiled SQL."""
    alias = db.alias
    quiet = _quiet_until.get(alias)
    if quiet is not None and quiet - LAPSE_CHECK_EVERY <= at < quiet:
        return False
    with db.cursor() as cursor:
        cursor.execute(_ANY_LAPSED_SQL, [db_time(at, db)])
        found = cursor.fetchone() is not None
    if not found:
        _quiet_until[alias] = at + LAPSE_CHECK_EVERY
    return found


def _abandon(task: Task, at: dt.datetime, *, reason: str) -> Task:
    """Release an owner-less in_progress task: todo, or blocked after 3 abandonments."""
    prev = task.status
    close_running(task, ExecutionStatus.TIMED_OUT, error=reason, at=at)
    task.abandonments += 1
    clear_claim(task)
    fields = {"abandonments", "status", "assignee_agent_id", "assignee_runtime", "lease_until"}
    if task.abandonments >= MAX_ABANDONMENTS:
        task.status = Status.BLOCKED
        task.error = ABANDONED_ERROR.format(n=task.abandonments)
        fields.add("error")
        kind = "blocked"
    else:
        task.status = Status.TODO
        clear_verdict(task)
        fields |= {"verdict", "verdict_evidence", "verdict_at", "human_override"}
        kind = "released"
    commit_change(task, kind, prev_status=prev, fields=fields, at=at)
    return task


def renew_lease(
    task_id: str,
    ticket: Any,
    *,
    lease_ms: Any = None,
    adopt_lapsed_lease: bool = False,
) -> WriteOutcome:
    """Push the lease out by its committed span (or ``lease_ms``), fenced by the ticket.

    Declines ``not-my-task`` for another task's ticket and ``lost-claim`` when the
    claim moved on or the lease already lapsed — unless ``adopt_lapsed_lease`` (a
    worker that has not started yet) and nobody has taken the task meanwhile.
    Also the heartbeat: it bumps ``updated_at``, the stale sweep's liveness signal.
    """
    claim_ticket = Ticket.decode(ticket)
    span = None if lease_ms is None else checks.check_lease_ms(lease_ms)

    def run() -> WriteOutcome:
        task = lock_task(task_id)
        at = now()
        if claim_ticket.task_id != task.id or claim_ticket.incarnation_id != task.incarnation_id:
            return declined(task, "not-my-task")
        lapsed = (
            task.status == Status.IN_PROGRESS
            and task.lease_until is not None
            and task.lease_until < at
        )
        if (
            claim_ticket.attempt != task.attempts
            or task.status not in HELD_BY_CLAIM
            or (lapsed and not adopt_lapsed_lease)
        ):
            return declined(task, "lost-claim")
        length = span or task.lease_duration_ms or checks.DEFAULT_LEASE_MS
        task.lease_until = at + dt.timedelta(milliseconds=length)
        task.lease_duration_ms = length
        # Liveness, not a change of state: no event, but the revision moves.
        task.revision += 1
        task.updated_at = at
        task.save(update_fields=["lease_until", "lease_duration_ms", "revision", "updated_at"])
        return recorded(task)

    return storage.write(run)


def heartbeat(task_id: str, ticket: Any) -> WriteOutcome:
    return renew_lease(task_id, ticket)


def committed_lease_span(task: Task) -> int:
    return task.lease_duration_ms or checks.DEFAULT_LEASE_MS
