"""Lifecycle verbs with write verdicts (seed 001): complete, fail, block, unblock,
await_review, resume_from_review, cancel, release — each ``recorded`` | ``unchanged``
| ``declined(reason, status)``, guarded by ``if_allowed``, a claim ticket and
``refuse_when_parked``, evaluated inside the write transaction."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from board import checks
from board.errors import IllegalTransition
from board.models import ExecutionProcess, ExecutionStatus, Task
from board.runs import NOT_COUNTED
from board.store._base import commit_change, lock_task, now, set_fields
from board.store.moves import HELD, ClaimFor, move
from board.store.tasks import check_bool, check_override, claim_for_agent
from board.store.tickets import (
    Ticket,
    WriteOutcome,
    WriteToken,
    claim_standing,
    declined,
    unchanged,
)
from board.transitions import (
    Status,
    allowed_transitions_from,
    is_terminal,
    is_transition_allowed,
)
from core import storage
from core.errors import ValidationFailed

# SPEC §10 ceilings (the agent create path; see create_task).
EVIDENCE_TAIL = checks.field_limit("evidence")
DEFAULT_TEAM = "default"


# --- lifecycle verbs with verdicts (seed 001) ----------------------------------


@dataclass(frozen=True)
class Guards:
    ticket: Ticket | None = None
    if_allowed: bool = False
    refuse_when_parked: bool = False


def _guards(ticket: Any, if_allowed: Any, refuse_when_parked: Any) -> Guards:
    return Guards(
        ticket=None if ticket is None else Ticket.decode(ticket),
        if_allowed=check_bool(if_allowed, "if_allowed"),
        refuse_when_parked=check_bool(refuse_when_parked, "refuse_when_parked"),
    )


def decline_reason(
    task: Task,
    *,
    target: str,
    sources: frozenset[str] | None,
    guards: Guards,
    at: dt.datetime,
    always_terminal: bool = False,
) -> str | None:
    """The first decline reason that holds, in the contract's precedence order.

    ``sources`` narrows a verb that owns one edge (``unblock`` only from blocked);
    None means "whatever the transition table allows".
    """
    status = task.status
    if (guards.if_allowed or always_terminal) and is_terminal(status):
        # Also for a repeat of the same settlement: it may not clobber the first.
        return "terminal"
    standing = None if guards.ticket is None else claim_standing(guards.ticket, task, lapsed_at=at)
    if standing == "not-my-task":
        return standing
    if guards.if_allowed and not _verb_allowed(status, target, sources):
        return "disallowed"
    if guards.refuse_when_parked and status == Status.IN_REVIEW:
        return "parked"
    return standing


def _verb_allowed(status: str, target: str, sources: frozenset[str] | None) -> bool:
    if sources is not None and status not in sources:
        return False
    return is_transition_allowed(status, target)


def _lifecycle(
    task_id: str,
    *,
    target: str | Callable[[Task], str],
    sources: frozenset[str] | None,
    guards: Guards,
    kind: str | Callable[[Task, str], str],
    mutate: Callable[[Task, dt.datetime], set[str]] | None = None,
    write: WriteToken | None = None,
    override: dict[str, str] | None = None,
    claim: ClaimFor | str | None = None,
    always_terminal: bool = False,
    after: Callable[[Task, str, dt.datetime], list[str] | None] | None = None,
) -> WriteOutcome:
    """One lifecycle verb: guards and declines, the verb's own edge, the move
    (:func:`board.store.moves.move`), the verb's fields, the event; then ``after``
    (closing runs, the cascade), whose returned ids are the cascade's cancellations."""

    def run() -> WriteOutcome:
        task = lock_task(task_id)
        at = now()
        to = target(task) if callable(target) else target
        reason = decline_reason(
            task, target=to, sources=sources, guards=guards, at=at, always_terminal=always_terminal
        )
        if reason is not None:
            return declined(task, reason)
        prev = task.status
        # A verb that owns one edge runs only from that edge's source (seed 001),
        # even when the target equals the current status: unblock on a todo task or
        # resume_from_review on an in_progress one is refused, not a silent no-op
        # (the latter used to push the lease out as if it were a renewal).
        if sources is not None and prev not in sources:
            raise IllegalTransition(task.id, prev, to, allowed_transitions_from(prev))
        if prev == to and is_terminal(prev):
            # A repeat of the settle that put it there: nothing to change, and the
            # first one's output and event stand.
            return unchanged(task)
        fields = move(task, to, at=at, override=override, claim=claim)
        if mutate is not None:
            fields |= mutate(task, at)
        if not fields:
            return unchanged(task)
        token = {"id": write.id} if write is not None else None
        event_kind = kind(task, prev) if callable(kind) else kind
        commit_change(task, event_kind, prev_status=prev, fields=fields, write_token=token, at=at)
        # After the task's own event, so a cascade is narrated after the failure.
        cancelled = after(task, prev, at) if after is not None else None
        return WriteOutcome("recorded", task, cancelled=tuple(cancelled or ()))

    return storage.write(run)


