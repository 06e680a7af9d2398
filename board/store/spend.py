"""Spend: what runs cost, rolled up to their tasks, their trees and the budgets over them.

The only writer of ``budgets`` and of the spend columns of ``tasks`` and
``execution_processes``. A run's usage arrives as running totals (while it streams,
and once more when it ends); :func:`apply_usage` turns the difference from what
was recorded into one addition to the execution, its task, every ancestor's tree
total and every budget whose scope covers the run, in the caller's transaction.
So a task's cost is live while its run goes, and a budget's ``spent_cents`` is one
figure in the database that every worker on every host adds to and reads.

A budget's crossings (80 %, 100 %) are noticed by the write that makes them and
notified once per window (``budget_warning``, ``budget_exhausted`` events); a
``cap`` budget that reaches its limit (or its grace) sets ``paused_until``, which
the claim tests (:func:`cap_refusal`, :func:`cap_exclusions`); until then the
claim also reserves the headroom of the runs in flight, so a cap is passed by at
most one run's ceiling.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BigIntegerField, ExpressionWrapper, F, Q, Sum

from board.errors import BudgetNotFound, BudgetPaused
from board.models import (
    Budget,
    BudgetMode,
    BudgetScope,
    BudgetWindow,
    CostStatus,
    ExecutionProcess,
    Task,
    window_bounds,
)
from board.money import MILLICENTS_PER_CENT, cents_of
from board.store._base import now, record_event
from board.store.cap_lanes import Admission, TakeTurns
from core import events, storage
from core.checks import check_choice, check_int
from core.errors import ValidationFailed
from core.models import Agent
from core.rows import from_rows
from core.server_commands import runs_on_server

MAX_CENTS = 2**53
# One run's figures, each far below what the sums it joins can hold (BIGINT
# millicents and tokens of its task, its tree and every budget over it): a single
# report of 2**53 cents overflowed those sums at the team's next report, and every
# later usage report or close of the team failed (500) -- one agent-side caller
# stopping its whole team's accounting. ~$43M and ~10^12 tokens a run.
RUN_CENTS_MAX = 2**32
RUN_TOKENS_MAX = 2**40
RUN_MAX = {
    "tokens_in": RUN_TOKENS_MAX,
    "tokens_out": RUN_TOKENS_MAX,
    "cache_read": RUN_TOKENS_MAX,
    "cache_write": RUN_TOKENS_MAX,
    "cost_cents": RUN_CENTS_MAX,
    "cost_millicents": RUN_CENTS_MAX * MILLICENTS_PER_CENT,
}


@dataclass(frozen=True)
class Usage:
    """A run's running totals, as its runtime reported them so far."""

    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_cents: int = 0
    cost_status: str = CostStatus.UNKNOWN
    # The cost of record, in thousandths of a cent. Given, ``cost_cents`` is its
    # rounding (:func:`board.money.cents_of`); not given, it is ``cost_cents`` × 1000.
    cost_millicents: int | None = None

    def __post_init__(self) -> None:
        if self.cost_millicents is None:
            if isinstance(self.cost_cents, int) and not isinstance(self.cost_cents, bool):
                object.__setattr__(self, "cost_millicents", self.cost_cents * MILLICENTS_PER_CENT)
        elif isinstance(self.cost_millicents, int) and not isinstance(self.cost_millicents, bool):
            object.__setattr__(self, "cost_cents", cents_of(self.cost_millicents))

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out + self.cache_read + self.cache_write

    @property
    def millicents(self) -> int:
        return self.cost_millicents or 0

    def check(self) -> Usage:
        for name, most in RUN_MAX.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationFailed(name, "must be a non-negative integer")
            if value > most:
                raise ValidationFailed(name, f"at most {most} for one run")
        check_choice(self.cost_status, "cost_status", CostStatus.values)
        return self

    def bounded(self) -> Usage:
        """These figures, each at most what one run may have (:data:`RUN_MAX`): what a
        runtime's own stream says past that (an agent's output on the server) is
        recorded as the most, which its ceiling and budgets then stop, rather than
        failing the run's bookkeeping. The API refuses such a figure instead (400)."""
        return Usage(
            tokens_in=min(self.tokens_in, RUN_TOKENS_MAX),
            tokens_out=min(self.tokens_out, RUN_TOKENS_MAX),
            cache_read=min(self.cache_read, RUN_TOKENS_MAX),
            cache_write=min(self.cache_write, RUN_TOKENS_MAX),
            cost_millicents=min(self.millicents, RUN_MAX["cost_millicents"]),
            cost_status=self.cost_status,
        )

    def not_below(self, row: ExecutionProcess) -> Usage:
        """These running totals, each no lower than ``row`` recorded already.

        A running run's totals only grow: a lower one is a report that arrived late
        (a retried request) or an agent-side caller taking back spend its run was
        counted, which would give its task, its tree and the budgets over it back
        room they never had, and let a run past its cap mid-run (GOVERNANCE §3, §6).
        Only the run's end may lower them: its runtime's own final price replaces
        the streamed estimate (:func:`board.store.close_execution`)."""
        recorded = row.cost_millicents or 0
        higher = self.millicents >= recorded
        return Usage(
            tokens_in=max(self.tokens_in, row.tokens_in or 0),
            tokens_out=max(self.tokens_out, row.tokens_out or 0),
            cache_read=max(self.cache_read, row.cache_read or 0),
            cache_write=max(self.cache_write, row.cache_write or 0),
            cost_millicents=self.millicents if higher else recorded,
            cost_status=self.cost_status if higher else row.cost_status,
        )

    def as_final(self, row: ExecutionProcess, *, remote: bool) -> Usage:
        """These final figures of a run, over what its running reports recorded.

        The runtime's own final price replaces the streamed estimate, lower or not
        (GOVERNANCE §3). A remote worker's close is the agent side's word, though,
        and a lower figure would give the run's task, its tree and the budgets over it
        back spend they counted (GOVERNANCE §6): it lowers what was recorded only
        where the runtime's price (``reported``) replaces an estimate the server made
        from the streamed tokens; lower tokens alone, or a price below one the run's
        own reports already gave, never do. The server's own executor (``remote``
        False) reads its runtime's figures itself and they stand as given."""
        replaces_estimate = (
            self.cost_status == CostStatus.REPORTED and row.cost_status != CostStatus.REPORTED
        )
        if remote and not replaces_estimate:
            return self.not_below(row)
        return self


