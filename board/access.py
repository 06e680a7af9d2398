"""Which tasks a user sees: those of the teams they belong to (staff: all)."""

from __future__ import annotations

from typing import Any

from board.errors import TaskNotFound
from board.models import Task
from core.api.access import can_see_team
from core.errors import ValidationFailed


def visible_task(user: Any, task_id: str) -> Task:
    """The task, or 404 when it does not exist *or* belongs to a team the user cannot see."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None or not can_see_team(user, task.team_id):
        raise TaskNotFound(task_id)
    return task


def audited_override(request: Any, value: Any) -> Any:
    """A human override is recorded as the authenticated user's (audit): ``by`` may
    be left out, and if given must name that user."""
    if not isinstance(value, dict):
        return value  # the data layer names what is wrong
    who = request.user.get_username()
    given = value.get("by")
    if given is not None and given != who:
        raise ValidationFailed(
            "human_override.by", f"is the authenticated user ({who!r}); leave it out"
        )
    return {**value, "by": who}
