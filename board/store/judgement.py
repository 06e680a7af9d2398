"""The judge's writes: a verdict with its structure, a round sent back to the
builder, and the end of the fix loop (``completed_with_debt``, ``blocked``).

The shape of ``verification_detail`` is :mod:`board.judgement`'s; the executor's
judge (:mod:`executor.judge`) decides, these record. Each is one transaction with
one event, fenced by the builder's claim ticket where the claim matters.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from board import checks
from board.models import CostStatus, ExecutionProcess, Task, Verdict
from board.money import MILLICENTS_PER_CENT
from board.scope import scope_of_changes
from board.store._base import add_comment_row, commit_change, lock_task, now, set_fields
from board.store.claims import extend_lease
from board.store.executions import CLOSED, LOG_TAIL
from board.store.fields import EVIDENCE_TAIL
from board.store.lifecycle import _guards, _lifecycle
from board.store.spend import Usage, apply_usage
from board.store.tickets import (
    Ticket,
    WriteOutcome,
    claim_standing,
    declined,
    next_run_due,
    recorded,
)
from board.transitions import Status, is_terminal
from core import storage
from core.errors import Conflict

JUDGE = "verification"


def _check(verdict: str, evidence: str) -> str:
    checks.check_choice(verdict, "verdict", Verdict.values)
    return checks.check_storable(evidence[-EVIDENCE_TAIL:], "evidence")


def record_verification(
    task_id: str, verdict: str, evidence: str, detail: dict[str, Any], *, ticket: Any = None
) -> Task | None:
    """Store the verdict, its evidence and its structure (event
    ``verification_recorded``); refused (Conflict) once the task is done or cancelled.

    With the builder's claim ``ticket`` (the executor's judge), the write is fenced
    by it and renews the claim's lease -- the fence the landing passes before it
    moves git, in the verdict's own transaction: a claim lost or lapsed meanwhile
    records nothing, and the answer is None."""
    tail = _check(verdict, evidence)
    claim = None if ticket is None else Ticket.decode(ticket)

    def run() -> Task | None:
        task = lock_task(task_id)
        if is_terminal(task.status):
            raise Conflict(
                f"task {task_id!r} is {task.status}; its verdict is final", status=task.status
            )
        at = now()
        fields: set[str] = set()
        if claim is not None:
            if claim_standing(claim, task, lapsed_at=at) is not None:
                return None
            fields = extend_lease(task, at)
        fields |= set_fields(
            task,
            verdict=verdict,
            verdict_evidence=tail,
            verdict_at=at,
            verification_detail=detail,
        )
        return commit_change(
            task, "verification_recorded", prev_status=task.status, fields=fields, at=at
        )

    return storage.write(run)


def send_back_for_fix(
    task_id: str,
    ticket: Any,
    *,
    evidence: str,
    detail: dict[str, Any],
    feedback: str,
    lease_ms: int | None = None,
    changed_paths: list[str] | None = None,
) -> WriteOutcome:
    """One round of the fix loop: the task stays ``in_progress`` with its builder's
    claim (lease renewed), ``feedback`` says what to fix, the verdict is ``fail``
    with ``detail``. No execution of it is running afterwards, so the builder's
    executor starts the next round (``start_assigned``). Event ``fix_requested``;
    declines ``lost-claim`` when ``ticket`` no longer holds.

    A task without ``touches`` takes ``changed_paths`` (what the judged run
    changed) as its scope (:func:`board.scope.scope_of_changes`): while the fix
    round works, no claim starts a task of its repository that overlaps them."""
    claim = Ticket.decode(ticket)
    tail = _check(Verdict.FAIL, evidence)
    note = checks.check_text(feedback, "feedback", required=True)

    def run() -> WriteOutcome:
        task = lock_task(task_id)
        if task.status != Status.IN_PROGRESS or claim != Ticket.for_task(task):
            return declined(task, "lost-claim")
        at = now()
        span = lease_ms or task.lease_duration_ms or checks.DEFAULT_LEASE_MS
        fields = set_fields(
            task,
            verdict=Verdict.FAIL.value,
            verdict_evidence=tail,
            verdict_at=at,
            verification_detail=detail,
            feedback=note,
            lease_until=at + dt.timedelta(milliseconds=span),
        )
        fields |= next_run_due(task)  # the fix round is the claim's next run
        learned = None if task.touches else scope_of_changes(changed_paths or ())
        if learned is not None:
            fields |= set_fields(task, scope=learned)
        add_comment_row(task, JUDGE, f"Sent back to fix: {note}", at)
        commit_change(task, "fix_requested", prev_status=task.status, fields=fields, at=at)
        return recorded(task)

    return storage.write(run)


def settle_with_debt(
    task_id: str, ticket: Any, *, evidence: str, detail: dict[str, Any], notes: str
) -> WriteOutcome:
    """The fix loop is spent: ``in_progress → blocked`` with verdict
    ``completed_with_debt`` and the debt ``notes`` as its feedback, in one write (one
    event, so one notification: the task is blocked)."""
    tail = _check(Verdict.COMPLETED_WITH_DEBT, evidence)
    note = checks.check_text(notes, "notes", required=True)

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        return set_fields(
            task,
            verdict=Verdict.COMPLETED_WITH_DEBT.value,
            verdict_evidence=tail,
            verdict_at=at,
            verification_detail=detail,
            feedback=note,
        )

    return _lifecycle(
        task_id,
        target=Status.BLOCKED,
        sources=frozenset({Status.IN_PROGRESS}),
        guards=_guards(ticket, True, False),
        kind="blocked",
        mutate=mutate,
    )


def record_review_run(
    task_id: str,
    *,
    agent_id: str,
    runtime: str,
    started_at: dt.datetime,
    outcome: str,
    tokens_in: int = 0,
    tokens_out: int = 0,
    cost_cents: int = 0,
    cost_millicents: int | None = None,
    cost_status: str | None = None,
    git_before: str | None = None,
    exit_code: int | None = None,
    error: str | None = None,
    log: str = "",
    pid: int | None = None,
) -> ExecutionProcess:
    """Record a critic's finished run as an execution of the task (its agent and
    runtime), like any run: its usage counts where any run's does -- the task, its
    tree and every budget over it (the reviewer's own, the team's, the tree's), with
    their 80 %/100 % notices (``cost_status``: how it was known; by default
    ``reported`` when it cost anything). It opens no claim: the critic ran inside
    the builder's."""
    checks.check_choice(outcome, "outcome", sorted(CLOSED))
    millicents = cost_cents * MILLICENTS_PER_CENT if cost_millicents is None else cost_millicents
    usage = Usage(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_millicents=millicents,
        cost_status=cost_status or (CostStatus.REPORTED if millicents else CostStatus.UNKNOWN),
    ).check()

    def run() -> ExecutionProcess:
        task = lock_task(task_id)
        row = ExecutionProcess.objects.create(
            task=task,
            agent_id=agent_id,
            runtime=runtime,
            attempt=task.attempts,
            status=outcome,
            pid=pid,
            git_before=git_before,
            git_after=git_before,
            exit_code=exit_code,
            error=error,
            log=log[-LOG_TAIL:],
            started_at=started_at,
            finished_at=now(),
        )
        # Created at nothing, then its usage added as a usage report adds it: a
        # review's spend once reached the task alone, so no budget saw it and a
        # reviewer spent on past its own cap (and its team's).
        apply_usage(row, usage, now())
        return row

    return storage.write(run)
