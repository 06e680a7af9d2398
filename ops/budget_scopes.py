"""A budget's editable fields and the team its scope belongs to: what the REST API
(:mod:`ops.budgets`) and the admin both need, apart from the API's views so that the
admin, which every process loads at start, does not import the REST framework."""

from __future__ import annotations

from typing import Any

from board.models import BudgetScope, Task
from core.models import Agent, Team
from routines.models import Routine

FIELDS = ("scope", "scope_id", "window", "limit_cents", "mode")


def scope_team(scope: Any, scope_id: Any) -> str | None:
    """The team the scope belongs to, or None when there is no such scope."""
    if not isinstance(scope_id, str) or not scope_id:
        return None
    if scope == BudgetScope.TEAM:
        return scope_id if Team.objects.filter(pk=scope_id).exists() else None
    model: type[Agent] | type[Routine] | type[Task]
    if scope == BudgetScope.AGENT:
        model = Agent
    elif scope == BudgetScope.ROUTINE:
        model = Routine
    elif scope == BudgetScope.TASK_TREE:
        model = Task
    else:
        return None
    team = model.objects.filter(pk=scope_id).values_list("team_id", flat=True).first()
    return team if isinstance(team, str) else None
