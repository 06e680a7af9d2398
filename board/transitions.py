"""The board's status set and its transition table, declared once.

The data layer enforces it inside the write transaction; the API, the admin's
status field and the board page's status menu all derive from this module.
"""

from __future__ import annotations

from django.db import models


class Status(models.TextChoices):
    BACKLOG = "backlog"
    TODO = "todo"
    IN_PROGRESS = "in_progress"
    IN_REVIEW = "in_review"
    BLOCKED = "blocked"
    DONE = "done"
    CANCELLED = "cancelled"


TRANSITIONS: dict[str, tuple[str, ...]] = {
    Status.BACKLOG: (Status.TODO, Status.BLOCKED, Status.CANCELLED),
    Status.TODO: (Status.IN_PROGRESS, Status.BLOCKED, Status.BACKLOG, Status.CANCELLED),
    Status.IN_PROGRESS: (
        Status.IN_REVIEW,
        Status.DONE,
        Status.BLOCKED,
        Status.TODO,
        Status.CANCELLED,
    ),
    Status.IN_REVIEW: (Status.DONE, Status.IN_PROGRESS, Status.BLOCKED, Status.CANCELLED),
    Status.BLOCKED: (Status.TODO, Status.IN_PROGRESS, Status.BACKLOG, Status.CANCELLED),
    Status.DONE: (),
    Status.CANCELLED: (),
}

TERMINAL: frozenset[str] = frozenset({Status.DONE, Status.CANCELLED})
# Actively owned: the assignee must not be reassigned while a task sits here.
LOCKED: frozenset[str] = frozenset({Status.IN_PROGRESS, Status.IN_REVIEW})
# Statuses a claim attempt still holds (seed 001): writes fenced by its ticket.
HELD_BY_CLAIM: frozenset[str] = LOCKED

# Seed 001 (flow-state-dev) vocabulary → the board's. "errored" parks as blocked
# with ``error`` set (SPEC §4).
SUBSTRATE_STATUS_MAP: dict[str, str] = {
    "pending": Status.TODO,
    "in_progress": Status.IN_PROGRESS,
    "awaiting_review": Status.IN_REVIEW,
    "completed": Status.DONE,
    "errored": Status.BLOCKED,
    "blocked": Status.BLOCKED,
    "cancelled": Status.CANCELLED,
}


def is_status(value: object) -> bool:
    return isinstance(value, str) and value in TRANSITIONS


def is_terminal(status: str) -> bool:
    return status in TERMINAL


def is_locked(status: str) -> bool:
    return status in LOCKED


def allowed_transitions_from(status: str) -> tuple[str, ...]:
    """Legal targets from ``status`` (same-status, always allowed, is not listed)."""
    return TRANSITIONS[status]


def is_transition_allowed(from_status: str, to_status: str) -> bool:
    if from_status not in TRANSITIONS or to_status not in TRANSITIONS:
        return False
    return from_status == to_status or to_status in TRANSITIONS[from_status]


def as_json() -> dict[str, list[str]]:
    """The table in a form the board page can embed."""
    return {str(k): [str(v) for v in vs] for k, vs in TRANSITIONS.items()}
