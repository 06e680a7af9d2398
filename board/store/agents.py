"""An agent's pause and resume as the board sees them: pausing hands back the work
it had claimed but not started (GOVERNANCE §2). The agent row itself is written by
:mod:`core.registry`; the tasks by this layer, in the same transaction."""

from __future__ import annotations

from typing import Any

from board.models import ExecutionStatus, Task
from board.store.lifecycle import release
from board.transitions import Status
from core import registry, storage
from core.models import Agent


def unstarted_claims(agent_id: str) -> list[str]:
    """The in_progress tasks the agent holds with no run going: claimed, not started."""
    return list(
        Task.objects.filter(status=Status.IN_PROGRESS, assignee_agent_id=agent_id)
        .exclude(executions__status=ExecutionStatus.RUNNING)
        .order_by("id")
        .values_list("id", flat=True)
    )


def pause_agent(agent_id: str, reason: Any, *, by: str) -> tuple[Agent, list[str]]:
    """Pause ``agent_id`` and send the work it had not started back to ``todo`` (not
    blocked: nothing cascades). Returns the agent and the ids handed back; pausing
    a paused agent changes nothing (and notifies nobody again)."""

    def run() -> tuple[Agent, list[str]]:
        agent, paused_now = registry.pause_agent(agent_id, reason, by=by)
        if not paused_now:
            return agent, []
        handed_back = unstarted_claims(agent_id)
        for task_id in handed_back:
            release(task_id)
        return agent, handed_back

    return storage.write(run)


def resume_agent(agent_id: str, *, by: str) -> Agent:
    return registry.resume_agent(agent_id, by=by)
