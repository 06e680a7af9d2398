"""Who sees what: a user sees and writes only the teams they belong to; staff see all."""

from __future__ import annotations

from typing import Any

from core.errors import Forbidden, ValidationFailed
from core.models import Team
from core.registry import member_team_ids


def team_ids(user: Any) -> list[str] | None:
    """The user's team ids, or None for staff (every team)."""
    if user.is_staff or user.is_superuser:
        return None
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
