"""Claim tickets, write verdicts and write provenance (seed 001)."""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from django.core import signing
from django.db.models import F, Q

from board.errors import ClaimConflict
from board.models import Task
from board.transitions import HELD_BY_CLAIM, Status
from core.errors import ValidationFailed

# Signed by Django's signing (keyed by SECRET_KEY; its fallbacks still verify, so a
# key rotation does not void claims in flight), salted so no other signed value of
# the project passes for a ticket.
_SIGNER = signing.Signer(salt="clawboo.board.ticket")


DeclineReason = Literal[
    "immutable-assignee", "terminal", "not-my-task", "disallowed", "parked", "lost-claim"
]
# The contract's precedence: when several hold, the first in this order is reported.
DECLINE_PRECEDENCE: tuple[str, ...] = get_args(DeclineReason)


@dataclass(frozen=True)
class Ticket:
    """What a claim handed out: this task, this attempt, this incarnation.

    Signed (:data:`_SIGNER`), so a worker cannot mint one for a task it never claimed.
    """

    task_id: str
    attempt: int
    incarnation_id: str

    def encode(self) -> str:
        return _SIGNER.sign_object(
            [self.task_id, self.attempt, self.incarnation_id], compress=False
        )

    @classmethod
    def decode(cls, value: Any) -> Ticket:
        if isinstance(value, Ticket):
            return value
        if not isinstance(value, str) or not value:
            raise ValidationFailed("ticket", "must be the ticket string a claim returned")
        try:
            task_id, attempt, incarnation_id = _SIGNER.unsign_object(value)
            return cls(
                task_id=str(task_id), attempt=int(attempt), incarnation_id=str(incarnation_id)
            )
        except (signing.BadSignature, TypeError, ValueError, UnicodeError):
            raise ValidationFailed("ticket", "is not a ticket this server issued") from None

    @classmethod
    def for_task(cls, task: Task) -> Ticket:
        return cls(task_id=task.id, attempt=task.attempts, incarnation_id=task.incarnation_id)


def claim_standing(
    ticket: Ticket, task: Task, *, lapsed_at: dt.datetime | None = None
) -> Literal["not-my-task", "lost-claim"] | None:
    """Does ``ticket`` still hold ``task``? None when it does; else why not:
    ``not-my-task`` (another task, or an earlier incarnation of this id) or
    ``lost-claim`` (another attempt, a status no claim holds, or -- given
    ``lapsed_at`` -- an in_progress lease that ran out before it)."""
    if ticket.task_id != task.id or ticket.incarnation_id != task.incarnation_id:
        return "not-my-task"
    lapsed = (
        lapsed_at is not None
        and task.status == Status.IN_PROGRESS
        and task.lease_until is not None
        and task.lease_until < lapsed_at
    )
    if ticket.attempt != task.attempts or task.status not in HELD_BY_CLAIM or lapsed:
        return "lost-claim"
    return None


# A claim opens one run (SPEC §4, execution processes): a worker that re-asks, is
# restarted or fails to record its run's end does not open run after run on it. A
# new run is due under the same claim only when its work is sent back to it -- a fix
# round (``send_back_for_fix``) or its own resume from review -- which clears the
# mark. A new claim is a new attempt, so it is due by itself.
RUN_DUE = ~Q(run_opened_for=F("attempts"))


def run_due(task: Task) -> bool:
    """May the task's current claim open a run? (:data:`RUN_DUE`, on one row.)"""
    return task.run_opened_for != task.attempts


def run_opened(task: Task) -> set[str]:
    """Mark the claim's run opened (the caller saves the fields returned)."""
    task.run_opened_for = task.attempts
    return {"run_opened_for"}


def next_run_due(task: Task) -> set[str]:
    """The claim's work was sent back to it: its next run is due."""
    task.run_opened_for = None
    return {"run_opened_for"}


Outcome = Literal["recorded", "unchanged", "declined"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)


@dataclass(frozen=True)
class WriteOutcome:
    """``recorded`` | ``unchanged`` | ``declined`` (with reason and the status then)."""

    outcome: Outcome
    task: Task | None = None
    reason: str | None = None
    status: str | None = None
    # A hard fail's cascade: the pending dependents it cancelled, in order.
    cancelled: tuple[str, ...] = ()

    @property
    def recorded(self) -> bool:
        return self.outcome == "recorded"

    @property
    def declined(self) -> bool:
        return self.outcome == "declined"

    def raise_if_declined(self) -> Task:
        """The task written (or left as it was); a declined write raises 409
        ``conflict`` naming why and the status the task was in."""
        if self.declined:
            raise ClaimConflict(
                f"declined: {self.reason} (task is {self.status})",
                reason=self.reason,
                status=self.status,
            )
        assert self.task is not None
        return self.task

    def as_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"outcome": self.outcome}
        if self.declined:
            body["reason"] = self.reason
            body["status"] = self.status
        if self.cancelled:
            body["cancelled"] = list(self.cancelled)
        return body


def recorded(task: Task) -> WriteOutcome:
    return WriteOutcome("recorded", task)


def unchanged(task: Task) -> WriteOutcome:
    return WriteOutcome("unchanged", task)


def declined(task: Task, reason: str) -> WriteOutcome:
    assert reason in DECLINE_PRECEDENCE
    return WriteOutcome("declined", task, reason=reason, status=task.status)


@dataclass(frozen=True)
class WriteToken:
    """Minted before a write, so :func:`did_write_land` can answer after a failure."""

    id: str
    revision: int
    incarnation_id: str
    extra: dict[str, Any] = field(default_factory=dict)


def begin_write(task: Task) -> WriteToken:
    return WriteToken(
        id=secrets.token_hex(8), revision=task.revision, incarnation_id=task.incarnation_id
    )


def did_write_land(task: Task | None, token: WriteToken) -> bool | None:
    """True: the write committed. False: it changed nothing. None: cannot tell.

    None when the task is gone or was recreated under the same id (another
    incarnation), or when the receipt may have aged out of the last four.
    """
    if task is None or task.incarnation_id != token.incarnation_id:
        return None
    log = task.write_log or []
    if any(entry.get("id") == token.id for entry in log):
        return True
    if task.revision == token.revision:
        return False  # nothing at all was written since the token was minted
    if task.write_log_truncated:
        # Receipts have been dropped; if any dropped one could be newer than the
        # token, ours may have been among them.
        oldest = min((int(entry.get("revision", 0)) for entry in log), default=0)
        if oldest > token.revision:
            return None
    return False
