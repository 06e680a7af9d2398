"""Input checks for the board's data layer: each returns the clean value or raises
:class:`ValidationFailed` naming the field. Run before any write, so bad input
writes nothing. The constants are SPEC §10's.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings

from board.transitions import Status, is_status
from core.checks import (
    ID_PATTERN,
    TEXT_MAX,
    check_choice,
    check_id,
    check_int,
    check_object,
    check_size,
    check_storable,
    check_text,
    field_limit,
    invisible_in_label,
    unknown_keys,
)
from core.errors import ValidationFailed

__all__ = [
    "ID_PATTERN",
    "TEXT_MAX",
    "check_choice",
    "check_id",
    "check_int",
    "check_object",
    "check_size",
    "check_storable",
    "check_text",
    "field_limit",
    "unknown_keys",
]

TITLE_MAX = 500
LABEL_MAX = 64
LABELS_MAX = 32
# What one task may wait on, named in one body: far past any plan, and it keeps a
# hostile list (a 2 MiB body holds ~200,000 ids) from costing a query or a scan each.
DEPENDS_ON_MAX = 1000
PRIORITY_MIN = -1_000_000
PRIORITY_MAX = 1_000_000
MAX_ATTEMPTS_MAX = 100
LEASE_MIN_MS = 1_000
# ~74 days: seed 001's ceiling, the most CLAWBOO_LEASE_MAX_MS may say.
LEASE_MAX_MS = 74 * 24 * 60 * 60 * 1000
DEFAULT_LEASE_MS = 120_000


def check_title(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationFailed("title", "is required and must be a non-empty string")
    if len(value) > TITLE_MAX:
        raise ValidationFailed("title", f"must be at most {TITLE_MAX} characters")
    return check_text(value, "title", limit=TITLE_MAX)


def check_priority(value: Any) -> int:
    return check_int(value, "priority", low=PRIORITY_MIN, high=PRIORITY_MAX)


def check_max_attempts(value: Any) -> int | None:
    if value is None:
        return None
    return check_int(value, "max_attempts", low=1, high=MAX_ATTEMPTS_MAX)


def check_max_run_cents(value: Any) -> int | None:
    """A run's ceiling in cents: a whole number >= 1, or None for none."""
    if value is None:
        return None
    return check_int(value, "max_run_cents", low=1, high=2**31 - 1)


def check_label(value: Any, field: str = "label") -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > LABEL_MAX:
        raise ValidationFailed(
            field, f"each label must be a non-empty string of at most {LABEL_MAX} characters"
        )
    label = check_text(value, field, limit=LABEL_MAX).strip()
    hidden = invisible_in_label(label)
    if hidden:
        raise ValidationFailed(field, f"label {label!r} holds an invisible character ({hidden})")
    return label


def check_labels(value: Any, field: str = "labels") -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationFailed(field, "must be a list of strings")
    # A dict keeps the order and drops repeats in one pass; stop at the first label
    # past the cap (a list scanned per label was quadratic: 40,000 labels, 14 s).
    labels: dict[str, None] = {}
    for item in value:
        labels[check_label(item, field)] = None
        if len(labels) > LABELS_MAX:
            raise ValidationFailed(field, f"at most {LABELS_MAX} labels")
    return list(labels)


# Where a new task may start.
CREATE_STATUSES = (Status.TODO, Status.BACKLOG)

# The runtimes a route may name (core.models.Runtime's values; the board does not
# import the registry's enum to keep its checks free of models).
ROUTE_KEYS = ("agent", "runtime", "labels")


