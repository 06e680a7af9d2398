"""The atomic claim, claim-next, leases and their lapse.

A claim is one :func:`core.storage.write` transaction (``BEGIN IMMEDIATE`` on
SQLite, so the whole of it runs under the database's write lock):

1. read the claimer from the registry (:func:`_gate`): its team, runtime, labels,
   state and limits -- on PostgreSQL with its row locked ``FOR UPDATE`` (and its
   team's, when the team sets a limit), so two claims of one agent by any
   processes on any hosts count its held tasks one after the other; SQLite's
   write lock already orders them;
2. release the lapsed leases the candidates need (an index probe first: nearly
   always there is nothing to release), then count what the agent (and team)
   holds in_progress against ``max_concurrent``;
3. one conditional ``UPDATE … RETURNING`` — of a small fixed set, written once
   below: one per dispatcher order, scoped to teams or not — that picks the
   candidate in a subquery (the ready predicate of :mod:`board.store.tasks` and
   the route of :func:`board.store.ready.route_sql`, on PostgreSQL ``FOR UPDATE
   SKIP LOCKED`` so racers move on to the next task) and re-checks seed 000's
   guard itself, so at most one racer wins a task and none takes one routed
   elsewhere;
4. the ``claimed`` event, in the same transaction, delivered after commit.

Before step 3, a claim that a ``cap`` budget covers is admitted only if the
budget's spend plus the headroom of the runs in flight in its scope leaves room
under the limit (:mod:`board.store.spend`). Far from the limit such claims go side
by side, each in one of the budget's lanes (waiting for one when all are busy);
near it they take turns on every host, holding the budget's row ``FOR UPDATE`` and
all its lanes (:mod:`board.store.cap_lanes`; :func:`_write_claim` re-runs a claim
that came too near). Whether any cap
budget could cover the claim is read in step 1, with the agent: with none (most
boards), the spend module is not consulted at all.

The claimed row comes back from the ``RETURNING`` as a tuple and becomes its Task
with the converters the ORM would apply, worked out once per column order
(:func:`core.rows.from_rows`): no queryset is built per claim.

A claim of a task with a scope (:mod:`board.scope`) first looks for a task of the
same repository in progress or waiting to land whose scope overlaps it
(:mod:`board.store.scoping`): claim refuses ``scope_busy``, claim-next passes the
task over. On PostgreSQL a claim that started a scoped task then takes its
repository's advisory lock and looks again, so two overlapping starts on any hosts
cannot both commit (the loser's transaction is rolled back and re-run).

Zero rows is data — a refusal diagnosed in the order GOVERNANCE.md fixes
(:data:`REFUSALS`) — and is never retried; only transient lock errors are, by
:func:`core.storage.write`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import connection

from board import checks
from board.errors import (
    AgentPaused,
    ApprovalRequired,
    BudgetPaused,
    ClaimConflict,
    LimitReached,
    NotRouted,
    ScopeBusy,
    TaskNotFound,
)
from board.models import (
    Budget,
    BudgetMode,
    BudgetScope,
    ExecutionProcess,
    ExecutionStatus,
    Task,
    TaskDep,
)
from board.repository import RunRepository, run_repository
from board.store import scoping, spend
from board.store._base import commit_change, lock_task, now, record_event
from board.store.approvals import blocks_claim, waits_sentence
from board.store.cap_lanes import Admission, TakeTurns
from board.store.executions import close_run_leaving, start_claimed
from board.store.moves import clear_claim, move
from board.store.ready import (
    READY_SQL,
    label_param,
    label_sql,
    route_params,
    route_part_keys,
    route_parts,
    route_sql,
    routes_to,
)
from board.store.tickets import Ticket, WriteOutcome, claim_standing, declined, recorded
from board.transitions import Status, is_transition_allowed
from core import storage
from core.api.status import status_for
from core.errors import ClawbooError, NotFound, ValidationFailed
from core.models import Agent, AgentState, Team
from core.rows import from_rows

MAX_ABANDONMENTS = 3  # seed 001: fixed, separate from max_attempts
ABANDONED_ERROR = "abandoned: its lease lapsed {n} times without renewal"


@dataclass(frozen=True)
class ClaimResult:
    """``ok`` with the task and its ticket, or the refusal's code (one of
    :data:`REFUSALS`) with a sentence saying why."""

    outcome: str
    task: Task | None = None
    ticket: str | None = None
    detail: str = ""
    # The refusal's own exception, when it has more to say than its outcome.
    refusal: ClawbooError | None = None
    # The run the claim opened with it (claim's or claim_next's ``pid``), if any.
    execution: ExecutionProcess | None = None

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def repository(self) -> RunRepository:
        """Which repository the claimed task's run uses: the one answer
        (:func:`board.repository.run_repository`), read, never registering."""
        assert self.task is not None
        return run_repository(self.task, register=False)

    def raise_for_outcome(self, task_id: str) -> ClaimResult:
        """The refusal as the one exception type per outcome (for the API)."""
        if self.outcome == TaskNotFound.code:
            raise TaskNotFound(task_id)
        if self.refusal is not None:
            raise self.refusal
        for row in REFUSALS:
            if row.code == self.outcome:
                raise row.error(
                    self.detail, **({} if row.error is ClaimConflict else {"task_id": task_id})
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
# Approval before work (GOVERNANCE §5, board.store.approvals): a task a person has
# not approved is never taken. A column condition, in the pick and in the guard.
_APPROVED = f"({_TABLE}.approval_state IS NULL OR {_TABLE}.approval_state = 'approved')"
_GUARD = (
    f"{_TABLE}.status = 'todo' AND {_TABLE}.assignee_agent_id IS NULL AND {_TABLE}.dropped = FALSE"
    f" AND {_APPROVED}"
)
# claim(): the one task, if it is ready, of the claimer's team (None: an id the
# registry does not know, any team) and routed to it. Binds: the SET values, the
# task id, the team, the route's three values.
_CLAIM_ONE_SQL = {
    vendor: (
        f"UPDATE {_TABLE} SET {_SET} WHERE {_TABLE}.id = %s AND {_GUARD} "  # noqa: S608
        f"AND {READY_SQL} AND {_TABLE}.team_id = COALESCE(%s, {_TABLE}.team_id) "
        f"AND {route_sql(vendor)} RETURNING *"
    )
    for vendor in ("sqlite", "postgresql")
}


# How many candidates each part of the route lookup offers the pick on PostgreSQL:
# more than the racers that can hold one locked at once, so the pick nearly always
# finds one unlocked; when it finds none, the claim looks again by the whole
# predicate (_claim_next_fallback_sql) before it says nothing is ready.
_PG_CANDIDATES = 16


def _filters(vendor: str, scoped: bool, excluding: bool) -> str:
    """The candidate's conditions besides its route. Binds: [the teams — a JSON array
    on SQLite, an array on PostgreSQL —], [the task ids passed over (a paused
    budget's trees and routines), the same way], the label (or None) twice."""
    where = f"{READY_SQL} AND {_TABLE}.assignee_agent_id IS NULL AND {_APPROVED} "
    if scoped:
        where += (
            f"AND {_TABLE}.team_id = ANY(%s) "
            if vendor == "postgresql"
            else f"AND {_TABLE}.team_id IN (SELECT value FROM json_each(%s)) "  # noqa: S608
        )
    if excluding:
        where += (
            f"AND {_TABLE}.id <> ALL(%s) "
            if vendor == "postgresql"
            else f"AND {_TABLE}.id NOT IN (SELECT value FROM json_each(%s)) "  # noqa: S608
        )
    no_label = "%s::text IS NULL" if vendor == "postgresql" else "%s IS NULL"
    return where + f"AND ({no_label} OR {label_sql(vendor)})"


@lru_cache(maxsize=256)
def _claim_next_sql(
    vendor: str, order: str, scoped: bool, excluding: bool, runtime: bool, labels: int
) -> str:
    """claim_next(): the first ready, unassigned, approved task in ``order`` routed to
    the claimer, claimed under the guard. The candidates come from one ordered index
    lookup per part of the routes the claimer may take (:func:`board.store.ready.
    route_parts`: the open tasks, and those routed to its id, runtime or labels),
    each the first in ``order`` (PostgreSQL: the first few); the pick is the first
    of those, on PostgreSQL ``FOR UPDATE SKIP LOCKED`` so racers move on to the next.
    Binds: the SET values, then per part the filters' binds (:func:`_filters`),
    [the route's three values (:func:`board.store.ready.route_params`)] and its key
    (:func:`board.store.ready.route_part_keys`)."""
    lookups = _lookups(vendor, order, scoped, excluding, runtime, labels)
    by = ", ".join(f"part.{key}" for key in order.split(", "))
    if vendor == "postgresql":
        # The pick re-reads the row's claimability: a racer may have claimed a
        # candidate since the lookups' snapshot, and the lock re-checks these.
        pick = (
            f"SELECT {_TABLE}.id FROM ({lookups}) AS part JOIN {_TABLE} "  # noqa: S608
            f"ON {_TABLE}.id = part.id WHERE {READY_SQL} "
            f"AND {_TABLE}.assignee_agent_id IS NULL AND {_APPROVED} "
            f"ORDER BY {by} LIMIT 1 FOR UPDATE OF {_TABLE} SKIP LOCKED"
        )
    else:
        # One writer at a time: the lookups' rows are as they are.
        pick = f"SELECT part.id FROM ({lookups}) AS part ORDER BY {by} LIMIT 1"  # noqa: S608
    return (
        f"UPDATE {_TABLE} SET {_SET} WHERE {_TABLE}.id = ({pick}) "  # noqa: S608
        f"AND {_GUARD} RETURNING *"
    )


def _lookups(
    vendor: str, order: str, scoped: bool, excluding: bool, runtime: bool, labels: int
) -> str:
    """The candidates' ids: per part of the routes, the first (PostgreSQL: first
    few) in ``order``, each an ordered lookup in that part's index."""
    filters = _filters(vendor, scoped, excluding)
    limit = _PG_CANDIDATES if vendor == "postgresql" else 1
    return " UNION ALL ".join(
        f"SELECT * FROM (SELECT {_TABLE}.id, {_TABLE}.priority, {_TABLE}.created_at "  # noqa: S608
        f"FROM {_TABLE} WHERE {filters} "
        + (f"AND {route_sql(vendor)} " if rest else "")
        + f"AND {part} ORDER BY {order} LIMIT {limit}) AS part{n}"
        for n, (part, rest) in enumerate(route_parts(vendor, runtime, labels))
    )


@lru_cache(maxsize=256)
def _candidates_left_sql(
    vendor: str, order: str, scoped: bool, excluding: bool, runtime: bool, labels: int
) -> str:
    """Whether the lookups find any candidate (locked or not). Binds: the lookups'."""
    lookups = _lookups(vendor, order, scoped, excluding, runtime, labels)
    return f"SELECT 1 WHERE EXISTS ({lookups})"


@lru_cache(maxsize=64)
def _claim_next_fallback_sql(vendor: str, order: str, scoped: bool, excluding: bool) -> str:
    """PostgreSQL, when every candidate of the lookups was locked by racers: the
    first claimable task by the whole route predicate (a walk of the ready index,
    ``FOR UPDATE SKIP LOCKED``). Binds: the SET values, the filters' binds, the
    route's three values."""
    pick = (
        f"SELECT {_TABLE}.id FROM {_TABLE} WHERE {_filters(vendor, scoped, excluding)} "  # noqa: S608
        f"AND {route_sql(vendor)} ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED"
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
}  # each key a column of the tasks row (the pick orders its candidates by them)


def claim_next_statement(
    vendor: str,
    dispatcher: str,
    claimer: Claimer,
    *,
    set_params: list[Any],
    teams: list[str] | None,
    excluded: list[str],
    label: str | None,
) -> tuple[str, list[Any]]:
    """The claim-next statement for ``claimer`` and its binds."""
    pack = (lambda v: v) if vendor == "postgresql" else json.dumps
    filters: list[Any] = [pack(teams)] if teams is not None else []
    if excluded:
        filters.append(pack(excluded))
    filters += [label, None if label is None else label_param(vendor, label)]
    route = claimer.route()
    params = list(set_params)
    for (_part, rest), key in zip(
        route_parts(vendor, claimer.runtime is not None, len(claimer.labels)),
        route_part_keys(claimer.agent_id, claimer.runtime, claimer.labels),
        strict=True,
    ):
        params += [*filters, *(route if rest else []), *key]
    order = DISPATCH_ORDER[dispatcher]
    shape = (vendor, order, teams is not None, bool(excluded))
    return _claim_next_sql(*shape, claimer.runtime is not None, len(claimer.labels)), params


def _claim_next_row(
    vendor: str,
    dispatcher: str,
    claimer: Claimer,
    *,
    set_params: list[Any],
    teams: list[str] | None,
    excluded: list[str],
    label: str | None,
) -> Task | None:
    """Claim the first candidate (:func:`claim_next_statement`). On PostgreSQL, when
    racers held every candidate the lookups offered and some are left, look again by
    the whole predicate, so a claim answers "nothing" only when nothing is free."""
    sql, params = claim_next_statement(
        vendor, dispatcher, claimer, set_params=set_params, teams=teams,
        excluded=excluded, label=label,
    )  # fmt: skip
    claimed = _claim_row(sql, params)
    if claimed is not None or vendor != "postgresql":
        return claimed
    order, scoped, excluding = DISPATCH_ORDER[dispatcher], teams is not None, bool(excluded)
    probe = _candidates_left_sql(
        vendor, order, scoped, excluding, claimer.runtime is not None, len(claimer.labels)
    )
    with connection.cursor() as cursor:
        cursor.execute(probe, params[len(set_params) :])
        if cursor.fetchone() is None:
            return None
    pack = (lambda v: v) if vendor == "postgresql" else json.dumps
    binds = [
        *set_params,
        *([pack(teams)] if teams is not None else []),
        *([pack(excluded)] if excluded else []),
        label,
        None if label is None else label_param(vendor, label),
        *claimer.route(),
    ]
    return _claim_row(_claim_next_fallback_sql(vendor, order, scoped, excluding), binds)


# Is any lease lapsed? An index probe (tasks_status_lease_idx).
_ANY_LAPSED_SQL = f"SELECT 1 FROM {_TABLE} WHERE status = 'in_progress' AND lease_until < %s"  # noqa: S608

# The claimer as the registry has it, its row locked on PostgreSQL (step 1).
_AGENTS, _TEAMS = Agent._meta.db_table, Team._meta.db_table
_BUDGETS = Budget._meta.db_table
# Whether a cap budget could cover a claim of this agent: its team's (any scope), or
# an agent-scope budget naming it -- the rows spend.cap_refusal / cap_exclusions
# would lock. Read with the agent, so a board with no cap budget pays no budget
# query of its own (nearly every claim); with one, the spend module looks as before.
_HAS_CAPS = (
    f"EXISTS (SELECT 1 FROM {_BUDGETS} b WHERE b.mode = '{BudgetMode.CAP}' "  # noqa: S608
    f"AND (b.team_id = a.team_id OR (b.scope = '{BudgetScope.AGENT}' AND b.scope_id = a.id)))"
)
_GATE_SQL = {
    vendor: (
        "SELECT a.team_id, a.runtime, a.labels, a.max_concurrent, a.state, "  # noqa: S608
        f"a.state_reason, a.health_ok, a.health_detail, t.max_concurrent, {_HAS_CAPS} "
        f"FROM {_AGENTS} a JOIN {_TEAMS} t ON t.id = a.team_id WHERE a.id = %s"
        + (" FOR UPDATE OF a" if vendor == "postgresql" else "")
    )
    for vendor in ("sqlite", "postgresql")
}
# An id the registry does not know may claim any team's work: any cap budget at all.
_ANY_CAP_SQL = f"SELECT 1 FROM {_BUDGETS} WHERE mode = '{BudgetMode.CAP}' LIMIT 1"  # noqa: S608
_LOCK_TEAM_SQL = f"SELECT 1 FROM {_TEAMS} WHERE id = %s FOR UPDATE"  # noqa: S608
# What is held in_progress: by one agent (tasks_held_idx), by one team
# (tasks_board_column_idx). 'in_progress' is a literal for the partial index.
_HELD_BY_AGENT_SQL = (
    f"SELECT COUNT(*) FROM {_TABLE} WHERE assignee_agent_id = %s "  # noqa: S608
    "AND status = 'in_progress'"
)
_HELD_BY_TEAM_SQL = f"SELECT COUNT(*) FROM {_TABLE} WHERE team_id = %s AND status = 'in_progress'"  # noqa: S608


@dataclass(frozen=True)
class Claimer:
    """Who claims, as the claim's own transaction read the registry. An id the
    registry does not know (the store's own callers; every door -- API, MCP,
    executor -- names a registered agent) has no team, labels, state or limit."""

    agent_id: str
    runtime: str | None
    labels: list[str]
    team_id: str | None = None
    paused: str | None = None  # why it may take nothing now (paused or unhealthy)
    limit: int | None = None
    team_limit: int | None = None
    # False: no cap budget could cover this claim (the spend module need not look).
    caps: bool = True

    def route(self) -> list[Any]:
        return route_params(self.agent_id, self.runtime, self.labels)


def _json_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = json.loads(value)
    return [str(x) for x in value or ()]


def _gate(agent_id: str, runtime: str | None, registered: bool = False) -> Claimer:
    """Step 1, inside the claim's transaction. ``registered``: the caller's door found
    the agent in the registry; if its row is gone now (deleted while this claim waited
    for its lock: ops.agent_removal), ``NotFound``, nothing written -- not a claim as
    an id the registry does not know, which would name a deleted agent."""
    vendor = connection.vendor
    with connection.cursor() as cursor:
        cursor.execute(_GATE_SQL[vendor], [agent_id])
        row = cursor.fetchone()
        if row is None and registered:
            raise NotFound(f"agent {agent_id!r} does not exist (it was deleted)")
        if row is None:
            cursor.execute(_ANY_CAP_SQL)
            return Claimer(agent_id, runtime, [], caps=cursor.fetchone() is not None)
        team, registered_runtime, labels, limit, state, reason, health_ok, health = row[:8]
        team_limit, caps = row[8], bool(row[9])
        if team_limit is not None and vendor == "postgresql":
            # The team's count is shared by its agents' claims: they take turns.
            cursor.execute(_LOCK_TEAM_SQL, [team])
    paused = None
    if state == AgentState.PAUSED:
        paused = f"agent {agent_id!r} is paused" + (f": {reason}" if reason else "")
    elif health_ok is False:
        paused = f"agent {agent_id!r} is unhealthy" + (f": {health}" if health else "")
    return Claimer(
        agent_id,
        registered_runtime,
        _json_list(labels),
        team_id=team,
        paused=paused,
        limit=limit,
        team_limit=team_limit,
        caps=caps,
    )


def _over_limit(claimer: Claimer) -> str | None:
    """Step 2's count: why the claimer may hold no more, or None."""
    if claimer.team_id is None:
        return None
    with connection.cursor() as cursor:
        if claimer.limit is not None:
            cursor.execute(_HELD_BY_AGENT_SQL, [claimer.agent_id])
            if cursor.fetchone()[0] >= claimer.limit:
                return (
                    f"agent {claimer.agent_id!r} already holds its max_concurrent "
                    f"({claimer.limit}) tasks in progress"
                )
        if claimer.team_limit is not None:
            cursor.execute(_HELD_BY_TEAM_SQL, [claimer.team_id])
            if cursor.fetchone()[0] >= claimer.team_limit:
                return (
                    f"team {claimer.team_id!r} already holds its max_concurrent "
                    f"({claimer.team_limit}) tasks in progress"
                )
    return None


@dataclass(frozen=True)
class _Refusal:
    code: str
    detail: str
    error: ClawbooError | None = None  # the refusal's own exception, when it says more


@dataclass(frozen=True)
class _Blocks:
    """What the claim's transaction found in the way besides the task's row: why the
    claimer is over a limit, and a cap budget that covers the task and admits no
    claim of it now (paused, or held by the runs in flight: board.store.spend)."""

    limit: str | None = None
    budget: BudgetPaused | None = None
    # A task of the same repository whose scope overlaps this one's (scoping).
    scope: scoping.Hold | None = None


# Why a claim of one task took nothing: the first of these that holds, in the order
# GOVERNANCE.md fixes. Each reads (the task, or None; the claimer; what else was in
# the way) and answers a sentence or None; ``conflict`` always holds.
RefusalCheck = Callable[[Task | None, Claimer, _Blocks], str | None]


def _not_found(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    # Another team's task answers as an unknown one.
    if task is None or (claimer.team_id is not None and task.team_id != claimer.team_id):
        return "no such task"
    return None


def _agent_paused(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    return claimer.paused


def _budget_paused(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    return None if blocks.budget is None else blocks.budget.detail


def _not_routed(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    assert task is not None
    if routes_to(task, claimer.agent_id, claimer.runtime, claimer.labels):
        return None
    return f"task {task.id!r} is routed elsewhere: {task_route_text(task)}"


def _limit_reached(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    return blocks.limit


def _scope_busy(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    return None if blocks.scope is None else blocks.scope.sentence()


def _approval_required(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    assert task is not None
    if blocks_claim(task.approval_state):
        return waits_sentence(task.id)
    return None


def _conflict(task: Task | None, claimer: Claimer, blocks: _Blocks) -> str | None:
    """Which part of the ready predicate (:data:`READY_SQL`) the task fails, or who
    holds it, read from the row as the claim left it: "someone else holds it, or it
    is not ready" sent a person claiming a blocked task to look for a holder."""
    if task is None:
        return CONFLICT_SENTENCE
    if task.status == Status.IN_PROGRESS:
        holder = f" by {task.assignee_agent_id}" if task.assignee_agent_id else ""
        return f"task {task.id!r} is held{holder} (in_progress): never retry, claim another"
    if task.status != Status.TODO or task.dropped:
        status = "deleted" if task.dropped else task.status
        # The next step where there is one (a task in review is approved or sent back).
        hint = (
            " (move it to todo first)"
            if not task.dropped and is_transition_allowed(task.status, Status.TODO)
            else ""
        )
        return f"task {task.id!r} is {status}: only a todo task is claimed{hint}"
    waits_on = list(
        TaskDep.objects.filter(task_id=task.id)
        .exclude(depends_on__status=Status.DONE)
        .order_by("depends_on_id")
        .values_list("depends_on_id", flat=True)[:5]
    )
    if task.unmet_deps and waits_on:
        return f"task {task.id!r} waits on its dependencies: {', '.join(waits_on)} not done yet"
    return CONFLICT_SENTENCE


CONFLICT_SENTENCE = "the task is not claimable: someone else holds it, or it is not ready"


@dataclass(frozen=True)
class Refusal:
    """One way a claim takes nothing: the exception it raises at the API (whose
    ``code`` is the claim's outcome, and maps to its HTTP status in
    :mod:`core.api.errors`), its check, whether claim-next answers it (the others are
    of one named task), and whether whoever asked waits on the board for it to pass
    (a worker, a routine's fire) rather than give up."""

    error: type[ClawbooError]
    check: RefusalCheck
    next: bool = False
    waits: bool = True

    @property
    def code(self) -> str:
        return self.error.code

    @property
    def status(self) -> int:
        return status_for(self.code)


REFUSALS: tuple[Refusal, ...] = (
    Refusal(TaskNotFound, _not_found, waits=False),
    Refusal(AgentPaused, _agent_paused, next=True),
    Refusal(BudgetPaused, _budget_paused, next=True),
    Refusal(NotRouted, _not_routed),
    Refusal(LimitReached, _limit_reached),
    Refusal(ScopeBusy, _scope_busy),
    Refusal(ApprovalRequired, _approval_required),
    Refusal(ClaimConflict, _conflict),
)
# The codes of the table's rows, for the claim views' documented errors.
CLAIM_REFUSALS = tuple(row.code for row in REFUSALS)
CLAIM_NEXT_REFUSALS = tuple(row.code for row in REFUSALS if row.next)
# What a fire whose claim was refused leaves on the board for the workers.
WAITS_ON_THE_BOARD = tuple(row.code for row in REFUSALS if row.waits)


def _diagnose(task_id: str, claimer: Claimer, blocks: _Blocks) -> _Refusal:
    task = Task.objects.filter(pk=task_id).first()
    for row in REFUSALS:
        detail = row.check(task, claimer, blocks)
        if detail is not None:
            error: ClawbooError | None = blocks.budget if row.error is BudgetPaused else None
            if row.error is ScopeBusy and blocks.scope is not None:
                error = ScopeBusy(detail, task_id=task_id, held_by=blocks.scope.as_dict())
            return _Refusal(row.code, detail, error)
    raise AssertionError("conflict always holds")


def task_route_text(task: Task) -> str:
    """A task's route in a sentence's words ("agent a1, runtime codex, labels gpu")."""
    parts = []
    if task.route_agent_id is not None:
        parts.append(f"agent {task.route_agent_id}")
    if task.route_runtime is not None:
        parts.append(f"runtime {task.route_runtime}")
    if task.route_labels:
        parts.append("labels " + ", ".join(task.route_labels))
    return "; ".join(parts) or "anyone"


def _set_params(agent_id: str, runtime: str | None, lease_ms: int) -> list[Any]:
    at = now()
    ops = connection.ops
    stamp = ops.adapt_datetimefield_value(at)
    lease_end = ops.adapt_datetimefield_value(at + dt.timedelta(milliseconds=lease_ms))
    return [agent_id, runtime, stamp, lease_end, lease_ms, stamp]


def _claim_row(sql: str, params: list[Any]) -> Task | None:
    """Run one claim statement inside the caller's write transaction; the claimed
    task (from the UPDATE's own ``RETURNING``, converted as the ORM converts a
    row), with its ``claimed`` event written in the same transaction, or None."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        if row is None:
            return None
        columns = tuple(d[0] for d in cursor.description)
    (task,) = from_rows(Task, columns, [row])
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


def claim(
    task_id: str,
    agent_id: Any,
    runtime: Any = None,
    *,
    lease_ms: Any = None,
    pid: int | None = None,
    registered: bool = False,
) -> ClaimResult:
    """Claim one task for ``agent_id``: ``ok`` (with a ticket) or the first refusal of
    :data:`REFUSALS` that holds (``not_found``, ``agent_paused``, ``budget_paused``,
    ``not_routed``, ``limit_reached``, ``scope_busy``, ``approval_required``,
    ``conflict``).

    Refused unless the task is todo, unassigned, not dropped, approved (or needing
    no approval), every dependency is done, it is of the agent's team and routed to
    it, no cap budget that covers it is paused or held by the runs in flight
    (:func:`board.store.spend.cap_refusal`), and the agent is active and under its
    limits, and its scope overlaps no task of its repository in progress or waiting
    to land (:mod:`board.store.scoping`). A lapsed lease on this task is released
    first, so an abandoned task is claimable as a fresh attempt. Never retried on a
    refusal.

    With ``pid`` (the caller runs the task in that process: a routine's connected
    fire), the run's ``running`` execution row is opened in the claim's own
    transaction (:attr:`ClaimResult.execution`), as :func:`claim_next` opens it.

    ``registered``: the door found the agent registered (API, MCP): an agent deleted
    since is ``NotFound`` (:func:`_gate`).
    """
    agent = checks.check_agent_id(agent_id)
    rt = _check_runtime(runtime)
    span = checks.check_lease_ms(lease_ms)
    sql = _CLAIM_ONE_SQL[connection.vendor]
    opened: list[ExecutionProcess | None] = [None]

    def run(admission: Admission) -> Task | _Refusal:
        opened[0] = None  # (a retried transaction starts again)
        claimer = _gate(agent, rt, registered)
        _release_lapsed_first(task_id)
        limit = None if claimer.paused else _over_limit(claimer)
        budget = None
        found = Task.objects.filter(pk=task_id).first()
        if found is not None and claimer.paused is None and claimer.caps:
            try:
                spend.cap_refusal(found, agent, admission)
            except BudgetPaused as paused:
                budget = paused
        held = _scope_hold(found)
        if claimer.paused is None and limit is None and budget is None and held is None:
            params = [*_set_params(agent, rt, span), task_id, claimer.team_id, *claimer.route()]
            task = _claim_row(sql, params)
            if task is not None:
                scoping.confirm_apart(task)
                spend.confirm_admission(admission, task, agent)
                if pid is not None:
                    opened[0] = start_claimed(task, runtime=rt or claimer.runtime, pid=pid)
                return task
        return _diagnose(task_id, claimer, _Blocks(limit, budget, held))

    outcome = _write_claim(run)
    if isinstance(outcome, _Refusal):
        return ClaimResult(outcome.code, detail=outcome.detail, refusal=outcome.error)
    return dataclasses.replace(_claimed(outcome), execution=opened[0])


def _scope_hold(task: Task | None) -> scoping.Hold | None:
    """Whether a task a claim could start (todo, nobody's) must wait for another of
    its repository to land first. A task another agent holds answers ``conflict``."""
    if task is None or task.status != Status.TODO or task.assignee_agent_id is not None:
        return None
    return scoping.hold_on(task)


# How many times a claim re-runs after losing a scope race on PostgreSQL (each
# loss means a racer's start committed: the re-run sees it and moves on).
_SCOPE_RACE_RERUNS = 8


def _write_claim(run: Callable[[Admission], Any]) -> Any:
    """:func:`core.storage.write` of a claim's transaction, side by side with the other
    claims its cap budgets cover; re-run taking turns if it came too near a limit for
    that (:mod:`board.store.cap_lanes`), and re-run when it lost a scope race on
    PostgreSQL (:class:`board.store.scoping.ScopeRace`: its transaction was rolled back)."""
    admission = Admission(turns=False)
    for _ in range(_SCOPE_RACE_RERUNS):
        try:
            return storage.write(run, admission)
        except TakeTurns:
            admission = Admission(turns=True)
        except scoping.ScopeRace:
            continue
    # Racers kept winning: the server's moment (503 busy, retry), not the caller's.
    raise storage.WriteBudgetExceeded(
        f"the claim lost {_SCOPE_RACE_RERUNS} scope races in a row; retry after a moment"
    )


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
    pid: int | None = None,
    open_run: bool = False,
    registered: bool = False,
) -> ClaimResult | None:
    """Claim the next ready task in ``dispatcher`` order (of ``team`` or teams, with
    ``label``) routed to the agent, or None if there is none it may take now (it
    holds its ``max_concurrent``, or its team does). A paused or unhealthy agent
    gets ``agent_paused``. A registered agent takes only its own team's tasks.

    With ``pid`` (an executor about to run the task in that process), the run's
    ``running`` execution row is opened in the claim's own transaction
    (:attr:`ClaimResult.execution`), as :func:`~board.store.executions.start_assigned`
    opens it for a claim a person took. ``open_run`` does the same for a worker that
    runs it elsewhere (a remote worker, through the API: no pid of this host's), the
    row's runtime the claim's, else the agent's in the registry.

    Under contention one worker wins a task and the others move on to the next
    (SQLite: each claim runs alone under the write lock; PostgreSQL: a candidate
    locked by a racer is skipped). A task whose scope overlaps one of its
    repository in progress or waiting to land is passed over
    (:func:`board.store.scoping.held_back`). A None is never retried here: nothing
    was ready.
    """
    agent = checks.check_agent_id(agent_id)
    rt = _check_runtime(runtime)
    span = checks.check_lease_ms(lease_ms)
    checks.check_choice(dispatcher, "dispatcher", DISPATCH_ORDER)
    if label is not None:
        label = checks.check_label(label)
    teams = None if team is None else (team if isinstance(team, list) else [team])
    if teams == []:
        return None  # a caller who sees no team has nothing to claim

    vendor = connection.vendor
    labelled = [label, None if label is None else label_param(vendor, label)]

    opened: list[ExecutionProcess | None] = [None]

    def run(admission: Admission) -> Task | _Refusal | None:
        opened[0] = None  # (a retried transaction starts again)
        claimer = _gate(agent, rt, registered)
        if claimer.paused is not None:
            return _Refusal(AgentPaused.code, claimer.paused)
        scope = teams
        if claimer.team_id is not None:
            # An agent takes only its own team's work.
            if scope is not None and claimer.team_id not in scope:
                return None
            scope = [claimer.team_id]
        _release_lapsed_first()
        if _over_limit(claimer) is not None:
            return None  # claim-next passes: nothing this agent may take now
        # A cap paused (or held by the runs in flight) over the agent or all its
        # teams refuses (BudgetPaused); over some teams, trees or routines, their
        # tasks are passed over.
        try:
            passed = spend.cap_exclusions(agent, scope, admission) if claimer.caps else None
        except BudgetPaused as paused:
            return _Refusal(BudgetPaused.code, paused.detail, paused)
        scoped = scope if passed is None else passed.teams
        excluded = [] if passed is None else passed.task_ids
        # Tasks whose scope overlaps work in flight in their repository: passed over.
        apart = [*excluded, *scoping.held_back(scoped)]
        claimed = _claim_next_row(
            vendor, dispatcher, claimer, set_params=_set_params(agent, rt, span),
            teams=scoped, excluded=apart, label=label,
        )  # fmt: skip
        if claimed is not None:
            scoping.confirm_apart(claimed)
        if claimed is None and excluded:
            binds = [*labelled, *claimer.route()]
            held = _held_back(vendor, agent, scoped, excluded, binds)
            if held is not None:
                return held
        if claimed is not None and claimer.caps:
            spend.confirm_admission(admission, claimed, agent)
        if claimed is not None and (pid is not None or open_run):
            opened[0] = start_claimed(claimed, runtime=rt or claimer.runtime, pid=pid)
        return claimed

    outcome = _write_claim(run)
    if outcome is None:
        return None
    if isinstance(outcome, _Refusal):
        return ClaimResult(outcome.code, detail=outcome.detail, refusal=outcome.error)
    return dataclasses.replace(_claimed(outcome), execution=opened[0])


def _held_back(
    vendor: str, agent_id: str, teams: list[str] | None, excluded: list[str], binds: list[Any]
) -> _Refusal | None:
    """GOVERNANCE §3: claim-next answers ``409 budget_paused`` when every scope the
    agent could take work from is paused. Called when the claim took nothing while
    cap budgets passed over ``excluded``: the refusal of the first of those this
    claimer could otherwise take (ready, approved, its label and route), naming the
    budget that holds it; None when none is (nothing was ready: a plain 204)."""
    in_list = "= ANY(%s)" if vendor == "postgresql" else "IN (SELECT value FROM json_each(%s))"
    team_clause = f"AND {_TABLE}.team_id {in_list} " if teams is not None else ""
    no_label = "%s::text IS NULL" if vendor == "postgresql" else "%s IS NULL"
    sql = (
        f"SELECT {_TABLE}.id FROM {_TABLE} WHERE {READY_SQL} "  # noqa: S608
        f"AND {_TABLE}.assignee_agent_id IS NULL AND {_APPROVED} "
        f"AND {_TABLE}.id {in_list} {team_clause}"
        f"AND ({no_label} OR {label_sql(vendor)}) AND {route_sql(vendor)} LIMIT 1"
    )
    pack = (lambda v: v) if vendor == "postgresql" else json.dumps
    params = [pack(excluded), *([pack(teams)] if teams is not None else []), *binds]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    task = Task.objects.get(pk=row[0])
    try:
        spend.cap_refusal(task, agent_id)
    except BudgetPaused as paused:
        return _Refusal(BudgetPaused.code, paused.detail, paused)
    return None


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
        extend_lease(task, at, span)
        # Liveness, not a change of state: no event, but the revision moves.
        task.revision += 1
        task.updated_at = at
        task.save(update_fields=["lease_until", "lease_duration_ms", "revision", "updated_at"])
        return recorded(task)

    return storage.write(run)


def extend_lease(task: Task, at: dt.datetime, span: int | None = None) -> set[str]:
    """Push a held claim's lease out from ``at`` by ``span`` ms (default: its committed
    span); the fields set, for the caller's save. Called on a task the caller locked
    and whose claim it checked (:func:`claim_standing`)."""
    # A span committed under a higher ceiling (before an upgrade) is held to today's.
    length = min(span or task.lease_duration_ms or checks.DEFAULT_LEASE_MS, checks.lease_max_ms())
    task.lease_until = at + dt.timedelta(milliseconds=length)
    task.lease_duration_ms = length
    return {"lease_until", "lease_duration_ms"}


def heartbeat(task_id: str, ticket: Any) -> WriteOutcome:
    return renew_lease(task_id, ticket)
