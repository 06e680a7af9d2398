"""Deleting an agent: only while nothing names it.

An agent that has worked leaves its name on tasks (assigned, routed, created), runs,
budgets, routines, tool approvals and grants, and a team's reviewer seat. Deleting it
would leave those pointing at nobody, and would drop its routines without releasing
their bound tasks. So an agent is deleted only while no row names it; otherwise the
operator pauses it (it then claims nothing, GOVERNANCE's "paused, never deleted").

The rule lives here, above every floor that names an agent (the board, routines); the
registry (core) writes the delete. Each row below is one place an agent is named:
adding a place is adding a row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from board.models import Budget, BudgetScope, ExecutionProcess, Task, ToolApproval, ToolGrant
from core import registry, storage
from core.errors import Conflict
from core.models import Agent, Team
from routines.models import Routine


class AgentStillNamed(Conflict):
    """The agent is still named by rows that would point at nobody: pause it instead."""

    def __init__(self, agent_id: str, names: list[NamedBy]) -> None:
        listed = "; ".join(f"{n.count} {n.label}" for n in names)
        super().__init__(
            f"agent {agent_id!r} is still named by {listed}: pause it instead",
            agent_id=agent_id,
            named_by={n.label: n.count for n in names},
        )
        self.names = names


@dataclass(frozen=True)
class Place:
    label: str
    model: Any
    where: dict[str, str]  # field → value; "{id}" stands for the agent's id
    admin_list: str = ""  # the admin changelist filtered to these rows, when it has one

    def lookup(self, agent_id: str) -> dict[str, str]:
        return {field: value.format(id=agent_id) for field, value in self.where.items()}

    def rows(self, agent_id: str) -> Any:
        return self.model.objects.filter(**self.lookup(agent_id))


# The keys are the admin changelists' query parameters too.
ASSIGNEE = {"assignee_agent_id__exact": "{id}"}
PLACES: tuple[Place, ...] = (
    Place("task(s) assigned to it", Task, ASSIGNEE, "admin:board_task_changelist"),
    Place("task(s) routed to it", Task, {"route_agent_id": "{id}"}),
    Place("task(s) it created", Task, {"created_by_agent_id": "{id}"}),
    Place(
        "run(s)", ExecutionProcess, {"agent_id": "{id}"}, "admin:board_executionprocess_changelist"
    ),
    Place(
        "budget(s)",
        Budget,
        {"scope": BudgetScope.AGENT, "scope_id": "{id}"},
        "admin:board_budget_changelist",
    ),
    Place("routine(s)", Routine, {"agent__exact": "{id}"}, "admin:routines_routine_changelist"),
    Place("tool approval(s)", ToolApproval, {"agent_id": "{id}"}),
    Place("tool grant(s)", ToolGrant, {"agent_id": "{id}"}),
    Place("team(s) it reviews for", Team, {"reviewer_agent_id": "{id}"}),
)


@dataclass(frozen=True)
class NamedBy:
    place: Place
    count: int

    @property
    def label(self) -> str:
        return self.place.label


def named_by(agent_id: str) -> list[NamedBy]:
    """Every place that still names the agent, with how many rows (empty: deletable)."""
    found = (NamedBy(place, place.rows(agent_id).count()) for place in PLACES)
    return [n for n in found if n.count]


def delete_agent(agent_id: str) -> None:
    """Delete the agent, or refuse with :class:`AgentStillNamed` (nothing written)."""
    delete_agents([agent_id])


def delete_agents(agent_ids: list[str]) -> None:
    """Delete every agent of ``agent_ids``, or none: :class:`AgentStillNamed` for the
    first one still named, ``NotFound`` for one already gone (a racing delete).

    The agents' rows are locked first (in id order, so two deletes never wait on each
    other's), then every place is counted and the registry deletes them in the same
    transaction; their API tokens and machine-token bindings go with them (they only
    exist to act as them). The lock is what a claim's gate takes too: a claim that
    took it first is counted here, and one that waits for it finds no agent. A run or
    claim that committed after the delete page was drawn is therefore refused here,
    never half-deleted over."""

    def run() -> None:
        ids = sorted(set(agent_ids))
        list(Agent.objects.select_for_update().filter(pk__in=ids).order_by("pk").values("pk"))
        for agent_id in ids:
            names = named_by(agent_id)
            if names:
                raise AgentStillNamed(agent_id, names)
        for agent_id in ids:
            registry.delete_agent(agent_id)

    storage.write(run)
