"""Dependencies and the parent tree: link/unlink with cycle refusal, ancestors,
and the cascade that cancels a failed task's pending dependents."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection

from board import checks
from board.errors import DependencyCycle, DepthExceeded
from board.models import Task, TaskDep
from board.store import approvals
from board.store._base import commit_change, lock_task, now
from board.store.moves import move
from board.transitions import Status
from core import storage
from core.errors import ValidationFailed

# Any constant works: all dependency links on PostgreSQL take this one advisory lock,
# so two concurrent links (even on disjoint task pairs) cannot race a cycle in.
_PG_DEPS_LOCK = 0x0C1A_B000


def _serialise_links() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_PG_DEPS_LOCK])


def _reaches(start: str, target: str) -> bool:
    """Whether ``target`` is among ``start``'s transitive dependencies."""
    table = TaskDep._meta.db_table
    sql = (
        f"WITH RECURSIVE reach(id) AS ("  # noqa: S608 - table names only
        f" SELECT depends_on_task_id FROM {table} WHERE task_id = %s"
        f" UNION SELECT d.depends_on_task_id FROM {table} d JOIN reach r ON d.task_id = r.id"
        f") SELECT 1 FROM reach WHERE id = %s LIMIT 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [start, target])
        return cursor.fetchone() is not None


def link(task_id: str, depends_on: Any) -> bool:
    """Make ``task_id`` wait for ``depends_on``. Returns False if the edge existed.

    Refuses a self-edge or any edge that would close a cycle (:class:`DependencyCycle`);
    the reachability check runs in the insert's transaction.
    """
    dep = checks.check_id(depends_on, "depends_on")

    def run() -> bool:
        _serialise_links()
        task = lock_task(task_id)
        # Locked too, so it cannot finish (and decrement our counter) between our
        # look at its status and the insert: a deadlock with that completion is a
        # transient error storage.write re-runs.
        dep_task = lock_task(dep)
        if dep_task.team_id != task.team_id:  # a dependency never crosses teams
            raise ValidationFailed("depends_on", f"no task {dep!r} on this task's team")
        if dep == task_id or _reaches(dep, task_id):
            raise DependencyCycle(
                f"{task_id!r} cannot depend on {dep!r}: {dep!r} already depends on it",
                task_id=task_id,
                depends_on=dep,
            )
        if TaskDep.objects.filter(task_id=task_id, depends_on_id=dep).exists():
            return False
        at = now()
        TaskDep.objects.create(task_id=task_id, depends_on_id=dep, created_at=at)
        fields: set[str] = set()
        if dep_task.status != Status.DONE:
            task.unmet_deps += 1
            fields.add("unmet_deps")
        asked = approvals.ask_again_after_edit(task, {"depends_on"}, at)
        commit_change(
            task, "dependency_added", prev_status=task.status, fields=fields | asked, at=at
        )
        if asked:
            approvals.record_required(task)
        return True

    return storage.write(run)


def unlink(task_id: str, depends_on: Any) -> bool:
    dep = checks.check_id(depends_on, "depends_on")

    def run() -> bool:
        task = lock_task(task_id)
        dep_task = Task.objects.filter(pk=dep).first()
        if dep_task is not None:
            dep_task = lock_task(dep)
        pending = dep_task is not None and dep_task.status != Status.DONE
        deleted, _ = TaskDep.objects.filter(task_id=task_id, depends_on_id=dep).delete()
        if deleted:
            fields: set[str] = set()
            if pending:
                task.unmet_deps -= 1
                fields.add("unmet_deps")
            at = now()
            asked = approvals.ask_again_after_edit(task, {"depends_on"}, at)
            commit_change(
                task, "dependency_removed", prev_status=task.status, fields=fields | asked, at=at
            )
            if asked:
                approvals.record_required(task)
        return bool(deleted)

    return storage.write(run)


def ancestor_ids(task_id: str) -> list[str]:
    """The parent chain, nearest first, via one recursive query.

    The raw rows are validated (ids are strings, depth strictly increasing, no
    repeats) rather than trusted, as seed 000 asks of both recursive reads.
    """
    rows = _walk(task_id, up=True)
    out: list[str] = []
    for expected, (ancestor, depth) in enumerate(rows, start=1):
        if not isinstance(ancestor, str) or int(depth) != expected or ancestor in out:
            raise ValueError(f"corrupt parent chain above {task_id!r}: {rows!r}")
        out.append(ancestor)
    return out


def tree_ids(root_id: str) -> list[str]:
    """``root_id`` and every descendant, via one recursive query."""
    return [root_id, *(row[0] for row in _walk(root_id, up=False))]


def _walk(task_id: str, *, up: bool) -> list[tuple[str, int]]:
    """``(id, depth)`` of the tasks above (``up``) or below ``task_id``, nearest
    first, no deeper than 64 levels whatever the rows say."""
    table = Task._meta.db_table
    join = "t.id = w.parent" if up else "t.parent_task_id = w.id"
    sql = (
        f"WITH RECURSIVE walk(id, parent, depth) AS ("  # noqa: S608
        f" SELECT id, parent_task_id, 0 FROM {table} WHERE id = %s"
        f" UNION ALL SELECT t.id, t.parent_task_id, w.depth + 1"
        f" FROM {table} t JOIN walk w ON {join} WHERE w.depth < 64"
        f") SELECT id, depth FROM walk WHERE depth > 0 ORDER BY depth"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [task_id])
        return list(cursor.fetchall())


def depth_of(task_id: str) -> int:
    return len(ancestor_ids(task_id))


def dependent_ids(task_id: str) -> list[str]:
    """Every task of ``task_id``'s team that transitively waits on it (validated).

    The walk never leaves the team, even over links made before dependencies were
    kept within a team: one team's failure never reaches another's tasks.
    """
    table = TaskDep._meta.db_table
    tasks = Task._meta.db_table
    sql = (
        f"WITH RECURSIVE down(id) AS ("  # noqa: S608
        f" SELECT d.task_id FROM {table} d JOIN {tasks} t ON t.id = d.task_id"
        f" WHERE d.depends_on_task_id = %s"
        f" AND t.team_id = (SELECT team_id FROM {tasks} WHERE id = %s)"
        f" UNION SELECT d.task_id FROM {table} d JOIN down ON d.depends_on_task_id = down.id"
        f" JOIN {tasks} t ON t.id = d.task_id"
        f" WHERE t.team_id = (SELECT team_id FROM {tasks} WHERE id = %s)"
        f") SELECT id FROM down"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [task_id, task_id, task_id])
        rows = cursor.fetchall()
    ids = [row[0] for row in rows]
    if not all(isinstance(i, str) for i in ids):
        raise ValueError(f"corrupt dependency rows below {task_id!r}")
    return ids


_PENDING = (Status.TODO, Status.BACKLOG)


def cascade_cancel(task_id: str, *, at: dt.datetime | None = None) -> list[Task]:
    """Cancel the pending (todo/backlog) transitive dependents of ``task_id``.

    Runs inside the caller's write transaction; in_progress, done and cancelled
    dependents are left alone. Returns the cancelled tasks.
    """
    at = at or now()
    ids = dependent_ids(task_id)
    if not ids:
        return []
    qs = Task.objects.filter(pk__in=ids, status__in=_PENDING).order_by("created_at", "id")
    if connection.features.has_select_for_update:
        qs = qs.select_for_update()
    cancelled = []
    for task in qs:
        prev = task.status
        fields = move(task, Status.CANCELLED, at=at)
        task.error = f"cancelled: dependency {task_id!r} failed"
        commit_change(task, "cancelled", prev_status=prev, fields=fields | {"error"}, at=at)
        cancelled.append(task)
    return cancelled


def cancel_dependents(task_id: str) -> list[Task]:
    """The orchestrator's call after a blocker failed (also on the API)."""

    def run() -> list[Task]:
        lock_task(task_id)
        return cascade_cancel(task_id)

    return storage.write(run)


def check_dispatch_depth(task_id: str, max_depth: int) -> None:
    """The executor's dispatch rule: refused only for a task *past* the ceiling.

    Create refuses when the parent's depth ≥ max (so a child lands at ≤ max);
    dispatch refuses when the task's own depth > max: anything creatable runs.
    """
    depth = depth_of(task_id)
    if depth > max_depth:
        raise DepthExceeded(
            f"task {task_id!r} is at depth {depth}, past the delegation ceiling {max_depth}",
            depth=depth,
            max_depth=max_depth,
        )
