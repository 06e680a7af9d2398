"""Team chat rooms: people's messages, and the narration of board changes.

Narration is derived, not stored: each committed task-change event in the durable
log has (at most) one narration line, computed by :func:`narration_for`. The live
board pushes it right after the change, with the change's sequence number, and the
room's history is read back from the same log. So narrating can never fail, delay
or roll back a board write, and a rolled-back write has nothing to narrate. Chat is
never a write path back to the board: :func:`post` only adds a message.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from core import authors, events, storage
from core.errors import ValidationFailed
from core.models import ChatMessage, Event

BODY_MAX = 20_000
NARRATOR = authors.NARRATOR


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


def prune_before(cutoff: dt.datetime) -> int:
    """Delete people's chat messages older than ``cutoff`` (their narration goes
    with the event log's retention); return how many."""
    return storage.write(lambda: ChatMessage.objects.filter(created_at__lt=cutoff).delete()[0])


def recent(team_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """The room's latest lines, newest first: people's messages and narration, read
    from the event log (each line carries the sequence of its event)."""
    lines: list[dict[str, Any]] = []
    batch = max(limit * 4, 200)
    before: int | None = None
    while len(lines) < limit:
        qs = Event.objects.filter(team_id=team_id)
        if before is not None:
            qs = qs.filter(seq__lt=before)
        rows = list(qs.order_by("-seq")[:batch])
        for event in rows:
            line = line_for(event)
            if line is not None:
                lines.append(line)
                if len(lines) == limit:
                    break
        if len(rows) < batch:
            break
        before = rows[-1].seq
    return lines


def line_for(event: Event) -> dict[str, Any] | None:
    """The chat frame of an event: a person's message, or the narration of a change.
    ``actor`` is who did it when that is known (a person's message: its author)."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.kind == "chat":
        body, author = payload.get("body"), payload.get("author")
        actor = author
    else:
        body, author, actor = narration_for(event), NARRATOR, actor_of(event)
    if not body:
        return None
    # The signatures as signed, and as people read them (a host's machine: its name).
    shown = authors.shown_names([author, actor])
    return {
        "type": "chat",
        "seq": event.seq,
        "team": event.team_id,
        "body": body,
        "author": author,
        "author_name": shown.get(author or "", author),
        "actor": actor,
        "actor_name": shown.get(actor or "", actor),
        "task_id": event.task_id,
        "created_at": event.created_at.isoformat(),
    }


def actor_of(event: Event) -> str | None:
    """Who made a task change, when the event says: the authenticated user of a
    person's move (``payload.actor``), the agent a task was created as, the
    assignee of its own claim or review request, or a comment's author. None when
    the event does not say (an executor settling, a sweep)."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    raw = payload.get("task")
    task: dict[str, Any] = raw if isinstance(raw, dict) else {}
    actor = payload.get("actor")
    if event.kind == "added":
        actor = task.get("created_by_agent_id") or actor
    elif event.kind in ("claimed", "review_requested"):
        actor = actor or task.get("assignee_agent_id")
    elif event.kind == "commented":
        comment = payload.get("comment")
        actor = actor or (comment.get("author") if isinstance(comment, dict) else None)
    return str(actor) if actor else None


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
    "changes_requested": "sent back for changes:",
    # The judge's round of the fix loop (executor.judge): a failed gate or critic.
    "fix_requested": "sent back to its builder to fix:",
}


def _agent_narration(event: Event) -> str | None:
    # An agent that stops taking work is news for the whole team (its cards stall).
    payload = event.payload if isinstance(event.payload, dict) else {}
    agent = payload.get("agent_id") or "an agent"
    by = f" by {payload['by']}" if payload.get("by") else ""
    if event.kind == "agent_paused":
        why = f": {str(payload['reason'])[:120]}" if payload.get("reason") else ""
        return f"agent paused: {agent}{why}"
    if event.kind == "agent_resumed":
        return f"agent resumed: {agent}{by}"
    return None


def narration_for(event: Event) -> str | None:
    """One line describing a task change (or an agent paused or resumed), or None for
    changes not worth a line."""
    if event.kind in ("agent_paused", "agent_resumed"):
        return _agent_narration(event)
    task = event.payload.get("task") if isinstance(event.payload, dict) else None
    if not isinstance(task, dict):
        return None
    title = f"'{_title(task)}'"
    who = authors.shown_name(actor_of(event))
    if event.kind == "claimed":
        return f"{who or 'someone'} claimed {title}"
    if event.kind == "status_changed":
        # A plain move (into backlog, back to todo, a person starting it for an
        # agent): worth a line only when a person made it.
        status = str(task.get("status") or "?").replace("_", " ")
        return f"{who} moved {title} to {status}" if who else None
    if event.kind == "approval_decided":
        approval = task.get("approval") or {}
        said = "approved" if approval.get("state") == "approved" else "denied"
        why = f": {str(approval['reason'])[:120]}" if approval.get("reason") else ""
        return f"{who or approval.get('by') or 'someone'} {said} {title}{why}"
    if event.kind == "approval_required":
        return f"{title} waits for a person's approval again (it changed)"
    if event.kind == "approval_expired":
        return f"Nobody approved {title} in time: its approval expired"
    if event.kind == "completed" and event.payload.get("prev_status") == "in_review" and who:
        # A person's yes to the work in review (approve, which lands it): "completed"
        # read as if they had done the work.
        return f"{who} approved {title}"
    verb = _VERBS.get(event.kind)
    if verb is None:
        return None
    if event.kind == "errored" and task.get("error"):
        return f"{title} failed: {str(task['error'])[:120]}"
    if event.kind == "cancelled" and str(task.get("error") or "").startswith("cancelled: "):
        # A cascade: say which failure took it down (its event follows that failure's).
        return f"Cancelled {title}: {str(task['error'])[len('cancelled: ') :][:120]}"
    # Attributed only to whoever the event names (actor_of): a task can be completed
    # or cancelled by anyone, so an unnamed one is not pinned on its assignee.
    actor = f"{who} " if who else ""
    line = f"{actor}{verb} {title}"
    return line if actor else line[:1].upper() + line[1:]
