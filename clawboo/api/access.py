"""Who sees what: a user sees and writes only the teams they belong to; staff see all."""

from __future__ import annotations

from typing import Any

from board.errors import TaskNotFound
from board.models import Task
from clawboo.errors import Forbidden, ValidationFailed
from clawboo.models import Team


def team_ids(user: Any) -> list[str] | None:
    """The user's team ids, or None for staff (every team)."""
    if user.is_staff or user.is_superuser:
        return None
    from clawboo.registry import member_team_ids

    return member_team_ids(user.pk)


def can_see_team(user: Any, team_id: str) -> bool:
    teams = team_ids(user)
    return teams is None or team_id in teams


def require_team(user: Any, team_id: Any, field: str = "team") -> str:
    """The team, if it exists and the user belongs to it (400 unknown / 403 not a member)."""
    if not isinstance(team_id, str) or not Team.objects.filter(pk=team_id).exists():
        raise ValidationFailed(field, f"no team {team_id!r}")
    if not can_see_team(user, team_id):
        raise Forbidden(f"you are not a member of team {team_id!r}")
    return team_id


def visible_task(user: Any, task_id: str) -> Task:
    """The task, or 404 when it does not exist *or* belongs to a team the user cannot see."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None or not can_see_team(user, task.team_id):
        raise TaskNotFound(task_id)
    return task


def scope_tasks(user: Any, qs: Any) -> Any:
    teams = team_ids(user)
    return qs if teams is None else qs.filter(team_id__in=teams)
