"""Shared internals of the board's data layer (not for callers outside ``board.store``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.utils import timezone

from board.errors import TaskNotFound
from board.models import Task, TaskComment, TaskDep
from core import events

WRITE_LOG_KEEP = 4  # seed 001: a task keeps its four most recent write receipts


def now() -> dt.datetime:
    """The board's clock: stamps and judges leases (aware, UTC)."""
    return timezone.now()


def lock_task(task_id: str) -> Task:
    """Read a task fresh inside the write transaction, holding its row lock.

    On PostgreSQL this is ``SELECT … FOR UPDATE``; on SQLite the ``BEGIN IMMEDIATE``
    transaction already holds the database's write lock, so a plain read is fresh.
    Must be called inside ``storage.write``.
    """
    qs = Task.objects.all()
    if connection.features.has_select_for_update:
        qs = qs.select_for_update()
    try:
        return qs.get(pk=task_id)
    except Task.DoesNotExist:
        raise TaskNotFound(task_id) from None


_DEPS_SQL = f"SELECT depends_on_task_id FROM {TaskDep._meta.db_table} WHERE task_id = %s"  # noqa: S608


def depends_on_ids(task_id: str) -> list[str]:
    # Precompiled: every task-change event renders its dependencies.
    with connection.cursor() as cursor:
        cursor.execute(_DEPS_SQL, [task_id])
        return [row[0] for row in cursor.fetchall()]


def commit_change(
    task: Task,
    kind: str,
    *,
    prev_status: str | None,
    fields: Iterable[str],
    write_token: dict[str, Any] | None = None,
    at: dt.datetime | None = None,
    actor: str | None = None,
) -> Task:
    """Persist a changed task: revision +1, updated_at, optional write receipt, event.

    Runs inside the caller's write transaction; the event is part of it. ``actor``
    names the authenticated user of a human move, for the audit.
    """
    task.revision += 1
    task.updated_at = at or now()
    update = set(fields) | {"revision", "updated_at"}
    if write_token is not None:
        log = list(task.write_log or [])
        log.append({"id": write_token["id"], "revision": task.revision})
        if len(log) > WRITE_LOG_KEEP:
            log = log[-WRITE_LOG_KEEP:]
            task.write_log_truncated = True
            update.add("write_log_truncated")
        task.write_log = log
        update.add("write_log")
    task.save(update_fields=sorted(update))
    record_event(task, kind, prev_status=prev_status, actor=actor)
    return task


def record_event(
    task: Task,
    kind: str,
    *,
    prev_status: str | None,
    actor: str | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    snapshot = task.as_dict(depends_on=depends_on_ids(task.id))
    changed_status = prev_status if prev_status != task.status else None
    payload: dict[str, Any] = {
        "task": snapshot,
        "prev_status": changed_status,
        "revision": task.revision,
    }
    if actor is not None:
        payload["actor"] = actor
    if extra:
        payload.update(extra)
    events.append(
        task.team_id,
        kind,
        payload,
        task_id=task.id,
        prev_status=changed_status,
    )


def set_fields(task: Task, **values: Any) -> set[str]:
    """Assign the values that differ; return the names of the fields that changed."""
    changed = set()
    for name, value in values.items():
        if getattr(task, name) != value:
            setattr(task, name, value)
            changed.add(name)
    return changed


def add_comment_row(task: Task, author: str, body: str, at: dt.datetime) -> TaskComment:
    return TaskComment.objects.create(task=task, author=author, body=body, created_at=at)