def complete(
    task_id: str,
    output: Any = None,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    human_override: Any = None,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """Settle a task ``done`` with ``output`` (passes the verification gate)."""
    output = checks.check_storable(output, "output")
    guards = _guards(ticket, if_allowed, refuse_when_parked)
    override = check_override(human_override)

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        return set_fields(task, output=output, lease_until=None)

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "succeeded", None, at)

    return _lifecycle(
        task_id,
        target=Status.DONE,
        sources=frozenset({Status.IN_PROGRESS, Status.IN_REVIEW, Status.DONE}),
        guards=guards,
        kind="completed",
        mutate=mutate,
        write=write,
        override=override,
        after=after,
    )


def _close_run(task: Task, prev: str, outcome: str, error: str | None, at: dt.datetime) -> None:
    from board.store.executions import close_run_leaving

    close_run_leaving(task, prev, outcome, error=error, at=at)


def fail(
    task_id: str,
    error: Any,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
    retry: bool = False,
) -> WriteOutcome:
    """Soft fail (``attempts < max_attempts``, from in_progress) → ``todo`` with the
    error as feedback; otherwise hard fail → ``blocked`` with ``error`` set and the
    pending transitive dependents cancelled: their ids are the outcome's
    ``cancelled``, and their events follow the failure's.

    ``retry``: the failure is the agent's, not the task's (its breaker counts it):
    soft unless the task set a ``max_attempts`` it has used up, so a broken agent
    leaves the queue as it found it instead of blocking it task by task."""
    message = checks.check_text(error, "error", required=True)
    guards = _guards(ticket, if_allowed, refuse_when_parked)

    failing: list[int] = []  # set when the failure is the task's own (failing_alone)

    def soft(task: Task) -> bool:
        if task.status != Status.IN_PROGRESS:
            return False
        if task.max_attempts is None:
            if retry and (runs := failing_alone(task)):
                failing.append(runs)
                return False
            return retry
        return task.attempts < task.max_attempts

    def target(task: Task) -> str:
        return Status.TODO if soft(task) else Status.BLOCKED

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        if task.status == Status.TODO:
            return set_fields(task, feedback=message)
        if failing:
            return set_fields(
                task,
                error=f"{message}\n(its last {failing[0]} runs failed while its agent "
                "worked on other tasks: the failure is the task's; a person decides)",
            )
        return set_fields(task, error=message)

    def after(task: Task, prev: str, at: dt.datetime) -> list[str]:
        _close_run(task, prev, "failed", message, at)
        if task.status != Status.BLOCKED:
            return []
        from board.store.deps import cascade_cancel

        return [t.id for t in cascade_cancel(task.id, at=at)]

    return _lifecycle(
        task_id,
        target=target,
        sources=frozenset({Status.IN_PROGRESS, Status.IN_REVIEW}),
        guards=guards,
        kind=lambda task, prev: "retried" if task.status == Status.TODO else "errored",
        mutate=mutate,
        write=write,
        after=after,
    )


_FAILED_RUNS = (ExecutionStatus.FAILED, ExecutionStatus.TIMED_OUT)


def failed_for_its_agent(task_id: str) -> bool:
    """Whether the run of the task's current attempt ended (closed already) failed for
    a reason its agent's breaker counts: a fail that follows is the agent's, not the
    task's -- ``fail``'s ``retry``, as a local run's settlement passes it. What a
    remote worker's fail (``POST …/fail`` after ``…/close``) is told by."""
    attempt = Task.objects.filter(pk=task_id).values_list("attempts", flat=True).first()
    if attempt is None:
        return False
    row = (
        ExecutionProcess.objects.filter(task_id=task_id, attempt=attempt)
        .order_by("-id")
        .values_list("status", "error_class")
        .first()
    )
    return row is not None and row[0] in _FAILED_RUNS and bool(row[1]) and row[1] not in NOT_COUNTED


