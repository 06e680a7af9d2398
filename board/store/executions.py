"""The execution ledger: one ``execution_processes`` row per run of a task."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import QuerySet, Value
from django.db.models.functions import Length, Right

from board import traces
from board.errors import ClaimConflict, TaskNotFound
from board.models import CostStatus, ExecutionProcess, ExecutionStatus, Task
from board.store import spend
from board.store._base import lock_task, now
from board.store.tickets import RUN_DUE, Ticket, claim_standing, run_due, run_opened
from board.transitions import Status
from core import registry, storage
from core.checks import check_choice, field_limit
from core.errors import NotFound, ValidationFailed

LOG_TAIL = field_limit("run.log")
CLOSED = frozenset(
    {
        ExecutionStatus.SUCCEEDED,
        ExecutionStatus.FAILED,
        ExecutionStatus.TIMED_OUT,
        ExecutionStatus.CANCELLED,
    }
)


def open_execution(
    task_id: str,
    ticket: Any,
    *,
    runtime: str | None = None,
    pid: int | None = None,
    git_before: str | None = None,
) -> ExecutionProcess:
    """Open a ``running`` row for the claim the ticket names.

    Only after a successful claim: the ticket must be this task's current attempt,
    still held (in_progress / in_review), no run of the task may be open already,
    and the claim may not have had its run (:func:`~board.store.tickets.run_due`:
    one run a claim, the next only for a fix round); otherwise :class:`ClaimConflict`
    is raised.
    """
    claim = Ticket.decode(ticket)

    def run() -> ExecutionProcess:
        task = lock_task(task_id)
        if claim_standing(claim, task) is not None:
            raise ClaimConflict(f"no live claim on task {task_id!r} for this ticket")
        return _open(task, runtime=runtime, pid=pid, git_before=git_before)

    return storage.write(run)


def _open(
    task: Task,
    *,
    runtime: str | None,
    pid: int | None,
    git_before: str | None,
    live_since: dt.datetime | None = None,
) -> ExecutionProcess:
    """``live_since``: when the caller's transaction already stamped the task's
    ``updated_at`` (a claim taken in it)."""
    if ExecutionProcess.objects.filter(task_id=task.id, status=ExecutionStatus.RUNNING).exists():
        raise ClaimConflict(f"task {task.id!r} already has a running execution")
    if not run_due(task):
        raise ClaimConflict(
            f"the claim on task {task.id!r} already had its run (attempt {task.attempts}); "
            "a new run is due with a fix round or a new claim"
        )
    at = live_since or now()
    run_opened(task)
    if live_since is None:
        # Liveness starts now: the stale sweep reads tasks.updated_at.
        Task.objects.filter(pk=task.id).update(updated_at=at, run_opened_for=task.run_opened_for)
    else:
        Task.objects.filter(pk=task.id).update(run_opened_for=task.run_opened_for)
    return ExecutionProcess.objects.create(
        task=task,
        agent_id=task.assignee_agent_id or "",
        runtime=runtime or task.assignee_runtime,
        attempt=task.attempts,
        pid=pid,
        git_before=git_before,
        started_at=at,
    )


def start_claimed(task: Task, *, runtime: str | None, pid: int | None) -> ExecutionProcess | None:
    """Open the ``running`` row of the claim on ``task`` the caller's transaction just
    took, so an executor's claim and the start of its run are one commit; None when
    a run of the task is open already (:func:`open_execution` then refuses it)."""
    try:
        return _open(task, runtime=runtime, pid=pid, git_before=None, live_since=task.updated_at)
    except ClaimConflict:
        return None


@dataclass(frozen=True)
class Started:
    """A claim someone took for an agent, now being run by that agent's executor."""

    task: Task
    ticket: str
    execution: ExecutionProcess


