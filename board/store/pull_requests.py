"""A task's pull request on its repository's forge, as the board keeps it (the only
writer of ``tasks.pull_request``).

The forge is the authority on the pull request; this column is what the server
last learned from it (opened, checks, merged or closed), so the API, the board card
and the review panel show it without asking the forge. The forge work itself is
:mod:`worktrees.pull_requests`.
"""

from __future__ import annotations

from typing import Any

from board.models import Task
from board.store._base import add_comment_row, commit_change, lock_task, now, set_fields
from core import storage


def record_pull_request(
    task_id: str, changes: dict[str, Any], *, comment: str | None = None
) -> Task:
    """Merge ``changes`` into the task's pull request record (one event,
    ``metadata_changed``), with an optional comment by ``forge``."""

    def run() -> Task:
        task = lock_task(task_id)
        at = now()
        record = {**(task.pull_request or {}), **changes}
        fields = set_fields(task, pull_request=record)
        if comment:
            add_comment_row(task, "forge", comment, at)
        if not fields and not comment:
            return task
        return commit_change(
            task, "metadata_changed", prev_status=task.status, fields=fields, at=at
        )

    return storage.write(run)


def task_of_pull_request(repository_id: str, number: int) -> Task | None:
    """The task whose pull request ``number`` on the forge of ``repository_id`` is."""
    return (
        Task.objects.filter(repository_id=repository_id, pull_request__number=number)
        .order_by("-updated_at")
        .first()
    )


def tasks_with_open_pull_requests(repository_id: str | None = None) -> list[str]:
    """Tasks in review whose pull request the forge has not settled (the poll's list;
    of repository ``repository_id`` only, when given)."""
    rows = Task.objects.filter(status="in_review", pull_request__isnull=False)
    if repository_id is not None:
        rows = rows.filter(repository_id=repository_id)
    return list(rows.exclude(pull_request__state="merged").values_list("id", flat=True))
