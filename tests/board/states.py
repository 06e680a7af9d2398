"""Put a task into any status through the data layer (shared by the board tests)."""

from __future__ import annotations

from board import store
from board.models import Task


def task_in(status: str, title: str = "t", **create: object) -> tuple[Task, str | None]:
    """A fresh task sitting in ``status``, and the claim ticket if it was claimed."""
    if status == "backlog":
        return store.create_task(title=title, status="backlog", **create).task, None
    task = store.create_task(title=title, **create).task
    ticket = None
    if status in ("in_progress", "in_review", "done"):
        ticket = store.claim(task.id, "ada", "command").ticket
    path = {
        "todo": [],
        "in_progress": [],
        "in_review": ["in_review"],
        "blocked": ["blocked"],
        "done": ["done"],
        "cancelled": ["cancelled"],
    }[status]
    for step in path:
        store.transition(task.id, step)
    fresh = store.get_task(task.id)
    assert fresh.status == status
    return fresh, ticket
