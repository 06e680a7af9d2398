"""The task body: the one shape of a task in API responses and task-change events.

Declared once, as :data:`FIELDS` (key, the column it reads, how it renders), and
rendered by :func:`body` (``Task.as_dict``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Literal

from board import judgement

Kind = Literal[
    "value",
    "bool",
    "list",
    "dict",
    "json",
    "time",
    "verification",
    "approval",
    "cost",
    "deps",
    "route",
]

# (key in the body, the tasks column it reads, how it is rendered)
FIELDS: tuple[tuple[str, str, Kind], ...] = (
    ("id", "id", "value"),
    ("title", "title", "value"),
    ("description", "description", "value"),
    ("goal", "goal", "value"),
    ("context", "context", "value"),
    ("team", "team_id", "value"),
    ("status", "status", "value"),
    ("priority", "priority", "value"),
    ("labels", "labels", "list"),
    ("metadata", "metadata", "dict"),
    ("input", "input", "json"),
    ("output", "output", "json"),
    ("error", "error", "value"),
    ("feedback", "feedback", "value"),
    ("assignee_agent_id", "assignee_agent_id", "value"),
    ("assignee_runtime", "assignee_runtime", "value"),
    ("created_by_agent_id", "created_by_agent_id", "value"),
    ("route", "route_agent_id", "route"),
    ("parent_task_id", "parent_task_id", "value"),
    ("attempts", "attempts", "value"),
    ("max_attempts", "max_attempts", "value"),
    ("abandonments", "abandonments", "value"),
    ("lease_until", "lease_until", "time"),
    ("lease_duration_ms", "lease_duration_ms", "value"),
    ("worktree_ref", "worktree_ref", "value"),
    ("branch_ref", "branch_ref", "value"),
    ("scheduled_by", "scheduled_by", "value"),
    ("file_mutating", "file_mutating", "bool"),
    ("repository", "repository_id", "value"),
    # The paths the task says it changes (globs, or null) and the scope the claim
    # compares (``touches``, else what its last attempt changed; board.scope).
    ("touches", "touches", "json"),
    ("scope", "scope", "json"),
    ("verification", "verdict", "verification"),
    ("pull_request", "pull_request", "json"),
    ("max_run_cents", "max_run_cents", "value"),
    ("cost", "cost_tokens", "cost"),
    ("approval", "approval_state", "approval"),
    ("dropped", "dropped", "bool"),
    ("revision", "revision", "value"),
    ("incarnation_id", "incarnation_id", "value"),
    ("depends_on", "id", "deps"),
    # How many dependencies were not done when this body was rendered (a dependency
    # finishing does not re-render its dependents).
    ("unmet_deps", "unmet_deps", "value"),
    ("created_at", "created_at", "time"),
    ("updated_at", "updated_at", "time"),
    ("started_at", "started_at", "time"),
    ("completed_at", "completed_at", "time"),
)


# --- Python --------------------------------------------------------------------


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def verification(task: Any) -> dict[str, Any] | None:
    return judgement.render(task, _iso(task.verdict_at))


def approval(task: Any) -> dict[str, Any] | None:
    """``{state, revision, by, at, reason}``, or None: the task needs no approval."""
    if task.approval_state is None:
        return None
    return {
        "state": task.approval_state,
        "revision": task.approval_revision,
        "by": task.approval_by,
        "at": _iso(task.approval_at),
        "reason": task.approval_reason,
    }


def route(task: Any) -> dict[str, Any] | None:
    """Who may take the task (GOVERNANCE §1), or None: any agent of its team."""
    if task.route_agent_id is None and task.route_runtime is None and not task.route_labels:
        return None
    return {
        "agent": task.route_agent_id,
        "runtime": task.route_runtime,
        "labels": list(task.route_labels or []),
    }


_PY: dict[Kind, Callable[[Any, str, list[str] | None], Any]] = {
    "value": lambda task, col, deps: getattr(task, col),
    "bool": lambda task, col, deps: bool(getattr(task, col)),
    "list": lambda task, col, deps: list(getattr(task, col) or []),
    "dict": lambda task, col, deps: dict(getattr(task, col) or {}),
    "json": lambda task, col, deps: getattr(task, col),
    "time": lambda task, col, deps: _iso(getattr(task, col)),
    "verification": lambda task, col, deps: verification(task),
    "approval": lambda task, col, deps: approval(task),
    "cost": lambda task, col, deps: {
        "cents": task.cost_cents,
        "tokens": task.cost_tokens,
        "tree_cents": task.tree_cost_cents,
        "tree_tokens": task.tree_cost_tokens,
    },
    "deps": lambda task, col, deps: sorted(deps) if deps is not None else None,
    "route": lambda task, col, deps: route(task),
}
_PY_FIELDS = tuple((key, column, _PY[kind]) for key, column, kind in FIELDS)


def body(task: Any, depends_on: list[str] | None = None) -> dict[str, Any]:
    """The body of ``task``; ``depends_on`` None renders as null (not looked up)."""
    return {key: render(task, column, depends_on) for key, column, render in _PY_FIELDS}