def start_assigned(
    agent_id: str, *, team: str | None = None, runtime: str | None = None, pid: int | None = None
) -> Started | None:
    """Start the oldest claim a person took for ``agent_id`` that nobody runs yet.

    A move into ``in_progress`` by a person (resuming a blocked task for an agent,
    a reviewer requesting changes) takes a claim for a named agent; this is how that
    agent's executor picks it up: an ``in_progress`` task assigned to it, lease
    live, with no running execution and a run due (its claim has not had its run,
    or a fix round sent it back). The execution row is opened in the same
    transaction, so of two executors of one agent only one starts it. Returns the
    task, its claim's ticket and the execution, or None.
    """

    qs = (
        Task.objects.filter(
            status=Status.IN_PROGRESS, assignee_agent_id=agent_id, lease_until__gte=now()
        )
        .filter(RUN_DUE)
        .exclude(executions__status=ExecutionStatus.RUNNING)
    )
    if team is not None:
        qs = qs.filter(team_id=team)
    # Read first, outside any transaction: an executor asks before every claim, and
    # the answer is nearly always "none" -- which must not take the write lock.
    candidates = list(qs.order_by("updated_at", "id").values_list("id", flat=True)[:5])
    if not candidates:
        return None

    def run() -> Started | None:
        at = now()
        for candidate in candidates:
            try:
                task = lock_task(candidate)
            except TaskNotFound:
                continue  # deleted since it was read
            if (
                task.status != Status.IN_PROGRESS
                or task.assignee_agent_id != agent_id
                or task.lease_until is None
                or task.lease_until < at
            ):
                continue
            try:
                execution = _open(task, runtime=runtime, pid=pid, git_before=None)
            except ClaimConflict:
                continue
            return Started(task, Ticket.for_task(task).encode(), execution)
        return None

    return storage.write(run)


def close_execution(
    execution_id: int,
    outcome: str,
    *,
    tokens_in: int = 0,
    tokens_out: int = 0,
    cost_cents: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    cost_status: str | None = None,
    cost_millicents: int | None = None,
    error_class: str | None = "",
    git_before: str | None = None,
    git_after: str | None = None,
    exit_code: int | None = None,
    error: str | None = None,
    log: str | None = None,
    native_session_id: str | None = None,
    final_usage: bool = True,
    remote: bool = False,
) -> ExecutionProcess:
    """Close a running row with its outcome and its final usage, which replaces what
    the run streamed (:mod:`board.store.spend` adds the difference to the task, its
    tree and the budgets over it).

    ``final_usage`` False: the run ended without its totals (its claim was lost, or
    its executor failed around it), so what it streamed stands -- the spend it
    reported was spent, and a budget it paused stays paused over that figure.
    ``remote``: the final figures are a remote worker's, which never lower a price
    the run's own reports gave (:meth:`board.store.spend.Usage.as_final`).

    ``cost_status`` None: ``reported`` when a cost is given, else ``unknown``.
    ``cost_millicents``, when given, is the cost of record (``cost_cents`` its rounding).
    Closing an already-closed row changes nothing (a recovery pass may have got
    there first) and returns it as it stands.
    """
    check_choice(outcome, "outcome", sorted(CLOSED))
    error_class = error_class or ""
    if not isinstance(error_class, str) or len(error_class) > 32:
        raise ValidationFailed("error_class", "a short error class")
    usage = spend.Usage(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cache_read=cache_read,
        cache_write=cache_write,
        cost_cents=cost_cents,
        cost_millicents=cost_millicents,
        cost_status=cost_status
        or (CostStatus.REPORTED if cost_cents or cost_millicents else CostStatus.UNKNOWN),
    ).check()

    def run() -> ExecutionProcess:
        row = spend.lock_execution(execution_id)
        if row is None:
            raise NotFound(f"execution {execution_id} does not exist")
        if row.status != ExecutionStatus.RUNNING:
            return row
        at = now()
        if final_usage:
            spend.apply_usage(row, usage.as_final(row, remote=remote), at)
        row.status = outcome
        row.finished_at = at
        row.error_class = error_class
        if git_before is not None and row.git_before is None:
            # Opened before its checkout existed: stamp where the work began.
            row.git_before = git_before
        row.git_after = git_after
        row.exit_code = exit_code
        row.error = error
        if log is not None:
            row.log = log[-LOG_TAIL:]
        if native_session_id is not None:
            row.native_session_id = native_session_id
        row.save()
        transaction.on_commit(lambda: traces.export_run(row.id))
        return row

    return storage.write(run)


def close_running(
    task: Task,
    outcome: str,
    *,
    error: str | None,
    at: dt.datetime,
    tombstone: str | None = None,
) -> int:
    """Close the task's running executions in the caller's transaction."""
    values: dict[str, Any] = {"status": outcome, "finished_at": at, "error": error}
    if tombstone is not None:
        values["recovery_tombstone"] = tombstone
    running = ExecutionProcess.objects.filter(task_id=task.id, status=ExecutionStatus.RUNNING)
    if traces.otel.enabled():  # the runs' spans, once closed (no query when export is off)
        for execution_id in running.values_list("id", flat=True):
            transaction.on_commit(functools.partial(traces.export_run, execution_id))
    return running.update(**values)


