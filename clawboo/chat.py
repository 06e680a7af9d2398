"""Team chat rooms and the narration of board changes.

Narration is best-effort and strictly after commit: :func:`narrate` runs from the
event log's after-commit hook, in its own transaction, and a failure to narrate is
logged, never raised, so it can neither fail nor roll back the board write.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from clawboo import events, storage
from clawboo.errors import ValidationFailed
from clawboo.models import ChatMessage, Event

log = logging.getLogger(__name__)

BODY_MAX = 20_000
NARRATOR = "clawboo"


def post(
    team_id: str, body: str, *, author: str = NARRATOR, task_id: str | None = None
) -> ChatMessage:
    """Post a chat line; it gets a place in the team's event sequence so a
    reconnecting client replays it with everything else."""
    if not isinstance(body, str) or not body.strip() or len(body) > BODY_MAX:
        raise ValidationFailed("body", f"must be 1-{BODY_MAX} characters")

    def run() -> ChatMessage:
        message = ChatMessage.objects.create(
            team_id=team_id,
            author=author,
            body=body,
            task_id=task_id,
            created_at=timezone.now(),
        )
        event = events.append(
            team_id,
            "chat",
            {"body": body, "author": author, "message_id": message.pk},
            task_id=task_id,
        )
        message.event_seq = event.seq
        message.save(update_fields=["event_seq"])
        return message

    return storage.write(run)


def recent(team_id: str, limit: int = 100) -> QuerySet[ChatMessage]:
    return ChatMessage.objects.filter(team_id=team_id).order_by("-created_at", "-id")[:limit]


def _title(task: dict[str, Any]) -> str:
    title = str(task.get("title") or task.get("id") or "a task")
    return title if len(title) <= 80 else title[:77] + "..."


_VERBS = {
    "added": "created",
    "completed": "completed",
    "errored": "failed",
    "retried": "will retry",
    "blocked": "blocked",
    "unblocked": "unblocked",
    "review_requested": "sent to review",
    "resumed": "resumed",
    "cancelled": "cancelled",
    "released": "released",
    "verification_overridden": "overrode verification on",
}


def narration_for(event: Event) -> str | None:
    """One line describing a task change, or None for changes not worth a line."""
    task = event.payload.get("task") if isinstance(event.payload, dict) else None
    if not isinstance(task, dict):
        return None
    title = f"'{_title(task)}'"
    who = task.get("assignee_agent_id")
    if event.kind == "claimed":
        return f"{who or 'someone'} claimed {title}"
    verb = _VERBS.get(event.kind)
    if verb is None:
        return None
    if event.kind == "errored" and task.get("error"):
        return f"{title} failed: {str(task['error'])[:120]}"
    actor = f"{who} " if who and event.kind in ("completed", "review_requested") else ""
    line = f"{actor}{verb} {title}"
    return line if actor else line[:1].upper() + line[1:]


def narrate(event: Event) -> None:
    """After-commit listener: post the narration line of a committed task change."""
    if event.kind == "chat":
        return
    try:
        line = narration_for(event)
        if line:
            post(event.team_id, line, task_id=event.task_id)
    except Exception:
        log.exception("could not narrate event %s", event)
