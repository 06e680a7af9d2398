"""The executor benches' agents and reviewer, set up as a user sets them up.

A file-mutating task whose run changes nothing counts like a failure, and the
breaker pauses its agent after ``CLAWBOO_BREAKER_FAILURES`` (3) of them: a bench of
no-op file-mutating runs stalls under the defaults a user gets. So the benches'
agents do what such a task is for — their command writes one file of the task's
own (no two tasks touch the same path, so every change lands) — with a verify
command, and the bench plays the person who approves each review, which lands the
change on the base branch and moves the task ``done``.

:func:`stall` says why a run stopped making progress (a paused agent, a blocked
task), so a bench fails with the reason instead of waiting out its deadline.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

# One new file per task, named for it: a real change, never a conflict.
CHANGE_ARGV = ["sh", "-c", 'echo "$CLAWBOO_TASK_ID" > "work-$CLAWBOO_TASK_ID.txt"']
VERIFY_CMD = "true"
REVIEWER = "bench-reviewer"


def agent_settings(repo: Path) -> dict[str, Any]:
    return {"argv": CHANGE_ARGV, "repo_path": str(repo), "verify_cmd": VERIFY_CMD}


def approve_reviews(task_ids: Iterable[str] | None = None) -> int:
    """Approve (land) every task waiting in review (of ``task_ids``); how many landed."""
    from board.models import Task
    from worktrees import service

    waiting = Task.objects.filter(status="in_review")
    if task_ids is not None:
        waiting = waiting.filter(pk__in=list(task_ids))
    landed = 0
    for task_id in waiting.values_list("id", flat=True):
        result = service.approve(task_id, by=REVIEWER)
        if result["result"] not in ("landed", "approved"):
            raise SystemExit(f"approving {task_id} did not land it: {result['result']}")
        landed += 1
    return landed


def stall(agent_ids: Iterable[str]) -> str | None:
    """Why the pipeline cannot go on by itself, or None: a paused agent (the
    breaker's reason included), or a task parked ``blocked``."""
    from board.models import Task
    from core.models import Agent

    for agent in Agent.objects.filter(pk__in=list(agent_ids)):
        if agent.state == "paused":
            return f"agent {agent.id} is paused: {agent.state_reason or 'no reason given'}"
        if agent.health_ok is False:
            return f"agent {agent.id} is unhealthy: {agent.health_detail or 'no detail'}"
    blocked = Task.objects.filter(status="blocked").first()
    if blocked is not None:
        return f"task {blocked.id} is blocked: {blocked.error or 'no error given'}"
    return None
