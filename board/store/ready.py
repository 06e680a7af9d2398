"""The ready predicate and the label filter, declared once as SQL over a tasks row:
listing (:func:`ready_filter`, :func:`with_label`) and claiming
(:mod:`board.store.claims`) read them from the same text."""

from __future__ import annotations

import json
from typing import Any

from django.db import connection
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from board.models import FirstRouteLabel, Task
from board.transitions import Status, is_status

_T = Task._meta.db_table
# The ready predicate, declared once, as SQL over a tasks row: todo, not dropped,
# every dependency done. "Every dependency done" is the counter ``unmet_deps = 0``,
# which the data layer keeps in the same transactions that change the graph or
# finish a task. 'todo' is a literal, not a bound parameter: the ready indexes are
# partial (WHERE status = 'todo') and a planner can only match that to a literal.
READY_SQL = (
    f'"{_T}"."status" = \'{Status.TODO}\' AND "{_T}"."dropped" = FALSE AND "{_T}"."unmet_deps" = 0'
)


def ready_filter() -> RawSQL:
    """:data:`READY_SQL` as a queryset filter (``Task.objects.filter(ready_filter())``):
    listing and claiming read readiness from the same text."""
    return RawSQL(READY_SQL, (), output_field=BooleanField())  # noqa: S611 - a constant


def label_sql(vendor: str) -> str:
    """ "The task carries label ``%s``" as SQL over a tasks row; bind
    :func:`label_param`'s value."""
    if vendor == "postgresql":
        return f'"{_T}"."labels" @> %s::jsonb'
    return f'EXISTS (SELECT 1 FROM json_each("{_T}"."labels") WHERE value = %s)'  # noqa: S608


def label_param(vendor: str, label: str) -> Any:
    return json.dumps([label]) if vendor == "postgresql" else label


def with_label(qs: QuerySet[Task], label: str) -> QuerySet[Task]:
    vendor = connection.vendor
    return qs.filter(
        RawSQL(  # noqa: S611 - the label is a bound parameter
            label_sql(vendor), [label_param(vendor, label)], output_field=BooleanField()
        )
    )


def status_filter(status: str) -> RawSQL:
    """The task is in ``status``, as a queryset filter with the status as a literal:
    the board's per-column indexes are partial (the terminal ones, and the ready
    ones over todo rows), and a planner matches a partial index only to a literal.
    Only a status of the transition table gets here, so the literal is one of
    seven constants."""
    if not is_status(status):
        raise ValueError(f"unknown status {status!r}")
    return RawSQL(f'"{_T}"."status" = \'{status}\'', (), output_field=BooleanField())  # noqa: S611


def dropped_filter(dropped: bool) -> RawSQL:
    """The task is (not) soft-deleted, as a comparison an index can take: Django
    renders ``dropped=False`` as ``NOT dropped``, which neither planner matches to
    the board's column index."""
    value = "TRUE" if dropped else "FALSE"
    return RawSQL(f'"{_T}"."dropped" = {value}', (), output_field=BooleanField())  # noqa: S611


def route_sql(vendor: str) -> str:
    """ "The task's route admits this claimer" as SQL over a tasks row: no route, or
    every part of it matches. Binds (:func:`route_params`): the agent id, its
    runtime, its labels as a JSON array. The labels are a subset test: every label
    the route asks for is one of the agent's (jsonb ``@>`` on PostgreSQL,
    ``json_each`` on SQLite)."""
    if vendor == "postgresql":
        labels = f'"{_T}"."route_labels" IS NULL OR %s::jsonb @> "{_T}"."route_labels"'
    else:
        labels = (
            f'"{_T}"."route_labels" IS NULL OR NOT EXISTS (SELECT 1 FROM '  # noqa: S608
            f'json_each("{_T}"."route_labels") AS wanted WHERE wanted.value NOT IN '
            "(SELECT value FROM json_each(%s)))"
        )
    return (
        f'("{_T}"."route_agent_id" IS NULL OR "{_T}"."route_agent_id" = %s) '
        f'AND ("{_T}"."route_runtime" IS NULL OR "{_T}"."route_runtime" = %s) '
        f"AND ({labels})"
    )


def route_params(agent_id: str, runtime: str | None, labels: list[str]) -> list[Any]:
    return [agent_id, runtime, json.dumps(labels)]


# The routes a claimer may take, split by the route's leading part, so that each
# part is one ordered lookup in an index of its own (board.models: the partial
# ``tasks_ready_open_*`` and ``tasks_ready_to_*`` indexes) and a claim never walks
# the tasks routed to others: a route names an agent (looked up by the claimer's
# id), else a runtime (by the claimer's runtime), else labels (by its first label,
# which must be one of the claimer's), else it is open to anyone. The parts do not
# overlap, and together they are every task :func:`route_sql` admits: a route the
# claimer passes leads with its id, its runtime or one of its labels.
_RA, _RR, _RL = (f'"{_T}"."{name}"' for name in ("route_agent_id", "route_runtime", "route_labels"))
ROUTE_OPEN_SQL = f"{_RA} IS NULL AND {_RR} IS NULL AND {_RL} IS NULL"
ROUTE_TO_AGENT_SQL = f"{_RA} IS NOT NULL AND {_RA} = %s"
ROUTE_TO_RUNTIME_SQL = f"{_RA} IS NULL AND {_RR} IS NOT NULL AND {_RR} = %s"


def route_to_label_sql(vendor: str) -> str:
    # The expression the label index declares (board.models.FirstRouteLabel), so
    # the planner matches it.
    first = FirstRouteLabel.TEMPLATES[vendor] % {"expressions": _RL}
    return f"{_RA} IS NULL AND {_RR} IS NULL AND {_RL} IS NOT NULL AND {first} = %s"


def route_parts(vendor: str, runtime: bool, labels: int) -> list[tuple[str, bool]]:
    """The parts of the routes a claimer with (or without) a runtime and ``labels``
    labels may take, each as (SQL over a tasks row binding the claimer's key, and
    whether the rest of the route must still be checked on the row)."""
    parts = [(ROUTE_OPEN_SQL, False), (ROUTE_TO_AGENT_SQL, True)]
    if runtime:
        parts.append((ROUTE_TO_RUNTIME_SQL, True))
    parts += [(route_to_label_sql(vendor), True)] * labels
    return parts


def route_part_keys(agent_id: str, runtime: str | None, labels: list[str]) -> list[list[Any]]:
    """The binds of :func:`route_parts`' SQL, part by part."""
    keys: list[list[Any]] = [[], [agent_id]]
    if runtime is not None:
        keys.append([runtime])
    return keys + [[label] for label in labels]


def routes_to(task: Task, agent_id: str, runtime: str | None, labels: list[str]) -> bool:
    """:func:`route_sql` over a task already read (the claim's diagnosis of a refusal)."""
    if task.route_agent_id is not None and task.route_agent_id != agent_id:
        return False
    if task.route_runtime is not None and task.route_runtime != runtime:
        return False
    return set(task.route_labels or ()) <= set(labels)