@dataclass(frozen=True)
class Recorded:
    """What a usage report changed: the run's row, and the cap budgets over it now paused."""

    execution: ExecutionProcess
    paused: list[Budget]
    # The run's totals as recorded (never below what was recorded before).
    usage: Usage


def _row_tokens(row: ExecutionProcess) -> int:
    return row.tokens_in + row.tokens_out + row.cache_read + row.cache_write


def apply_usage(row: ExecutionProcess, usage: Usage, at: dt.datetime) -> list[Budget]:
    """Set ``row``'s usage to ``usage`` and add the difference everywhere it counts.

    Runs in the caller's transaction, with ``row`` locked by it. Returns the cap
    budgets covering the run that are paused after this report (its own spend or
    another run's may have paused them).
    """
    usage.check()
    # Added in millicents; each cents column is set to the rounding of its new sum
    # in the same statement (the right-hand sides read the row as it was).
    cents = usage.millicents - row.cost_millicents
    tokens = usage.tokens - _row_tokens(row)
    row.tokens_in, row.tokens_out = usage.tokens_in, usage.tokens_out
    row.cache_read, row.cache_write = usage.cache_read, usage.cache_write
    row.cost_cents, row.cost_status = usage.cost_cents, usage.cost_status
    row.cost_millicents = usage.millicents
    ExecutionProcess.objects.filter(pk=row.pk).update(
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        cache_read=row.cache_read,
        cache_write=row.cache_write,
        cost_cents=row.cost_cents,
        cost_millicents=row.cost_millicents,
        cost_status=row.cost_status,
    )
    task = Task.objects.only("id", "team_id", "metadata", "parent_task_id").get(pk=row.task_id)
    chain = [task.id, *_ancestors(task.id)]
    # The budgets are locked before any event is written, in the order a claim
    # takes them (budgets, then its team's event sequence). The other way round a
    # report and a covered claim each held what the other waited for: PostgreSQL
    # broke the deadlock after a second, two in a row outlasted the write budget,
    # and the report's failure took its run down.
    budgets = list(_covering(task, row.agent_id, chain).select_for_update().order_by("id"))
    if cents or tokens:
        Task.objects.filter(pk=task.id).update(
            cost_tokens=F("cost_tokens") + tokens,
            cost_millicents=F("cost_millicents") + cents,
            cost_cents=rounded_cents(F("cost_millicents") + cents),
        )
        Task.objects.filter(pk__in=chain).update(
            tree_cost_tokens=F("tree_cost_tokens") + tokens,
            tree_cost_millicents=F("tree_cost_millicents") + cents,
            tree_cost_cents=rounded_cents(F("tree_cost_millicents") + cents),
        )
    if cents:
        # Live on the board: the task and each ancestor whose tree figure moved.
        Task.objects.filter(pk__in=chain).update(revision=F("revision") + 1)
        for changed in Task.objects.filter(pk__in=chain):
            record_event(changed, "cost_changed", prev_status=changed.status)
    paused = []
    for budget in budgets:
        _roll_window(budget, at)
        if cents:
            budget.spent_millicents += cents
            budget.spent_cents = cents_of(budget.spent_millicents)
            _notice_crossings(budget, at)
        budget.save()
        if budget.mode == BudgetMode.CAP and _is_paused(budget, at):
            paused.append(budget)
    return paused


