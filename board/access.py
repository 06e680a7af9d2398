"""Which tasks a user sees: those of the teams they belong to (staff: all)."""

from __future__ import annotations

from typing import Any

from board.errors import TaskNotFound
from board.models import Task
from core.api.access import can_see_team, team_ids


def visible_task(user: Any, task_id: str) -> Task:
    """The task, or 404 when it does not exist *or* belongs to a team the user cannot see."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None or not can_see_team(user, task.team_id):
        raise TaskNotFound(task_id)
    return task


def scope_tasks(user: Any, qs: Any) -> Any:
    teams = team_ids(user)
    return qs if teams is None else qs.filter(team_id__in=teams)