def check_route(value: Any, runtimes: list[str]) -> dict[str, Any] | None:
    """A task's ``route`` (``{agent?, runtime?, labels?}``): the clean route, or None
    for no route (null, ``{}``, or every part empty). Whether ``agent`` is an agent
    of the task's team is the data layer's check, in its transaction."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationFailed("route", "must be an object {agent?, runtime?, labels?}")
    unknown_keys(value, ROUTE_KEYS, "a route")
    agent = value.get("agent")
    if agent is not None:
        agent = check_agent_id(agent, "route.agent")
    runtime = value.get("runtime")
    if runtime is not None and runtime not in runtimes:
        raise ValidationFailed("route.runtime", f"one of {', '.join(runtimes)}")
    labels = check_labels(value.get("labels"), "route.labels")
    if agent is None and runtime is None and not labels:
        return None
    return {"agent": agent, "runtime": runtime, "labels": labels or None}


def check_create_status(value: Any) -> str:
    if value is None:
        return Status.TODO
    if value not in CREATE_STATUSES:
        raise ValidationFailed("status", "a new task starts as 'todo' or 'backlog'")
    return str(value)


def check_status(value: Any, field: str = "to") -> str:
    if not is_status(value):
        raise ValidationFailed(field, f"unknown status {value!r}; one of {', '.join(Status)}")
    return str(value)


def lease_max_ms() -> int:
    """The longest lease a claim may hold at a time: ``CLAWBOO_LEASE_MAX_MS`` (default
    seed 001's ~74 days). A holder that is gone loses the claim within it, whatever
    lease it asked for last."""
    return max(LEASE_MIN_MS, min(int(settings.CLAWBOO_LEASE_MAX_MS), LEASE_MAX_MS))


def check_lease_ms(value: Any) -> int:
    """Seed 001: a lease under a second, over the ceiling (:func:`lease_max_ms`) or
    non-finite is refused, not clamped: the caller asked for a span it would not get."""
    high = lease_max_ms()
    if value is None:
        return min(DEFAULT_LEASE_MS, high)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationFailed("lease_ms", "must be a number of milliseconds")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationFailed("lease_ms", "must be finite")
    if not LEASE_MIN_MS <= value <= high:
        raise ValidationFailed(
            "lease_ms", f"must be between {LEASE_MIN_MS} and {high} (CLAWBOO_LEASE_MAX_MS)"
        )
    return int(value)


def check_id_list(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationFailed(field, "must be a list of task ids")
    out: dict[str, None] = {}
    for item in value:
        check_id(item, field)
        out[item] = None
        if len(out) > DEPENDS_ON_MAX:
            raise ValidationFailed(field, f"at most {DEPENDS_ON_MAX} task ids")
    return list(out)


def check_agent_id(value: Any, field: str = "agent_id") -> str:
    return check_id(value, field)


# A routine's fire files its slot's task as ``rt-<routine>-<slot>`` with its
# ``metadata.routine_id`` and ``slot_at``: the routine finds its fires, and its cap
# budget counts their spend, by them.
ROUTINE_FIRE_PREFIX = "rt-"
ROUTINE_MARKS = ("routine_id", "slot_at")


def check_not_a_fire(task_id: Any, metadata: Any, current: Any = None) -> None:
    """Refuse what only a routine's fire writes, from anyone else: a task id in its
    namespace (taking a future slot's id would fail that fire) or a ``metadata``
    routine mark other than the task's ``current`` one (filing spend into a routine's
    budget)."""
    if isinstance(task_id, str) and task_id.startswith(ROUTINE_FIRE_PREFIX):
        raise ValidationFailed(
            "id", f"ids starting {ROUTINE_FIRE_PREFIX!r} are a routine's fires: choose another"
        )
    if not isinstance(metadata, dict):
        return
    was = current if isinstance(current, dict) else {}
    for mark in ROUTINE_MARKS:
        if mark in metadata and metadata[mark] != was.get(mark):
            raise ValidationFailed(f"metadata.{mark}", "is set by a routine's fire only")


# An execution's number in a path (``…/executions/{execution_id}/…``): ASCII digits,
# no more than a BIGINT holds. ``str.isdigit`` also takes ``²`` and ``١``, which
# ``int`` refuses or reads as another number, and 5,000 digits, which it refuses too:
# each was a 500 where an unknown execution is a 404.
_EXECUTION_NUMBER = re.compile(r"\A[0-9]{1,18}\Z")


def execution_number(value: str) -> int | None:
    """The execution a path names, or None (no such execution)."""
    return int(value) if _EXECUTION_NUMBER.match(value) else None
