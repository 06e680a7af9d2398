"""A remote worker's pushed work, handed to the server to take in (the board's side).

A remote worker (``clawboo worker``) runs a file-mutating task on its own host and
pushes the branch ``clawboo/task-<id>`` to the repository's remote. It then
*submits* the task: :func:`submit` records the branch and commit in the task's
``output`` with ``intake.state = "pending"``, keeps the claim (the lease is pushed
out to cover the intake) and leaves the task ``in_progress``. The server's intake
(:mod:`executor.intake`) fetches the branch, judges it and moves the task on;
:func:`set_intake_state` records where it got. A pending intake is found again by
:func:`pending_intakes` (the claim it was submitted under still holding), so an
intake killed half-way is simply run again.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from board import checks
from board.models import Task
from board.store._base import add_comment_row, commit_change, lock_task, now, set_fields
from board.store.tickets import (
    Ticket,
    WriteOutcome,
    claim_standing,
    declined,
    next_run_due,
    recorded,
)
from board.transitions import Status
from core import storage

PENDING = "pending"
# Where an intake ended: the task went to review (or done, nothing to review), back
# to its builder to fix, back to it to bring its branch up to date (``rebase``: the
# work no longer merges onto its base), blocked with its debt or once its rebase
# rounds were spent (``blocked``), failed, or its claim was lost.
ENDED = frozenset({"review", "fix", "rebase", "debt", "blocked", "failed", "lost"})
# Who the intake's own board writes are by (the comment of a round sent back).
INTAKE_ACTOR = "intake"


def intake_of(task: Task) -> dict[str, Any] | None:
    """The task's intake record (``output.intake``), or None."""
    output = task.output if isinstance(task.output, dict) else {}
    intake = output.get("intake")
    return intake if isinstance(intake, dict) else None


def is_pending(task: Task) -> bool:
    """An intake waits for this task: submitted under the claim that still holds it."""
    intake = intake_of(task)
    return (
        intake is not None
        and intake.get("state") == PENDING
        and task.status == Status.IN_PROGRESS
        and intake.get("attempt") == task.attempts
    )


def submit(
    task_id: str, ticket: Any, output: dict[str, Any], *, intake_lease_ms: int
) -> WriteOutcome:
    """Record a remote worker's pushed work for the server to take in, fenced by the
    claim's ``ticket``: ``output`` (branch, commit, the run's summary) with
    ``intake: {state: pending, attempt, lease_ms}``, the lease pushed out by
    ``intake_lease_ms`` so the claim outlives the wait for the intake. The task
    stays ``in_progress``. Event ``work_submitted``. Declines ``lost-claim`` /
    ``not-my-task`` when the ticket no longer holds; a repeat of the same
    submission is ``unchanged``. The rebase rounds the claim had so far
    (``rebases``, :func:`send_back_to_rebase`) carry over to its next submission."""
    claim = Ticket.decode(ticket)
    stored = checks.check_storable(output, "output")
    span = checks.check_lease_ms(intake_lease_ms)

    def run() -> WriteOutcome:
        task = lock_task(task_id)
        at = now()
        lost = claim_standing(claim, task, lapsed_at=at)
        if lost is None and task.status != Status.IN_PROGRESS:
            lost = "lost-claim"  # in review already: its intake ran
        if lost is not None:
            return declined(task, lost)
        previous = intake_of(task)
        if (
            is_pending(task)
            and previous is not None
            and (task.output or {}).get("commit") == stored.get("commit")
        ):
            return WriteOutcome("unchanged", task)
        rebases = int((previous or {}).get("rebases") or 0)
        if (previous or {}).get("attempt") != task.attempts:
            rebases = 0  # another claim's rounds
        intake = {
            "state": PENDING,
            "attempt": task.attempts,
            "rebases": rebases,
            "submitted_at": at.isoformat(),
            # The claim's own span, given back to it when the intake sends the task
            # back to its builder (the intake's longer span is only for the wait).
            "lease_ms": task.lease_duration_ms or checks.DEFAULT_LEASE_MS,
        }
        fields = set_fields(task, output={**stored, "intake": intake})
        task.lease_until = at + dt.timedelta(milliseconds=span)
        task.lease_duration_ms = span
        fields |= {"lease_until", "lease_duration_ms"}
        commit_change(task, "work_submitted", prev_status=task.status, fields=fields, at=at)
        return recorded(task)

    return storage.write(run)


