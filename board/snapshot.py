"""The task body: the one shape of a task in API responses and task-change events.

Declared once, as :data:`FIELDS`, and produced two ways from it:

* :func:`body` — from a :class:`~board.models.Task` in Python (``Task.as_dict``);
* :func:`body_sql` — as a SQL expression over a ``tasks`` row, so the claim can
  write its event in the same statement as the claim itself (``board.store.claims``)
  without a round trip to Python in between — the claim's hot path is lock-bound,
  and every microsecond spent between its statements is paid by every racer.

Both must give equal JSON for the same row; ``tests/board/test_snapshot.py`` checks
that over tasks in every shape (nulls, verdicts, overrides, labels, metadata,
dependencies, whole-second timestamps, non-ASCII text) on each backend.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, Literal

Kind = Literal["value", "bool", "list", "dict", "json", "time", "verification", "cost", "deps"]

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
    ("verification", "verdict", "verification"),
    ("cost", "cost_tokens", "cost"),
    ("dropped", "dropped", "bool"),
    ("revision", "revision", "value"),
    ("incarnation_id", "incarnation_id", "value"),
    ("depends_on", "id", "deps"),
    ("created_at", "created_at", "time"),
    ("updated_at", "updated_at", "time"),
    ("started_at", "started_at", "time"),
    ("completed_at", "completed_at", "time"),
)


# --- Python --------------------------------------------------------------------


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def verification(task: Any) -> dict[str, Any] | None:
    if task.verdict is None and task.human_override is None:
        return None
    return {
        "verdict": task.verdict,
        "evidence": task.verdict_evidence,
        "at": _iso(task.verdict_at),
        "human_override": task.human_override,
    }


_PY: dict[Kind, Callable[[Any, str, list[str] | None], Any]] = {
    "value": lambda task, col, deps: getattr(task, col),
    "bool": lambda task, col, deps: bool(getattr(task, col)),
    "list": lambda task, col, deps: list(getattr(task, col) or []),
    "dict": lambda task, col, deps: dict(getattr(task, col) or {}),
    "json": lambda task, col, deps: getattr(task, col),
    "time": lambda task, col, deps: _iso(getattr(task, col)),
    "verification": lambda task, col, deps: verification(task),
    "cost": lambda task, col, deps: {"tokens": task.cost_tokens, "cents": task.cost_cents},
    "deps": lambda task, col, deps: sorted(deps) if deps is not None else None,
}
_PY_FIELDS = tuple((key, column, _PY[kind]) for key, column, kind in FIELDS)


def body(task: Any, depends_on: list[str] | None = None) -> dict[str, Any]:
    """The body of ``task``; ``depends_on`` None renders as null (not looked up)."""
    return {key: render(task, column, depends_on) for key, column, render in _PY_FIELDS}


# Task fields a body does not show, or shows only in part (a verification of None
# hides any evidence left behind): what a Task rebuilt from its body needs besides.
BEYOND_BODY: tuple[str, ...] = (
    "unmet_deps",
    "tenant_id",
    "write_log",
    "write_log_truncated",
    "create_fingerprint",
    "verdict_evidence",
    "verdict_at",
)


def _time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value is not None else None


def fields_from_body(task_body: dict[str, Any]) -> dict[str, Any]:
    """The task's field values (by attribute name) that ``task_body`` shows: the
    inverse of :func:`body`, for every field but :data:`BEYOND_BODY`. The claim
    builds its Task from the body its own statement made (``board.store.claims``);
    ``tests/board/test_snapshot.py`` checks the round trip for tasks in every shape.
    """
    values: dict[str, Any] = {}
    for key, column, kind in FIELDS:
        value = task_body[key]
        if kind == "time":
            values[column] = _time(value)
        elif kind == "verification":
            values["verdict"] = value["verdict"] if value else None
            values["human_override"] = value["human_override"] if value else None
        elif kind == "cost":
            values["cost_tokens"] = value["tokens"]
            values["cost_cents"] = value["cents"]
        elif kind != "deps":
            values[column] = value
    return values


# --- SQL -----------------------------------------------------------------------


def _sqlite(kind: Kind, col: str, t: str) -> str:
    c = f"{t}.{col}"
    # json_object() quotes any text argument that is not straight from a JSON
    # function, so every nested JSON value goes through json(...) as the argument.
    if kind == "value":
        return c
    if kind == "bool":
        return f"json(CASE WHEN {c} THEN 'true' ELSE 'false' END)"
    if kind == "list":
        return f"json(COALESCE(NULLIF({c}, 'null'), '[]'))"
    if kind == "dict":
        return f"json(COALESCE(NULLIF({c}, 'null'), '{{}}'))"
    if kind == "json":
        return f"json({c})"
    if kind == "time":
        # Django stores 'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC, dropping a zero
        # fraction exactly as datetime.isoformat() does.
        return f"(replace({c}, ' ', 'T') || '+00:00')"
    if kind == "verification":
        return (
            # typeof(), not IS NULL: in an UPDATE's RETURNING (the claim's), SQLite
            # 3.40 answers IS NULL wrongly for some columns of this table.
            f"json(CASE WHEN typeof({t}.verdict) = 'null' "
            f"AND typeof({t}.human_override) = 'null' THEN NULL "
            f"ELSE json_object('verdict', {t}.verdict, 'evidence', {t}.verdict_evidence, "
            f"'at', {_sqlite('time', 'verdict_at', t)}, "
            f"'human_override', json({t}.human_override)) END)"
        )
    if kind == "cost":
        return f"json_object('tokens', {t}.cost_tokens, 'cents', {t}.cost_cents)"
    if kind == "deps":
        return (
            "json((SELECT json_group_array(d.depends_on_task_id) FROM "  # noqa: S608 - names only
            "(SELECT depends_on_task_id FROM task_deps "
            f"WHERE task_id = {t}.id ORDER BY depends_on_task_id) AS d))"
        )
    raise ValueError(kind)


def _pg_time(c: str) -> str:
    # isoformat(): microseconds only when non-zero, always the UTC offset. One
    # to_char (the costly part of the body) and a replace: '.000000' can only be
    # the fraction.
    return (
        f"(replace(to_char({c} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US'), "
        "'.000000', '') || '+00:00')"
    )


def _postgresql(kind: Kind, col: str, t: str) -> str:
    c = f"{t}.{col}"
    if kind in ("value", "bool", "json"):
        return c
    if kind == "list":
        return f"COALESCE(NULLIF({c}, 'null'::jsonb), '[]'::jsonb)"
    if kind == "dict":
        return f"COALESCE(NULLIF({c}, 'null'::jsonb), '{{}}'::jsonb)"
    if kind == "time":
        return _pg_time(c)
    if kind == "verification":
        return (
            f"CASE WHEN {t}.verdict IS NULL AND {t}.human_override IS NULL THEN NULL "
            f"ELSE jsonb_build_object('verdict', {t}.verdict, 'evidence', {t}.verdict_evidence, "
            f"'at', {_pg_time(f'{t}.verdict_at')}, 'human_override', {t}.human_override) END"
        )
    if kind == "cost":
        return f"jsonb_build_object('tokens', {t}.cost_tokens, 'cents', {t}.cost_cents)"
    if kind == "deps":
        # COLLATE "C": byte order, which is Python's sorted() order for UTF-8 text.
        return (
            "COALESCE((SELECT jsonb_agg(d.depends_on_task_id ORDER BY d.depends_on_task_id "  # noqa: S608
            f"COLLATE \"C\") FROM task_deps d WHERE d.task_id = {t}.id), '[]'::jsonb)"
        )
    raise ValueError(kind)


def body_sql(vendor: str, alias: str = "t") -> str:
    """A SQL expression giving the body of the ``tasks`` row named ``alias`` as JSON
    (``json_object`` on SQLite, ``jsonb_build_object`` on PostgreSQL)."""
    if vendor == "postgresql":
        parts = [f"'{key}', {_postgresql(kind, col, alias)}" for key, col, kind in FIELDS]
        return f"jsonb_build_object({', '.join(parts)})"
    if vendor == "sqlite":
        parts = [f"'{key}', {_sqlite(kind, col, alias)}" for key, col, kind in FIELDS]
        return f"json_object({', '.join(parts)})"
    raise NotImplementedError(f"no task body SQL for {vendor}")