def close_run_leaving(
    task: Task, prev: str, outcome: str, *, error: str | None, at: dt.datetime
) -> int:
    """The rule of every road out of ``in_progress``: the run working the task is
    closed with ``outcome``, in the caller's transaction (after its move). Any other
    move closes nothing."""
    if prev != Status.IN_PROGRESS or task.status == Status.IN_PROGRESS:
        return 0
    return close_running(task, outcome, error=error, at=at)


def claimed_execution(
    task_id: str, execution_id: Any, ticket: Any, *, running: bool = True
) -> ExecutionProcess:
    """The execution ``execution_id`` of ``task_id``, if ``ticket`` is the claim it
    runs under: the ticket names this task (this incarnation) and the row's attempt.
    A remote worker reports its run's usage, log and end through this check.

    Another task's (or no) execution: :class:`NotFound`. A ticket of another claim,
    or -- with ``running`` -- a run already closed (the task was cancelled, its lease
    lapsed, a recovery pass closed it): :class:`ClaimConflict`."""
    claim = Ticket.decode(ticket)
    if isinstance(execution_id, bool) or not isinstance(execution_id, int):
        raise NotFound(f"task {task_id!r} has no execution {execution_id!r}")
    row = ExecutionProcess.objects.filter(pk=execution_id, task_id=task_id).first()
    if row is None:
        raise NotFound(f"task {task_id!r} has no execution {execution_id}")
    incarnation = Task.objects.filter(pk=task_id).values_list("incarnation_id", flat=True).first()
    if (
        claim.task_id != task_id
        or claim.incarnation_id != incarnation
        or claim.attempt != row.attempt
    ):
        raise ClaimConflict(
            f"the ticket is not the claim execution {execution_id} runs under",
            reason="not-my-task",
        )
    if running and row.status != ExecutionStatus.RUNNING:
        raise ClaimConflict(
            f"execution {execution_id} is closed ({row.status})", reason="lost-claim"
        )
    return row


def list_executions(task_id: str) -> QuerySet[ExecutionProcess]:
    return ExecutionProcess.objects.filter(task_id=task_id).order_by("-started_at", "-id")


def numbered_executions(
    task_id: str, *, log_chars: int | None = None
) -> list[tuple[int, ExecutionProcess]]:
    """The task's runs, newest first, each with its number on the task (1: its first
    run). The one numbering the board, the admin and the API show: ``attempt`` stays
    the claim's count, which a fix round does not raise.

    No row's ``log`` is read. With ``log_chars``, each row carries ``log_end``, the
    log's last ``log_chars`` characters, and ``log_length``, cut and counted in the
    database: a panel showing a few lines of each run read every log whole."""
    rows = list_executions(task_id).defer("log")
    if log_chars is not None:
        # SQLite's SUBSTR(log, -0) is the whole log: none asked for, none read.
        end = Right("log", log_chars) if log_chars > 0 else Value("")
        rows = rows.annotate(log_end=end, log_length=Length("log"))
    found = list(rows)
    return [(len(found) - i, row) for i, row in enumerate(found)]


def ran_session(task_id: str, session_id: str) -> bool:
    """Whether a run of ``task_id`` recorded ``session_id`` as its native session (its
    execution's ``native_session_id``): the sessions a next run of it may resume."""
    return ExecutionProcess.objects.filter(task_id=task_id, native_session_id=session_id).exists()


def running_execution(task_id: str) -> ExecutionProcess | None:
    return (
        ExecutionProcess.objects.filter(task_id=task_id, status=ExecutionStatus.RUNNING)
        .order_by("-started_at")
        .first()
    )


def count_for_breaker(agent_id: str, execution_id: int | None, *, failed: bool) -> tuple[int, bool]:
    """Count the run ``execution_id`` for ``agent_id``'s breaker, at most once: the
    count after it and True; or, for a run counted already (the executor failed
    after counting it, and its crash path asks again), the count as it stands and
    False. A run with no row (``execution_id`` None, or gone) is counted. The mark
    and the count are one write."""

    def run() -> tuple[int, bool]:
        if execution_id is not None:
            marked = ExecutionProcess.objects.filter(pk=execution_id, breaker_counted=False).update(
                breaker_counted=True
            )
            if not marked and ExecutionProcess.objects.filter(pk=execution_id).exists():
                return registry.breaker_count(agent_id), False
        return registry.count_run(agent_id, failed=failed), True

    return storage.write(run)