def start_intake(task_id: str) -> int:
    """Count one more start of the task's pending intake (``starts`` on
    ``output.intake``, begun afresh by each submission) and return it: 0 when no
    intake is pending. One write, before the intake's work, so a start that dies
    half-way is counted all the same."""

    def run() -> int:
        task = lock_task(task_id)
        intake = intake_of(task)
        if intake is None or not is_pending(task):
            return 0
        starts = int(intake.get("starts") or 0) + 1
        output = {**(task.output or {}), "intake": {**intake, "starts": starts}}
        fields = set_fields(task, output=output)
        commit_change(task, "metadata_changed", prev_status=task.status, fields=fields, at=now())
        return starts

    return storage.write(run)


def set_intake_state(task_id: str, state: str, detail: str | None = None) -> Task:
    """Record where the task's intake ended (one of :data:`ENDED`) on ``output.intake``."""
    if state not in ENDED:
        raise ValueError(f"unknown intake state {state!r}")

    def run() -> Task:
        task = lock_task(task_id)
        at = now()
        fields = end_intake(task, state, at, detail)
        if not fields:
            return task
        return commit_change(
            task, "metadata_changed", prev_status=task.status, fields=fields, at=at
        )

    return storage.write(run)


def end_intake(task: Task, state: str, at: dt.datetime, detail: str | None = None) -> set[str]:
    """Set the (locked) task's intake record to ended ``state`` in the caller's
    transaction, returning the fields changed (none when it has no record, or it
    ended so already). The landing's own move calls it for a pending intake
    (:func:`board.store.workspaces.settle_from_worktree`), so a landed intake is
    never pending again: a recovery pass after a landing has nothing to run."""
    intake = intake_of(task)
    if intake is None or (intake.get("state") == state and not detail):
        return set()
    changed = {**intake, "state": state, "ended_at": at.isoformat()}
    if detail:
        changed["detail"] = detail[: checks.TEXT_MAX]
    return set_fields(task, output={**(task.output or {}), "intake": changed})


def send_back_to_rebase(
    task_id: str, ticket: Any, feedback: str, *, conflicts: list[str], lease_ms: int | None
) -> WriteOutcome:
    """The submitted work does not merge onto its base: a rebase round for its
    builder, under the claim it submitted with (fenced by ``ticket``). The task stays
    ``in_progress``, ``feedback`` (the conflicting paths, how to bring the branch up
    to date) is its feedback and a comment, the lease goes back to the claim's own
    span (``lease_ms``), its next run is due, and the intake record ends ``rebase``
    with ``conflicts`` and one more of its ``rebases``. One write; event
    ``fix_requested``. Declines ``lost-claim`` when the ticket no longer holds."""
    claim = Ticket.decode(ticket)
    note = checks.check_text(feedback, "feedback", required=True)

    def run() -> WriteOutcome:
        task = lock_task(task_id)
        intake = intake_of(task)
        if task.status != Status.IN_PROGRESS or claim != Ticket.for_task(task) or intake is None:
            return declined(task, "lost-claim")
        at = now()
        span = lease_ms or task.lease_duration_ms or checks.DEFAULT_LEASE_MS
        record = {
            **intake,
            "state": "rebase",
            "ended_at": at.isoformat(),
            "conflicts": list(conflicts),
            "rebases": int(intake.get("rebases") or 0) + 1,
        }
        fields = set_fields(
            task,
            feedback=note,
            output={**(task.output or {}), "intake": record},
            lease_until=at + dt.timedelta(milliseconds=span),
            lease_duration_ms=span,
        )
        fields |= next_run_due(task)  # the rebase round is the claim's next run
        add_comment_row(task, INTAKE_ACTOR, f"Sent back to bring its branch up to date: {note}", at)
        commit_change(task, "fix_requested", prev_status=task.status, fields=fields, at=at)
        return recorded(task)

    return storage.write(run)


def pending_intakes(older_than_s: float = 0.0) -> list[str]:
    """Tasks whose intake is pending (submitted at least ``older_than_s`` ago),
    oldest first: what a recovery pass runs again."""
    cutoff = now() - dt.timedelta(seconds=older_than_s)
    rows = Task.objects.filter(status=Status.IN_PROGRESS, output__intake__state=PENDING).order_by(
        "updated_at", "id"
    )
    found = []
    for task in rows:
        intake = intake_of(task) or {}
        try:
            at = dt.datetime.fromisoformat(str(intake.get("submitted_at")))
        except ValueError:
            at = cutoff
        if is_pending(task) and at <= cutoff:
            found.append(task.id)
    return found