def rounded_cents(millicents: Any) -> Any:
    """:func:`board.money.cents_of` as SQL over a millicent expression (integer
    division on both engines: the figures are never negative)."""
    return ExpressionWrapper(
        (millicents + MILLICENTS_PER_CENT // 2) / MILLICENTS_PER_CENT,
        output_field=BigIntegerField(),
    )


def record_usage(
    execution_id: int, usage: Usage, *, final: bool = False, remote: bool = False
) -> Recorded | None:
    """A running run's usage so far (its streamed totals), never lower than what was
    recorded (:meth:`Usage.not_below`); ``final``: its runtime's own final figures,
    which replace the streamed ones just before the run is settled (``remote``: a
    remote worker's, which never lower a price the run reported, :meth:`Usage.as_final`).
    None once the row is closed."""
    usage.check()

    def run() -> Recorded | None:
        row = lock_execution(execution_id)
        if row is None or row.status != "running":
            return None
        counted = usage.as_final(row, remote=remote) if final else usage.not_below(row)
        return Recorded(row, apply_usage(row, counted, now()), counted)

    return storage.write(run)


def lock_execution(execution_id: int) -> ExecutionProcess | None:
    """The execution row, locked after its task's row: the order every board write
    that touches both takes (a move that closes a run locks the task first), so a
    usage report and a stale sweep never wait on each other in a circle."""
    task_id = (
        ExecutionProcess.objects.filter(pk=execution_id).values_list("task_id", flat=True).first()
    )
    if task_id is None:
        return None
    Task.objects.select_for_update().filter(pk=task_id).values_list("id").first()
    return ExecutionProcess.objects.select_for_update().filter(pk=execution_id).first()


def _ancestors(task_id: str) -> list[str]:
    from board.store.deps import ancestor_ids

    return ancestor_ids(task_id)


def _covering(task: Task, agent_id: str, chain: list[str]) -> Any:
    routine = (task.metadata or {}).get("routine_id")
    scopes = (
        Q(scope=BudgetScope.TEAM, scope_id=task.team_id)
        | Q(scope=BudgetScope.TASK_TREE, scope_id__in=chain)
        | Q(scope=BudgetScope.AGENT, scope_id=agent_id)
    )
    if isinstance(routine, str) and routine:
        scopes |= Q(scope=BudgetScope.ROUTINE, scope_id=routine)
    return Budget.objects.filter(scopes)


def paused_cap_over(task: Task, agent_id: str) -> Budget | None:
    """The first cap budget over a run of ``task`` by ``agent_id`` that is paused now,
    or None. For a run that opens no claim of its own (a critic's review, inside
    its builder's): no claim's check stands in its way, so it asks this first."""
    at = now()
    chain = [task.id, *_ancestors(task.id)]
    for budget in _covering(task, agent_id, chain).filter(mode=BudgetMode.CAP).order_by("id"):
        if _is_paused(budget, at):
            return budget
    return None


def _roll_window(budget: Budget, at: dt.datetime) -> None:
    """A budget whose window has passed starts the new one from nothing."""
    start = window_bounds(budget.window, at)[0]
    if budget.window_start < start:
        budget.window_start = start
        budget.spent_cents = budget.spent_millicents = 0
        budget.pause_at_cents = None
        budget.grace_cents = None
        budget.warned = budget.exhausted = False
        budget.paused_until = None


def _is_paused(budget: Budget, at: dt.datetime) -> bool:
    return budget.paused_until is not None and budget.paused_until > at


def _notice_crossings(budget: Budget, at: dt.datetime) -> None:
    """Record (once per window) the crossings this write made, and pause a spent cap.

    ``budget_exhausted`` is the 100 % crossing, once per window -- and once more each
    time a cap a person resumed pauses again (the grace they gave is spent): the
    person who lifted the pause is told it is back, or that second pause is silent.
    Called with the budget's row locked, so of two writers that cross together
    only the first sees the crossing unrecorded.
    """
    spent, limit = budget.spent_cents, budget.limit_cents
    if not budget.warned and budget.warns_at(spent):
        budget.warned = True
        _event(budget, "budget_warning", at)
    told = False
    if not budget.exhausted and spent >= limit:
        budget.exhausted = told = True
        _event(budget, "budget_exhausted", at)
    allowance = budget.pause_at_cents if budget.pause_at_cents is not None else limit
    if budget.mode == BudgetMode.CAP and spent >= allowance and not _is_paused(budget, at):
        budget.paused_until = window_bounds(budget.window, at)[1]
        if not told and budget.pause_at_cents is not None:
            _event(budget, "budget_exhausted", at)


def _event(budget: Budget, kind: str, at: dt.datetime) -> None:
    body = budget.as_dict(at)
    # as_dict reads the stored window; the row in hand is this window's already.
    body["spent_cents"] = budget.spent_cents
    body["pause_at_cents"] = budget.pause_at_cents
    if kind == "budget_exhausted":
        # What ran out, for the notification: the limit or a person's grace.
        body["grace_spent"] = budget.grace_ran_out()
    events.append(budget.team_id, kind, {"budget": body})


# --- the claim's check ------------------------------------------------------------
#
# "At most one run's ceiling can overshoot a cap" (GOVERNANCE §3), whatever the
# number of runs in flight and the size of their usage reports: a claim a cap
# budget covers is admitted only while the budget's spend plus the headroom of the
# runs in flight in its scope (each one's ceiling less what its attempt has spent)
# is under what its window may spend. The runs admitted before can then at most
# fill the cap, and only the run admitted last can pass it, by its own ceiling. A
# run with no ceiling holds a headroom nobody knows: it starts only when nothing is
# in flight in the scope, and while it runs nothing else starts there (the pause
# stops it at its next report). Near its limit, claims a cap covers take turns: on
# PostgreSQL the claim locks the cap budget rows FOR UPDATE (in id order, as a usage
# report does) and every lane of :mod:`board.store.cap_lanes`; far from it, they go
# side by side, one per lane (waiting for one when all are busy). SQLite's write
# lock orders them already.


_BUDGETS, _TASKS = Budget._meta.db_table, Task._meta.db_table
# The cap budgets a claim reads, with the claiming agent's settings (its run ceiling,
# for confirm_admission) in the same statement.
_CAPS_SQL = (
    "SELECT b.*{lane}, "  # noqa: S608
    f"(SELECT a.settings FROM {Agent._meta.db_table} a WHERE a.id = %s) AS agent_settings "
    f"FROM {_BUDGETS} b WHERE b.mode = '{BudgetMode.CAP}'"
)


def _caps(teams: list[str] | None, agent_id: str, admission: Admission) -> list[Budget]:
    """The cap budgets of ``teams`` (None: all) or over ``agent_id``, with the lanes
    ``admission`` needs in them: side by side one each, tried in the same statement
    (every lane of one busy: waited for, and the budgets read again); taking turns,
    their rows locked and every lane held until the claim commits. With no cap
    budget this is the claim's one look at budgets, and finds nothing.
    Hand-written SQL: every claim a cap covers runs it."""
    caps, lanes = _read_caps(teams, agent_id, admission, lanes=admission.side_by_side)
    if admission.side_by_side and admission.entered([cap.pk for cap in caps], lanes):
        # What the scope spent is read again under the lane it waited for.
        caps, _ = _read_caps(teams, agent_id, admission, lanes=False)
        admission.covers([cap.pk for cap in caps])
    admission.enter(caps)
    return caps


def _read_caps(
    teams: list[str] | None, agent_id: str, admission: Admission, *, lanes: bool
) -> tuple[list[Budget], list[int | None]]:
    """:func:`_caps`' statement: the budgets, and with ``lanes`` the lane tried
    beside each (None: every lane busy)."""
    lane, params = "", [agent_id]
    if lanes:
        column, lane_params = admission.lane_column("b.id")
        lane, params = f", {column} AS lane", [*lane_params, agent_id]
    sql = _CAPS_SQL.format(lane=lane)
    if teams is not None:
        marks = ", ".join(["%s"] * len(teams))
        sql += f" AND (b.team_id IN ({marks}) OR (b.scope = %s AND b.scope_id = %s))"
        params += [*teams, BudgetScope.AGENT, agent_id]
    sql += " ORDER BY b.id"
    if not admission.side_by_side and connection.features.has_select_for_update:
        sql += " FOR UPDATE OF b"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        columns = tuple(d[0] for d in cursor.description)
        rows = cursor.fetchall()
    if rows:
        admission.agent_ceiling = _ceiling(None, _settings(rows[0][-1]))
        admission.agent_ceiling_known = True
    taken = [row[columns.index("lane")] for row in rows] if lanes else []
    return from_rows(Budget, columns, rows), taken


def _scope_tasks(scope: str, scope_id: str) -> Any:
    """The tasks a budget's scope covers (an agent's: those it holds)."""
    if scope == BudgetScope.TEAM:
        return Task.objects.filter(team_id=scope_id)
    if scope == BudgetScope.AGENT:
        return Task.objects.filter(assignee_agent_id=scope_id)
    if scope == BudgetScope.ROUTINE:
        return Task.objects.filter(metadata__routine_id=scope_id)
    return Task.objects.filter(pk__in=_tree_ids(scope_id))


@dataclass(frozen=True)
class _InFlight:
    runs: int
    headroom: int | None  # None: a run with no ceiling is among them


# The runs in flight in a budget's scope, in one statement: its tasks in progress
# (a team's by tasks_board_column_idx, an agent's by tasks_held_idx), each with its
# agent's runtime and settings and, of its current attempt, what the runs spent and
# whether one is running or one has ended -- beside the budget's own row, read again
# (one row with NULLs when nothing is in flight). Every claim a cap covers runs it.
#
# Why the budget's row is read again here, not taken from the claim's first read of
# its cap budgets (:func:`_caps`): a usage report moves spend from a run's headroom
# into the budget in one commit, and a claim side by side holds no lock a report
# waits for. Read in two statements (two snapshots on PostgreSQL), a report
# committing between them is counted in neither: the budget's spend from before it,
# the run's headroom from after. Runs ending together in that gap let a claim in
# with the scope already past its cap (the reports paused it), and the cap is then
# passed by more than the ceiling of the run admitted last (tests/board/
# test_cap_lanes.py). One statement sees each report on both sides or neither.
_EXECUTIONS = ExecutionProcess._meta.db_table
_OF_ATTEMPT = f"FROM {_EXECUTIONS} e WHERE e.task_id = t.id AND e.attempt = t.attempts"
_IN_FLIGHT_SQL = (
    "SELECT b.spent_millicents, b.window_start, b.pause_at_cents, b.paused_until, f.* "  # noqa: S608
    f"FROM {_BUDGETS} b LEFT JOIN ("
    "SELECT t.max_run_cents AS f_ceiling, a.runtime AS f_runtime, a.settings AS f_settings, "
    f"(SELECT COALESCE(SUM(e.cost_cents), 0) {_OF_ATTEMPT}) AS f_spent, "
    f"EXISTS (SELECT 1 {_OF_ATTEMPT} AND e.status = 'running') AS f_running, "
    f"EXISTS (SELECT 1 {_OF_ATTEMPT} AND e.status <> 'running') AS f_ended "
    f"FROM {_TASKS} t LEFT JOIN {Agent._meta.db_table} a ON a.id = t.assignee_agent_id "
    "WHERE t.status = 'in_progress' AND {where}) f ON 1 = 1 WHERE b.id = %s"
)
# The budget's figures a claim decides by, as that statement reads them (converted as
# the ORM converts them: on SQLite a datetime comes back as text).
_FIGURES = tuple(
    (name, Budget._meta.get_field(name))
    for name in ("spent_millicents", "window_start", "pause_at_cents", "paused_until")
)
_IN_SCOPE: dict[str, str] = {
    BudgetScope.TEAM: "t.team_id = %s",
    BudgetScope.AGENT: "t.assignee_agent_id = %s",
}
_AGENT_SETTINGS_SQL = f"SELECT settings FROM {Agent._meta.db_table} WHERE id = %s"  # noqa: S608
_SETTINGS = Agent._meta.get_field("settings")
_SETTINGS_COL = _SETTINGS.get_col(Agent._meta.db_table)


def _settings(raw: Any) -> Any:
    """An agent's settings as the ORM would read them."""
    return None if raw is None else _SETTINGS.from_db_value(raw, _SETTINGS_COL, connection)


def _in_flight(budget: Budget) -> tuple[Budget, _InFlight]:
    """The runs in flight in the budget's scope -- its tasks in progress whose
    attempt's run is running or not yet open (it opens just after the claim) -- and
    what they may still spend; and ``budget`` with its figures (spend, window, pause)
    as the same statement read them (as it was if it is gone). A person's claim
    (runtime ``human``) runs nothing here and holds nothing."""
    where, params = _IN_SCOPE.get(budget.scope), [budget.scope_id]
    if where is None:  # a routine's or a tree's tasks: found by the ORM first
        tasks = _scope_tasks(budget.scope, budget.scope_id).filter(status="in_progress")
        params = list(tasks.values_list("id", flat=True))
        # None in progress: the statement still reads the budget (and no task).
        where = "t.id IN (" + ", ".join(["%s"] * len(params)) + ")" if params else "1 = 0"
    with connection.cursor() as cursor:
        cursor.execute(_IN_FLIGHT_SQL.format(where=where), [*params, budget.pk])
        rows = cursor.fetchall()
    if not rows:  # deleted since the claim read it: nothing of it is read again
        return budget, _InFlight(0, 0)
    width = len(_FIGURES)
    for (name, field), raw in zip(_FIGURES, rows[0][:width], strict=True):
        setattr(budget, name, _from_db(field, raw))
    budget.spent_cents = cents_of(budget.spent_millicents)
    runs, headroom = 0, 0
    for max_run_cents, runtime, settings, spent, running, ended in (r[width:] for r in rows):
        if running is None:
            break  # the budget's row alone: nothing in flight
        if runtime is not None and not runs_on_server(runtime):
            continue
        if ended and not running:
            continue  # its run is over (the task not moved on yet): its spend is final
        ceiling = _ceiling(max_run_cents, _settings(settings))
        if ceiling is None:
            return budget, _InFlight(runs + 1, None)
        runs += 1
        headroom += max(0, ceiling - spent)
    return budget, _InFlight(runs, headroom)


def _from_db(field: Any, raw: Any) -> Any:
    """A budget column's raw value as the ORM would read it."""
    col = field.get_col(_BUDGETS)
    value = raw
    for convert in connection.ops.get_db_converters(col) + field.get_db_converters(connection):
        value = convert(value, col, connection)
    return value


@dataclass(frozen=True)
class _Hold:
    """What a cap budget holds back from a claim now: every claim it covers (it is
    paused, or the runs in flight hold what is left of it), or only a run with no
    ceiling (something is in flight)."""

    budget: Budget
    all: BudgetPaused | None
    unbounded: BudgetPaused


def _hold(budget: Budget, at: dt.datetime, admission: Admission) -> _Hold | None:
    """What ``budget`` holds back from the claim. Side by side, nothing: the claim
    notes what it read, and anything held sends it to take turns."""
    _roll_window(budget, at)  # in hand only: the claim writes no budget
    paused = _paused(budget, at, admission)
    if paused is not None:
        return paused
    # The budget's figures from here on are the ones read with the runs in flight.
    budget, flight = _in_flight(budget)
    _roll_window(budget, at)
    paused = _paused(budget, at, admission)
    if paused is not None:
        return paused
    allowance = budget.pause_at_cents if budget.pause_at_cents is not None else budget.limit_cents
    if admission.side_by_side:
        committed = None if flight.headroom is None else budget.spent_cents + flight.headroom
        admission.note(committed, allowance)
        return None
    if not flight.runs:
        return None
    where = f"the {budget.scope} {budget.scope_id!r}"
    if flight.headroom is None or budget.spent_cents + flight.headroom >= allowance:
        full = BudgetPaused(
            budget,
            f"{where}'s cap budget is held by the runs in flight (what it spent and what "
            "their ceilings may still spend); the claim waits for them to finish",
        )
        return _Hold(budget, full, full)
    return _Hold(
        budget,
        None,
        BudgetPaused(
            budget,
            f"{where} has a cap budget and runs in flight: a run with no ceiling "
            "(max_run_cents) waits for them to finish",
        ),
    )


def _paused(budget: Budget, at: dt.datetime, admission: Admission) -> _Hold | None:
    """A paused budget holds every claim back (side by side: the claim takes turns)."""
    if not _is_paused(budget, at):
        return None
    if admission.side_by_side:
        raise TakeTurns
    paused = BudgetPaused(budget)
    return _Hold(budget, paused, paused)


def _agent_ceiling(agent_id: str) -> int | None:
    with connection.cursor() as cursor:
        cursor.execute(_AGENT_SETTINGS_SQL, [agent_id])
        row = cursor.fetchone()
    return _ceiling(None, None if row is None else _settings(row[0]))


def cap_refusal(task: Task, agent_id: str, admission: Admission | None = None) -> None:
    """Raise :class:`BudgetPaused` when a cap budget that covers ``task`` run by
    ``agent_id`` admits no claim of it now: it is paused, or the runs in flight in
    its scope hold what is left of it, or the task's run would have no ceiling and
    something is in flight there.

    For the claim, in its transaction: the spend it reads is the one the usage
    reports committed, and (PostgreSQL) taking turns it holds the cap budgets' rows
    and lanes until the claim commits, so the next claim they cover counts this one
    in flight; side by side (``admission``) it holds one lane each and raises
    :class:`TakeTurns` unless every covering budget stays far from its limit.
    """
    admission = admission or Admission(turns=True)
    caps = _caps([task.team_id], agent_id, admission)
    if not caps:
        return
    at = now()
    chain: list[str] | None = None
    routine = (task.metadata or {}).get("routine_id")
    for budget in caps:
        covered = (
            (budget.scope == BudgetScope.TEAM and budget.scope_id == task.team_id)
            or (budget.scope == BudgetScope.AGENT and budget.scope_id == agent_id)
            or (budget.scope == BudgetScope.ROUTINE and budget.scope_id == routine)
        )
        if not covered and budget.scope == BudgetScope.TASK_TREE:
            chain = chain if chain is not None else [task.id, *_ancestors(task.id)]
            covered = budget.scope_id in chain
        hold = _hold(budget, at, admission) if covered else None
        if hold is None:
            continue
        if hold.all is not None:
            raise hold.all
        if task.max_run_cents is None and _agent_ceiling(agent_id) is None:
            raise hold.unbounded


def confirm_admission(admission: Admission, task: Task, agent_id: str) -> None:
    """The claim took ``task``: side by side, raise :class:`TakeTurns` unless its run's
    ceiling leaves every cap budget that admitted it far from its limit."""
    if admission.side_by_side and admission.seen:
        ceiling = task.max_run_cents
        if ceiling is None:
            known = admission.agent_ceiling_known
            ceiling = admission.agent_ceiling if known else _agent_ceiling(agent_id)
        admission.confirm(ceiling)


@dataclass(frozen=True)
class Exclusions:
    """What claim-next must pass over: the teams left, and the tasks of paused trees
    and routines (ids, todo rows only)."""

    teams: list[str] | None
    task_ids: list[str]


def cap_exclusions(
    agent_id: str, teams: list[str] | None, admission: Admission | None = None
) -> Exclusions | None:
    """None when no cap budget holds anything back from this claim-next (with no cap
    budget: one look); else what to pass over -- what :func:`cap_refusal` would
    refuse. Raises :class:`BudgetPaused` when every scope the agent could take work
    from is held (the agent, or every one of its teams)."""
    admission = admission or Admission(turns=True)
    caps = _caps(teams, agent_id, admission)
    if not caps:
        return None
    at = now()
    holds = [h for h in (_hold(budget, at, admission) for budget in caps) if h is not None]
    if not holds:
        return None
    if any(hold.all is None for hold in holds) and _agent_ceiling(agent_id) is not None:
        # Every task has a ceiling for this agent: only what is held whole counts.
        holds = [hold for hold in holds if hold.all is not None]
    for hold in holds:
        budget = hold.budget
        if budget.scope == BudgetScope.AGENT and budget.scope_id == agent_id and hold.all:
            raise hold.all
    held_teams: dict[str, BudgetPaused] = {}
    for hold in holds:
        if hold.budget.scope == BudgetScope.TEAM and hold.all is not None:
            held_teams.setdefault(hold.budget.scope_id, hold.all)
    if teams is not None and held_teams:
        left = [team for team in teams if team not in held_teams]
        if not left:
            raise held_teams[teams[0]]
        teams = left
    excluded: list[str] = []
    for hold in holds:
        budget = hold.budget
        if budget.scope == BudgetScope.AGENT:
            if budget.scope_id != agent_id:
                continue  # another agent's runs: not this claim's
            todo = Task.objects.filter(status="todo")
            if teams is not None:
                todo = todo.filter(team_id__in=teams)
        elif budget.scope == BudgetScope.TEAM and hold.all is not None and teams is not None:
            continue  # its team is left out already
        else:
            todo = _scope_tasks(budget.scope, budget.scope_id).filter(status="todo")
        if hold.all is None:
            todo = todo.filter(max_run_cents__isnull=True)
        excluded += todo.values_list("id", flat=True)
    return Exclusions(teams, excluded)


def _tree_ids(root_id: str) -> list[str]:
    from board.store.deps import tree_ids

    return tree_ids(root_id)


# --- budgets ------------------------------------------------------------------------


def _scope_spend(scope: str, scope_id: str, since: dt.datetime) -> int:
    """What the scope's executions cost since ``since``, in millicents (a new
    budget's starting figure)."""
    runs = ExecutionProcess.objects.filter(started_at__gte=since)
    if scope == BudgetScope.TEAM:
        runs = runs.filter(task__team_id=scope_id)
    elif scope == BudgetScope.AGENT:
        runs = runs.filter(agent_id=scope_id)
    elif scope == BudgetScope.ROUTINE:
        runs = runs.filter(task__metadata__routine_id=scope_id)
    else:
        runs = runs.filter(task_id__in=_tree_ids(scope_id))
    return int(runs.aggregate(total=Sum("cost_millicents"))["total"] or 0)


def check_budget_fields(data: dict[str, Any], *, partial: bool) -> dict[str, Any]:
    """The budget's writable fields, checked (400 naming the field)."""
    clean: dict[str, Any] = {}
    choices = {
        "scope": BudgetScope.values,
        "window": BudgetWindow.values,
        "mode": BudgetMode.values,
    }
    for name, allowed in choices.items():
        if name in data or not partial:
            value = data.get(name, BudgetMode.WARN if name == "mode" else None)
            if value not in allowed:
                raise ValidationFailed(name, f"one of {', '.join(allowed)}")
            clean[name] = value
    if "scope_id" in data or not partial:
        value = data.get("scope_id")
        if not isinstance(value, str) or not value or len(value) > 128:
            raise ValidationFailed("scope_id", "the id of the team, agent, routine or task")
        clean["scope_id"] = value
    if "limit_cents" in data or not partial:
        clean["limit_cents"] = check_int(
            data.get("limit_cents"), "limit_cents", low=1, high=MAX_CENTS
        )
    return clean


def create_budget(team_id: str, fields: dict[str, Any]) -> Budget:
    """A budget over a scope of ``team_id`` (the caller resolved the scope's team)."""
    clean = check_budget_fields(fields, partial=False)

    def run() -> Budget:
        at = now()
        start = window_bounds(clean["window"], at)[0]
        spent = _scope_spend(clean["scope"], clean["scope_id"], start)
        budget = Budget(
            team_id=team_id,
            window_start=start,
            spent_millicents=spent,
            spent_cents=cents_of(spent),
            created_at=at,
            updated_at=at,
            **clean,
        )
        budget.save()
        _settle_state(budget, at)
        return budget

    return storage.write(run)


def _settle_state(budget: Budget, at: dt.datetime) -> None:
    """After a create or edit, the budget's pause follows its figures: a cap already
    spent pauses (and notifies) now; a lifted limit or a warn mode unpauses."""
    _notice_crossings(budget, at)
    allowance = budget.pause_at_cents if budget.pause_at_cents is not None else budget.limit_cents
    if budget.mode != BudgetMode.CAP or budget.spent_cents < allowance:
        budget.paused_until = None
    budget.updated_at = at
    budget.save()


def get_budget(budget_id: Any, teams: list[str] | None = None) -> Budget:
    """The budget, if it exists and (with ``teams``) belongs to one of them; else 404."""
    if isinstance(budget_id, bool) or not isinstance(budget_id, int | str):
        raise BudgetNotFound(str(budget_id))
    try:
        pk = int(budget_id)
    except ValueError:
        raise BudgetNotFound(str(budget_id)) from None
    qs = Budget.objects.filter(pk=pk)
    if teams is not None:
        qs = qs.filter(team_id__in=teams)
    budget = qs.first()
    if budget is None:
        raise BudgetNotFound(str(budget_id))
    return budget


def list_budgets(teams: list[str] | None = None, **filters: Any) -> list[Budget]:
    qs = Budget.objects.all()
    if teams is not None:
        qs = qs.filter(team_id__in=teams)
    return list(qs.filter(**filters))


def update_budget(budget_id: int, fields: dict[str, Any], team_id: str | None = None) -> Budget:
    """Change a budget's limit, mode, window or scope (``team_id``: the new scope's team)."""
    clean = check_budget_fields(fields, partial=True)

    def run() -> Budget:
        budget = Budget.objects.select_for_update().filter(pk=budget_id).first()
        if budget is None:
            raise BudgetNotFound(str(budget_id))
        at = now()
        rescoped = any(
            name in clean and clean[name] != getattr(budget, name)
            for name in ("scope", "scope_id", "window")
        )
        for name, value in clean.items():
            setattr(budget, name, value)
        if team_id is not None:
            budget.team_id = team_id
        if rescoped:
            start = window_bounds(budget.window, at)[0]
            budget.window_start = start
            budget.spent_millicents = _scope_spend(budget.scope, budget.scope_id, start)
            budget.spent_cents = cents_of(budget.spent_millicents)
            budget.pause_at_cents = None
            budget.grace_cents = None
            budget.warned = budget.exhausted = False
        else:
            _roll_window(budget, at)
        if "limit_cents" in clean:
            # A limit raised above the spend re-arms its crossings.
            spent, limit = budget.spent_cents, budget.limit_cents
            budget.warned = budget.warned and budget.warns_at(spent)
            budget.exhausted = budget.exhausted and spent >= limit
            budget.pause_at_cents = None
            budget.grace_cents = None
        _settle_state(budget, at)
        events.append(budget.team_id, "budget_changed", {"budget": budget.as_dict(at)})
        return budget

    return storage.write(run)


def delete_budget(budget_id: int) -> None:
    def run() -> None:
        budget = Budget.objects.filter(pk=budget_id).first()
        if budget is None:
            raise BudgetNotFound(str(budget_id))
        body = budget.as_dict(now())
        budget.delete()
        events.append(budget.team_id, "budget_deleted", {"budget": body})

    storage.write(run)


def resume_budget(budget_id: int, grace_cents: Any = None) -> Budget:
    """Lift a cap's pause; with ``grace_cents`` the scope may spend that much more in
    this window before it pauses again (without: until its next spend). The grace is
    counted from the limit or the spend, whichever is higher: resuming a cap not yet
    spent never lowers what it may spend below its limit."""
    grace = (
        0 if grace_cents is None else check_int(grace_cents, "grace_cents", low=1, high=MAX_CENTS)
    )

    def run() -> Budget:
        budget = Budget.objects.select_for_update().filter(pk=budget_id).first()
        if budget is None:
            raise BudgetNotFound(str(budget_id))
        at = now()
        _roll_window(budget, at)
        budget.paused_until = None
        budget.pause_at_cents = max(budget.spent_cents, budget.limit_cents) + grace
        budget.grace_cents = grace or None
        budget.updated_at = at
        budget.save()
        # Not quiet: idle workers wake to claim what the pause held back.
        events.append(budget.team_id, "budget_resumed", {"budget": budget.as_dict(at)})
        return budget

    return storage.write(run)


def run_ceiling(task: Task, agent_settings: dict[str, Any] | None) -> int | None:
    """The run's ceiling in cents: the task's ``max_run_cents``, else the agent's default
    (its settings' ``max_run_cents``), else None."""
    return _ceiling(task.max_run_cents, agent_settings)


def _ceiling(max_run_cents: int | None, agent_settings: Any) -> int | None:
    if max_run_cents is not None:
        return max_run_cents
    value = agent_settings.get("max_run_cents") if isinstance(agent_settings, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    return None


# --- usage: what was spent, per team and agent, by period ------------------------------


@dataclass(frozen=True)
class UsageReport:
    """Spend in cents per team and per agent for today, this week and this month (UTC;
    the week begins on Monday), with how many runs in each reported no cost
    (``unpriced``), and per day over the last ``days`` days."""

    teams: list[dict[str, Any]]
    agents: list[dict[str, Any]]
    daily: list[dict[str, Any]]


def usage_report(teams: list[str], at: dt.datetime, days: int = 30) -> UsageReport:
    """What the runs of ``teams`` cost, by when they started. Reads only."""
    today = window_bounds(BudgetWindow.DAY, at)[0]
    periods = {
        "today": today,
        "week": today - dt.timedelta(days=today.weekday()),
        "month": window_bounds(BudgetWindow.MONTH, at)[0],
    }
    first = today - dt.timedelta(days=days - 1)
    since = min(first, *periods.values())
    runs = list(
        ExecutionProcess.objects.filter(task__team_id__in=teams, started_at__gte=since).values_list(
            "task__team_id", "agent_id", "started_at", "cost_millicents", "cost_status"
        )
    )
    # Summed in millicents, then rounded: cheap runs add up.

    def rows(key: int, names: list[str]) -> list[dict[str, Any]]:
        out = []
        for name in names:
            mine = [r for r in runs if r[key] == name]
            figures = {
                period: cents_of(sum(r[3] for r in mine if r[2] >= start))
                for period, start in periods.items()
            }
            # Runs that priced nothing add 0 to the cents: counted apart, so a
            # figure over them does not read as "free" (the board says "cost unknown").
            unpriced = {
                period: sum(1 for r in mine if r[2] >= start and r[4] == CostStatus.UNKNOWN)
                for period, start in periods.items()
            }
            out.append({"id": name, **figures, "unpriced": unpriced})
        return out

    daily = []
    for n in range(days):
        start = first + dt.timedelta(days=n)
        end = start + dt.timedelta(days=1)
        cents = cents_of(sum(r[3] for r in runs if start <= r[2] < end))
        daily.append({"day": start.date().isoformat(), "cents": cents})
    agents = sorted({r[1] for r in runs if r[1]})
    return UsageReport(rows(0, sorted(teams)), rows(1, agents), daily)
