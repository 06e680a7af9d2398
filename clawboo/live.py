"""Live delivery: each committed event is pushed to the team's websocket group.

Registered as an after-commit listener of :mod:`clawboo.events`, so nothing is sent
for a write that rolled back. Consumers restore per-team order and fill gaps from
the durable log, so delivery order across processes does not matter.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from clawboo.models import Event

log = logging.getLogger(__name__)


def group_name(team_id: str) -> str:
    # Channels group names allow ASCII letters, digits, hyphens, underscores, periods.
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in team_id)
    return f"board.{safe}"[:90]


def message_for(event: Event) -> dict[str, Any]:
    """The websocket frame of an event (also used for replay)."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    base = {"seq": event.seq, "team": event.team_id}
    if event.kind == "chat":
        return {
            "type": "chat",
            **base,
            "body": payload.get("body"),
            "author": payload.get("author"),
            "task_id": event.task_id,
        }
    if "task" in payload:
        return {
            "type": "task-change",
            **base,
            "kind": event.kind,
            "task": payload["task"],
            "prev_status": payload.get("prev_status"),
        }
    return {
        "type": "event",
        **base,
        "kind": event.kind,
        "task_id": event.task_id,
        "payload": payload,
    }


def publish(event: Event) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            group_name(event.team_id), {"type": "board.event", "frame": message_for(event)}
        )
    except Exception:  # best-effort: a reconnecting client replays from the log
        log.exception("could not publish event %s", event)
