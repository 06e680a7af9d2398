"""Live delivery: each committed event is pushed to the team's websocket group.

Registered as an after-commit listener of :mod:`core.events`, so nothing is sent
for a write that rolled back. Consumers restore per-team order and fill gaps from
the durable log, so neither delivery order across processes nor a dropped frame
loses anything; publishing is therefore best-effort and kept off the write path:

* in-memory layer: only this process's consumers can hear it, so it is sent only
  when this process has someone listening to that team;
* any other layer (Redis): handed to one background thread with its own event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer

from core.chat import actor_of, line_for
from core.models import Event

log = logging.getLogger(__name__)


def group_name(team_id: str) -> str:
    # Channels group names allow ASCII letters, digits, hyphens, underscores, periods.
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in team_id)
    return f"board.{safe}"[:90]


def frames_for(event: Event) -> list[dict[str, Any]]:
    """The websocket frames of one event, in order: a task change is followed by its
    narration line (same ``seq``); a person's chat message is one chat frame."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    base = {"seq": event.seq, "team": event.team_id}
    frames: list[dict[str, Any]] = []
    if event.kind != "chat":
        if "task" in payload:
            frames.append(
                {
                    "type": "task-change",
                    **base,
                    "kind": event.kind,
                    "task": payload["task"],
                    "prev_status": payload.get("prev_status"),
                    # Who made the change, when the event says (None: unnamed, e.g. an
                    # executor settling); never guessed from the assignee.
                    "actor": actor_of(event),
                    # A tool call waiting for a person, or its answer: shown on the card.
                    **(
                        {"tool_approval": payload["tool_approval"]}
                        if "tool_approval" in payload
                        else {}
                    ),
                }
            )
        else:
            frames.append(
                {
                    "type": "event",
                    **base,
                    "kind": event.kind,
                    "task_id": event.task_id,
                    "payload": payload,
                }
            )
    line = line_for(event)
    if line is not None:
        frames.append(line)
    return frames


def message_for(event: Event) -> dict[str, Any]:
    """The layer message of one event: each frame encoded once here, not once per
    watching client."""
    texts = [json.dumps(frame) for frame in frames_for(event)]
    return {"type": "board.event", "seq": event.seq, "texts": texts}


class _Publisher:
    """One daemon thread with its own loop, so a write never waits on the network."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[tuple[Any, str, dict[str, Any]]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="clawboo-publish", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        while True:
            layer, group, message = self.queue.get()
            try:
                loop.run_until_complete(layer.group_send(group, message))
            except Exception:
                log.exception("could not publish to %s", group)


_publisher: _Publisher | None = None
_publisher_lock = threading.Lock()


def _background() -> _Publisher:
    global _publisher
    with _publisher_lock:
        if _publisher is None:
            _publisher = _Publisher()
        return _publisher


def publish(event: Event) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    group = group_name(event.team_id)
    try:
        if isinstance(layer, InMemoryChannelLayer):
            if not layer.groups.get(group):
                return  # nobody in this process is watching this team
            async_to_sync(layer.group_send)(group, message_for(event))
        else:
            _background().queue.put((layer, group, message_for(event)))
    except Exception:  # best-effort: a reconnecting client replays from the log
        log.exception("could not publish event %s", event)