def failing_alone(task: Task) -> int | None:
    """Whether a failure the breaker counts is the task's own, not its agent's: its
    last ``CLAWBOO_BREAKER_FAILURES`` runs all failed so (the run failing now is
    closed already), and an agent that ran them succeeded at other work since the
    first of them -- so the agent works, and its breaker, which that success reset,
    will never stop the task coming back. Returns how many runs, or None. (A broken
    agent fails everything it takes: its breaker pauses it, the task goes back to
    ``todo``.)"""
    limit = int(settings.CLAWBOO_BREAKER_FAILURES)
    last = list(
        ExecutionProcess.objects.filter(task_id=task.id)
        .order_by("-id")
        .values_list("id", "agent_id", "status", "error_class")[:limit]
    )
    if len(last) < limit or any(
        status not in _FAILED_RUNS or not error_class or error_class in NOT_COUNTED
        for _, _, status, error_class in last
    ):
        return None
    worked_since = (
        ExecutionProcess.objects.filter(
            agent_id__in={agent for _, agent, _, _ in last},
            status=ExecutionStatus.SUCCEEDED,
            id__gt=last[-1][0],
        )
        .exclude(task_id=task.id)
        .exists()
    )
    return limit if worked_since else None


def block(
    task_id: str,
    reason: Any = None,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    note = checks.check_text(reason, "reason") or None

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        return set_fields(task, feedback=note) if note else set()

    return _lifecycle(
        task_id,
        target=Status.BLOCKED,
        sources=None,
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="blocked",
        mutate=mutate,
        write=write,
    )


def unblock(
    task_id: str,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """blocked → todo; refuses every other status (raises, or declines ``disallowed``)."""
    return _lifecycle(
        task_id,
        target=Status.TODO,
        sources=frozenset({Status.BLOCKED}),
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="unblocked",
        write=write,
    )


def await_review(
    task_id: str,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """in_progress → in_review: park the task for a person; its lease stops mattering."""
    return _lifecycle(
        task_id,
        target=Status.IN_REVIEW,
        sources=frozenset({Status.IN_PROGRESS}),
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="review_requested",
        write=write,
    )


def resume_from_review(
    task_id: str,
    feedback: Any = None,
    *,
    ticket: Any = None,
    agent_id: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """in_review → in_progress with optional feedback. With the claim's ``ticket``
    the agent resumes its own claim on a fresh lease of its span; with ``agent_id``
    (a person sending it back) a new claim is taken for that agent; with neither it
    is refused (:class:`~board.errors.ClaimRequired`)."""
    note = checks.check_text(feedback, "feedback") or None
    if ticket is not None and agent_id is not None:
        raise ValidationFailed("agent_id", "give a ticket or an agent_id, not both")
    claim: ClaimFor | str | None = HELD if ticket is not None else None
    if agent_id is not None:
        claim = claim_for_agent(agent_id)

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        return set_fields(task, feedback=note) if note else set()

    return _lifecycle(
        task_id,
        target=Status.IN_PROGRESS,
        sources=frozenset({Status.IN_REVIEW}),
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="resumed",
        mutate=mutate,
        write=write,
        claim=claim,
    )


def cancel(
    task_id: str,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """Cancel; always advisory on a settled task (declines ``terminal``)."""

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "cancelled", "cancelled", at)

    return _lifecycle(
        task_id,
        target=Status.CANCELLED,
        sources=None,
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="cancelled",
        write=write,
        always_terminal=True,
        after=after,
    )


def release(task_id: str, *, ticket: Any = None, write: WriteToken | None = None) -> WriteOutcome:
    """in_progress → todo: clears assignee, runtime, lease and verdict for a re-claim."""

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "cancelled", "released", at)

    return _lifecycle(
        task_id,
        target=Status.TODO,
        sources=frozenset({Status.IN_PROGRESS}),
        guards=_guards(ticket, False, False),
        kind="released",
        write=write,
        after=after,
    )


def stop_for_spend(task_id: str, why: str, *, ticket: Any, at_ceiling: bool) -> WriteOutcome:
    """After a run stopped for spend was closed (GOVERNANCE §3): the task's next status.

    At its own ceiling (``max_run_cents``) the task is ``blocked`` with ``why`` as its
    error -- not cascading: its dependents wait for a person, who raises the ceiling
    (or splits the task) and moves it back to ``todo``; it is never retried by itself.
    Stopped by a paused cap budget, it goes back to ``todo``: the pause holds every
    claim of it until a person resumes the budget. Either way the comment and one
    event of kind ``budget_stopped`` (the move's own event, so the one notification:
    no second ``blocked`` one). Declined (nothing written) when ``ticket`` no longer
    holds the task."""
    note = checks.check_text(why, "error", required=True)

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        from board.store._base import add_comment_row

        add_comment_row(task, "clawboo", note, at)
        return set_fields(task, error=note) if task.status == Status.BLOCKED else set()

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "cancelled", note, at)

    return _lifecycle(
        task_id,
        target=Status.BLOCKED if at_ceiling else Status.TODO,
        sources=frozenset({Status.IN_PROGRESS}),
        guards=_guards(ticket, False, False),
        kind="budget_stopped",
        mutate=mutate,
        after=after,
    )
