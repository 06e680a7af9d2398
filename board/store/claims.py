"""The atomic claim, claim-next, leases and their lapse.

A claim is one :func:`core.storage.write` transaction (``BEGIN IMMEDIATE`` on
SQLite, so the whole of it runs under the database's write lock):

1. release the lapsed leases the candidates need (an index probe first: nearly
   always there is nothing to release);
2. one conditional ``UPDATE … RETURNING`` — of a small fixed set, written once
   below: one per dispatcher order, scoped to teams or not — that picks the
   candidate in a subquery (the ready predicate of :mod:`board.store.tasks`, on
   PostgreSQL ``FOR UPDATE SKIP LOCKED`` so racers move on to the next task) and
   re-checks seed 000's guard itself, so at most one racer wins a task;
3. the ``claimed`` event, in the same transaction, delivered after commit.

Zero rows is data — ``conflict`` or ``not_found`` — and is never retried; only
transient lock errors are, by :func:`core.storage.write`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from django.db import connection

from board import checks
from board.errors import BudgetPaused, ClaimConflict, TaskNotFound
from board.models import ExecutionStatus, Task
from board.store import spend
from board.store._base import commit_change, lock_task, now, record_event
from board.store.executions import close_run_leaving
from board.store.moves import clear_claim, move
from board.store.ready import READY_SQL, label_param, label_sql
from board.store.tickets import Ticket, WriteOutcome, claim_standing, declined, recorded
from board.transitions import Status
from core import storage
from core.errors import ClawbooError, ValidationFailed

MAX_ABANDONMENTS = 3  # seed 001: fixed, separate from max_attempts
ABANDONED_ERROR = "abandoned: its lease lapsed {n} times without renewal"


@dataclass(frozen=True)
class ClaimResult:
    outcome: Literal["ok", "conflict", "not_found", "budget_paused"]
    task: Task | None = None
    ticket: str | None = None
    # The refusal's own exception, when it has more to say than its outcome.
    refusal: ClawbooError | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def raise_for_outcome(self, task_id: str) -> ClaimResult:
        """The refusal as the one exception type per outcome (for the API)."""
        if self.outcome == "not_found":
            raise TaskNotFound(task_id)
        if self.refusal is not None:
            raise self.refusal
        if self.outcome == "conflict":
            raise ClaimConflict(
                "the task is not claimable: someone else holds it, or it is not ready"
            )
        return self


_TABLE = Task._meta.db_table
# The claim's SET clause and seed 000's guard, re-checked by the UPDATE on the row
# it changes, so that at most one racer wins a task. Binds: agent, runtime, stamp,
# lease end, lease span, stamp.
_SET = (
    "assignee_agent_id = %s, assignee_runtime = %s, status = 'in_progress', "
    "updated_at = %s, lease_until = %s, lease_duration_ms = %s, "
    "attempts = attempts + 1, started_at = COALESCE(started_at, %s), revision = revision + 1"
)
_GUARD = (
    f"{_TABLE}.status = 'todo' AND {_TABLE}.assignee_agent_id IS NULL AND {_TABLE}.dropped = FALSE"
)
# claim(): the one task, if it is ready. Binds: the SET values, the task id.
_CLAIM_ONE_SQL = (
    f"UPDATE {_TABLE} SET {_SET} WHERE {_TABLE}.id = %s AND {_GUARD} "  # noqa: S608
    f"AND {READY_SQL} RETURNING *"
)


def _claim_next_sql(vendor: str, order: str, scoped: bool, excluding: bool = False) -> str:
    """claim_next(): the first ready, unassigned task in ``order``, picked in a
    subquery (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so racers move on to the next
    task) and claimed under the guard. Binds: the SET values, [the teams — a JSON
    array on SQLite, an array on PostgreSQL —], [the task ids passed over (a paused
    budget's trees and routines), the same way], the label (or None) twice."""
    teams = ""
    if scoped:
        teams = (
            f"AND {_TABLE}.team_id = ANY(%s) "
            if vendor == "postgresql"
            else f"AND {_TABLE}.team_id IN (SELECT value FROM json_each(%s)) "  # noqa: S608
        )
    if excluding:
        teams += (
            f"AND {_TABLE}.id <> ALL(%s) "
            if vendor == "postgresql"
            else f"AND {_TABLE}.id NOT IN (SELECT value FROM json_each(%s)) "  # noqa: S608
        )
    no_label = "%s::text IS NULL" if vendor == "postgresql" else "%s IS NULL"
    lock = " FOR UPDATE SKIP LOCKED" if vendor == "postgresql" else ""
    pick = (
        f"SELECT {_TABLE}.id FROM {_TABLE} WHERE {READY_SQL} "  # noqa: S608
        f"AND {_TABLE}.assignee_agent_id IS NULL {teams}"
        f"AND ({no_label} OR {label_sql(vendor)}) ORDER BY {order} LIMIT 1{lock}"
    )
    return (
        f"UPDATE {_TABLE} SET {_SET} WHERE {_TABLE}.id = ({pick}) "  # noqa: S608
        f"AND {_GUARD} RETURNING *"
    )


# The dispatchers' orders (seed 001). fifo and topological behave identically:
# earliest created first; readiness (all deps done) is the topological part.
DISPATCH_ORDER: dict[str, str] = {
    "topological": "created_at, id",
    "fifo": "created_at, id",
    "priority": "priority DESC, created_at, id",
}
# Every claim-next statement, written once: per database, dispatcher order, and
# whether the candidates are scoped to teams.
_CLAIM_NEXT_SQL = {
    (vendor, dispatcher, scoped, excluding): _claim_next_sql(vendor, order, scoped, excluding)
    for vendor in ("sqlite", "postgresql")
    for dispatcher, order in DISPATCH_ORDER.items()
    for scoped in (False, True)
    for excluding in (False, True)
}
# Is any lease lapsed? An index probe (tasks_status_lease_idx).
_ANY_LAPSED_SQL = f"SELECT 1 FROM {_TABLE} WHERE status = 'in_progress' AND lease_until < %s"  # noqa: S608


def _set_params(agent_id: str, runtime: str | None, lease_ms: int) -> list[Any]:
    at = now()
    ops = connection.ops
    stamp = ops.adapt_datetimefield_value(at)
    lease_end = ops.adapt_datetimefield_value(at + dt.timedelta(milliseconds=lease_ms))
    return [agent_id, runtime, stamp, lease_end, lease_ms, stamp]


def _claim_row(sql: str, params: list[Any]) -> Task | None:
    """Run one claim statement inside the caller's write transaction; the claimed
    task (from the UPDATE's own ``RETURNING``, converted by the ORM), with its
    ``claimed`` event written in the same transaction, or None."""
    claimed = list(Task.objects.raw(sql, params))
    if not claimed:
        return None
    task = claimed[0]
    record_event(task, "claimed", prev_status=Status.TODO)
    return task


def _release_lapsed_first(task_id: str | None = None) -> None:
    """Release the lapsed leases a claim's candidates need (``task_id``'s, or any),
    after an index probe that nearly always finds none."""
    at = now()
    sql, params = _ANY_LAPSED_SQL, [connection.ops.adapt_datetimefield_value(at)]
    if task_id is not None:
        sql, params = f"{sql} AND id = %s", [*params, task_id]
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} LIMIT 1", params)
        if cursor.fetchone() is None:
            return
    release_lapsed(at, None if task_id is None else [task_id])


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

    def run() -> Task | None:
        _release_lapsed_first(task_id)
        found = Task.objects.filter(pk=task_id).first()
        if found is not None:
            spend.paused_refusal(found, agent)  # budget_paused, before any conflict
        return _claim_row(_CLAIM_ONE_SQL, [*_set_params(agent, rt, span), task_id])

    try:
        task = storage.write(run)
    except BudgetPaused as paused:
        return ClaimResult("budget_paused", refusal=paused)
    if task is None:
        if Task.objects.filter(pk=task_id).exists():
            return ClaimResult("conflict")
        return ClaimResult("not_found")
    return _claimed(task)


def _claimed(task: Task) -> ClaimResult:
    return ClaimResult("ok", task, Ticket.for_task(task).encode())


def claim_next(
    agent_id: Any,
    *,
    runtime: Any = None,
    dispatcher: Any = "topological",
    team: str | list[str] | None = None,
    label: str | None = None,
    lease_ms: Any = None,
) -> ClaimResult | None:
    """Claim the next ready task in ``dispatcher`` order (of ``team`` or teams, with
    ``label``), or None if nothing is ready.

    Under contention one worker wins a task and the others move on to the next
    (SQLite: each claim runs alone under the write lock; PostgreSQL: a candidate
    locked by a racer is skipped). A None is never retried here: nothing was ready.
    """
    agent = checks.check_agent_id(agent_id)
    rt = _check_runtime(runtime)
    span = checks.check_lease_ms(lease_ms)
    if not isinstance(dispatcher, str) or dispatcher not in DISPATCH_ORDER:
        raise ValidationFailed("dispatcher", f"one of {', '.join(DISPATCH_ORDER)}")
    if label is not None:
        label = checks.check_label(label)
    teams = None if team is None else (team if isinstance(team, list) else [team])
    if teams == []:
        return None  # a caller who sees no team has nothing to claim

    vendor = connection.vendor
    labelled = [label, None if label is None else label_param(vendor, label)]

    def run() -> Task | None:
        _release_lapsed_first()
        # A paused cap over the agent or all its teams refuses (BudgetPaused); over
        # some teams, trees or routines, their tasks are passed over.
        passed = spend.paused_exclusions(agent, teams)
        scoped_teams = teams if passed is None else passed.teams
        excluded = [] if passed is None else passed.task_ids
        sql = _CLAIM_NEXT_SQL[vendor, dispatcher, scoped_teams is not None, bool(excluded)]
        scope: list[Any] = []
        for values in (scoped_teams, excluded or None):
            if values is not None:
                scope.append(values if vendor == "postgresql" else json.dumps(values))
        return _claim_row(sql, [*_set_params(agent, rt, span), *scope, *labelled])

    task = storage.write(run)
    return None if task is None else _claimed(task)


# --- leases ------------------------------------------------------------------


def release_lapsed(at: dt.datetime, task_ids: Iterable[str] | None = None) -> list[Task]:
    """Hand back in_progress tasks whose lease ran out, inside the caller's transaction.

    Each lapse counts an abandonment; the third parks the task ``blocked`` with an
    error instead of handing it out again. The task's running execution is
    closed ``timed_out``.
    """
    qs = Task.objects.filter(status=Status.IN_PROGRESS, lease_until__lt=at)
    if task_ids is not None:
        qs = qs.filter(pk__in=list(task_ids))
    if connection.features.has_select_for_update:
        qs = qs.select_for_update(skip_locked=True)
    return [abandon(task, at, reason="lease lapsed") for task in qs]


def abandon(task: Task, at: dt.datetime, *, reason: str) -> Task:
    """Release an owner-less in_progress task: todo, or blocked after 3 abandonments."""
    prev = task.status
    task.abandonments += 1
    if task.abandonments >= MAX_ABANDONMENTS:
        fields = move(task, Status.BLOCKED, at=at)
        clear_claim(task)  # parked for a person: nobody holds it
        task.error = ABANDONED_ERROR.format(n=task.abandonments)
        fields |= {"error", "assignee_agent_id", "assignee_runtime"}
        kind = "blocked"
    else:
        fields = move(task, Status.TODO, at=at)  # clears the claim and the verdict
        kind = "released"
    close_run_leaving(task, prev, ExecutionStatus.TIMED_OUT, error=reason, at=at)
    commit_change(task, kind, prev_status=prev, fields=fields | {"abandonments"}, at=at)
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
        lost = claim_standing(claim_ticket, task, lapsed_at=None if adopt_lapsed_lease else at)
        if lost is not None:
            return declined(task, lost)
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
