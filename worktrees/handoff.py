"""AGENT_HANDOFF.json: the structured clock-out artifact, and cold resume from it.

The handoff is parsed, not interpreted: :func:`validate_handoff` is its schema
(role-neutral; ``runtime`` may be ``human``), strict for what Clawboo writes;
:func:`read_handoff` reads what is in a checkout leniently (a handoff from the
original Clawboo, whose ``roomCursor`` is ``{roomId, lastSeenSeq}``, or from a newer
tool), so one odd field costs that field, not the whole handoff. :func:`reconstruct_state` is the
clock-in read and uses only the checkout: the handoff, else the ``## Done`` /
``## Blocked`` bullets of ``task-progress.md``, plus ``init.sh`` for commands.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from django.utils import timezone

from board import store
from core.errors import ValidationFailed
from worktrees import agent_files
from worktrees.locks import path_lock
from worktrees.scaffold import COMMAND_SLOTS, HANDOFF_FILE, INIT_FILE, PROGRESS_FILE

log = logging.getLogger(__name__)

TEXT_MAX = 20_000
NAME_MAX = 200
LIST_MAX = 200
RUNTIME_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._:-]{0,63}\Z")
COMMAND_KEYS = ("init", "verify", "start")
EVIDENCE_KEYS = ("testResults", "lintResults")
FIELDS = (
    "handoffFrom",
    "runtime",
    "timestamp",
    "completedSubtasks",
    "brokenOrUnverified",
    "nextBestStep",
    "whyBlocked",
    "commands",
    "evidence",
    "warnings",
    "nativeSessionId",
    "roomCursor",
)


def _field(name: str) -> str:
    return f"handoff.{name}"


def _text(value: Any, name: str, *, required: bool, limit: int = TEXT_MAX) -> str | None:
    if value is None:
        if required:
            raise ValidationFailed(_field(name), "is required")
        return None
    if not isinstance(value, str):
        raise ValidationFailed(_field(name), "must be a string")
    if required and not value.strip():
        raise ValidationFailed(_field(name), "must not be empty")
    if len(value) > limit:
        raise ValidationFailed(_field(name), f"must be at most {limit} characters")
    return value


def _text_list(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationFailed(_field(name), "must be a list of strings")
    if len(value) > LIST_MAX:
        raise ValidationFailed(_field(name), f"must have at most {LIST_MAX} items")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValidationFailed(_field(f"{name}[{i}]"), "must be a string")
        if len(item) > TEXT_MAX:
            raise ValidationFailed(_field(f"{name}[{i}]"), f"must be at most {TEXT_MAX} characters")
        out.append(item)
    return out


def _text_map(value: Any, name: str, keys: tuple[str, ...]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed(_field(name), f"must be an object with keys {', '.join(keys)}")
    extra = sorted(set(value) - set(keys))
    if extra:
        raise ValidationFailed(
            _field(f"{name}.{extra[0]}"), f"unknown key; allowed: {', '.join(keys)}"
        )
    out: dict[str, str] = {}
    for key in keys:
        got = _text(value.get(key), f"{name}.{key}", required=False)
        if got is not None:
            out[key] = got
    return out


def _timestamp(value: Any) -> str:
    if value is None:
        return timezone.now().isoformat()
    if not isinstance(value, str):
        raise ValidationFailed(_field("timestamp"), "must be an ISO-8601 date-time string")
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationFailed(
            _field("timestamp"), "must be an ISO-8601 date-time, e.g. 2025-01-31T12:00:00Z"
        ) from None
    if parsed.tzinfo is None:
        raise ValidationFailed(_field("timestamp"), "must carry a UTC offset or 'Z'")
    return value


def _runtime(value: Any) -> str:
    runtime = _text(value, "runtime", required=True)
    assert runtime is not None
    if not RUNTIME_PATTERN.match(runtime):
        raise ValidationFailed(
            _field("runtime"),
            "must be an executor id such as 'claude-code', 'codex' or 'human' "
            "(letters, digits, '.', '_', ':', '-'; at most 64)",
        )
    return runtime


ROOM_CURSOR_KEYS = ("roomId", "lastSeenSeq")


def _room_cursor(value: Any) -> str | int | dict[str, Any] | None:
    """A string, a non-negative integer, or the original Clawboo's object
    ``{"roomId": "...", "lastSeenSeq": 12}``."""
    if isinstance(value, dict):
        extra = sorted(set(value) - set(ROOM_CURSOR_KEYS))
        if extra:
            raise ValidationFailed(
                _field(f"roomCursor.{extra[0]}"), "unknown key; allowed: roomId, lastSeenSeq"
            )
        room = _text(value.get("roomId"), "roomCursor.roomId", required=True, limit=NAME_MAX)
        seq = value.get("lastSeenSeq")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ValidationFailed(
                _field("roomCursor.lastSeenSeq"), "must be a non-negative integer"
            )
        return {"roomId": room, "lastSeenSeq": seq}
    if value is not None and (
        isinstance(value, bool)
        or not isinstance(value, str | int)
        or (isinstance(value, int) and value < 0)
        or (isinstance(value, str) and len(value) > NAME_MAX)
    ):
        raise ValidationFailed(
            _field("roomCursor"),
            "must be a string, a non-negative integer or an object {roomId, lastSeenSeq}",
        )
    return value


# One reader per field: the value normalised, or ValidationFailed naming the field.
_READERS: dict[str, Callable[[Any], Any]] = {
    "handoffFrom": lambda v: _text(v, "handoffFrom", required=True, limit=NAME_MAX),
    "runtime": _runtime,
    "timestamp": _timestamp,
    "completedSubtasks": lambda v: _text_list(v, "completedSubtasks"),
    "brokenOrUnverified": lambda v: _text_list(v, "brokenOrUnverified"),
    "nextBestStep": lambda v: _text(v, "nextBestStep", required=False),
    "whyBlocked": lambda v: _text(v, "whyBlocked", required=False),
    "commands": lambda v: _text_map(v, "commands", COMMAND_KEYS),
    "evidence": lambda v: _text_map(v, "evidence", EVIDENCE_KEYS),
    "warnings": lambda v: _text_list(v, "warnings"),
    "nativeSessionId": lambda v: _text(v, "nativeSessionId", required=False, limit=NAME_MAX),
    "roomCursor": _room_cursor,
}
assert tuple(_READERS) == FIELDS


def validate_handoff(data: Any) -> dict[str, Any]:
    """The handoff schema: returns the normalised document or raises
    :class:`ValidationFailed` naming the first bad field (``handoff.<field>``).

    Unknown top-level fields are refused rather than dropped, so a typo such as
    ``nextStep`` fails loudly instead of silently losing the next step. This is the
    gate for handoffs written through Clawboo; :func:`read_handoff` is the lenient
    reader of what is already in a checkout.
    """
    if not isinstance(data, dict):
        raise ValidationFailed("handoff", "must be a JSON object")
    extra = sorted(set(data) - set(FIELDS))
    if extra:
        raise ValidationFailed(_field(extra[0]), f"unknown field; allowed: {', '.join(FIELDS)}")
    doc = {name: read(data.get(name)) for name, read in _READERS.items()}
    if doc["roomCursor"] is None:
        del doc["roomCursor"]
    return doc


def salvage_handoff(data: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """What can be read of a handoff another tool wrote, and the fields dropped.

    A field of an unexpected shape (or an unknown one) costs that field only: it is
    dropped and read as absent. Only a document that is not an object, or whose
    ``runtime`` is unusable -- nothing in it could be attributed -- is no handoff.
    """
    if not isinstance(data, dict):
        return None, []
    dropped = sorted(set(data) - set(FIELDS))
    doc: dict[str, Any] = {}
    for name, read in _READERS.items():
        try:
            doc[name] = read(data.get(name))
        except ValidationFailed:
            if name == "runtime":
                return None, [name]
            dropped.append(name)
            try:
                doc[name] = read(None)  # the field's absent value
            except ValidationFailed:
                pass  # a required field (handoffFrom): left out
    if doc.get("roomCursor") is None:
        doc.pop("roomCursor", None)
    return doc, dropped


def write_handoff(worktree: Path, data: Any) -> dict[str, Any]:
    """Validate and write ``AGENT_HANDOFF.json`` atomically (a reader never sees
    half a file). Invalid input writes nothing."""
    doc = validate_handoff(data)
    fd, tmp = tempfile.mkstemp(dir=worktree, prefix=".handoff-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, worktree / HANDOFF_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return doc


def read_handoff(worktree: Path) -> dict[str, Any] | None:
    """The checkout's handoff as far as it can be read (:func:`salvage_handoff`), or
    None when it is absent, not JSON, not an object, or has no usable ``runtime``."""
    try:
        raw = agent_files.read_text(worktree / HANDOFF_FILE)
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None
    doc, dropped = salvage_handoff(data)
    if doc is not None and dropped:
        log.info("%s: dropped handoff field(s) of an unexpected shape: %s", worktree, dropped)
    return doc


@dataclass
class ResumeState:
    done: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    next: str | None = None
    whyBlocked: str | None = None  # noqa: N815 - the seed's wire name
    commands: dict[str, str | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    lastRuntime: str | None = None  # noqa: N815
    nativeSessionId: str | None = None  # noqa: N815
    source: str = "none"  # "handoff" | "progress" | "none"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_HEADING = re.compile(r"^##\s+(.+?)\s*$")
_BULLET = re.compile(r"^\s*[-*]\s+(.+?)\s*$")


def progress_sections(text: str) -> dict[str, list[str]]:
    """Bullets under each ``## Heading`` of task-progress.md, keyed by lower-case heading."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = heading.group(1).lower()
            sections.setdefault(current, [])
            continue
        bullet = _BULLET.match(line)
        if current is not None and bullet:
            sections[current].append(bullet.group(1))
    return sections


def init_commands(worktree: Path) -> dict[str, str | None]:
    """Commands from ``init.sh``'s slots (the script itself is ``init``)."""
    commands: dict[str, str | None] = {"init": None, "verify": None, "start": None}
    try:
        text = agent_files.read_text(worktree / INIT_FILE)
    except (OSError, ValueError):
        return commands
    commands["init"] = f"./{INIT_FILE}"
    slots: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in COMMAND_SLOTS:
            try:
                slots[name] = " ".join(shlex.split(value))
            except ValueError:
                continue
    commands["verify"] = slots.get("VERIFY_CMD") or None
    commands["start"] = slots.get("START_CMD") or None
    return commands


def reconstruct_state(worktree: Path) -> ResumeState:
    """What is done, broken and next, from the checkout alone (no board, no chat)."""
    commands = init_commands(worktree)
    handoff = read_handoff(worktree)
    if handoff is not None:
        commands.update({k: v for k, v in handoff["commands"].items() if v})
        return ResumeState(
            done=handoff["completedSubtasks"],
            broken=handoff["brokenOrUnverified"],
            next=handoff["nextBestStep"],
            whyBlocked=handoff["whyBlocked"],
            commands=commands,
            warnings=handoff["warnings"],
            lastRuntime=handoff["runtime"],
            nativeSessionId=handoff["nativeSessionId"],
            source="handoff",
        )
    try:
        text = agent_files.read_text(worktree / PROGRESS_FILE)
    except (OSError, ValueError):
        return ResumeState(commands=commands)
    sections = progress_sections(text)
    blocked = sections.get("blocked", [])
    in_progress = sections.get("in progress", [])
    return ResumeState(
        done=sections.get("done", []),
        broken=list(blocked),
        next=in_progress[0] if in_progress else None,
        whyBlocked="; ".join(blocked) or None,
        commands=commands,
        source="progress",
    )


def note_for_next_run(
    worktree: Path, *, who: str, runtime: str, broken: list[str], next_step: str
) -> dict[str, Any]:
    """Tell whoever clocks in next what is broken and what to do first (a failed
    gate's fix request, a reviewer's requested changes), keeping the rest of the
    handoff that is there."""
    existing = read_handoff(worktree) or {}
    doc: dict[str, Any] = {
        "handoffFrom": existing.get("handoffFrom") or who,
        "runtime": existing.get("runtime") or runtime,
        "timestamp": timezone.now().isoformat(),
        "completedSubtasks": existing.get("completedSubtasks") or [],
        "brokenOrUnverified": [item[:TEXT_MAX] for item in broken],
        "nextBestStep": next_step[:TEXT_MAX],
        "warnings": existing.get("warnings") or [],
    }
    if existing.get("nativeSessionId"):
        doc["nativeSessionId"] = existing["nativeSessionId"]
    return write_handoff(worktree, doc)


def note_requested_changes(task_id: str, feedback: str, *, by: str) -> bool:
    """A reviewer's requested changes (line comments as ``file:line: text``) into the
    task's checkout's handoff, for the agent's next run; False when there is no
    checkout on disk (TASK.md still carries them as the task's feedback)."""
    ws = store.live_workspace(task_id)
    if ws is None or not Path(ws.worktree_path).is_dir():
        return False
    with path_lock(ws.worktree_path):
        note_for_next_run(
            Path(ws.worktree_path),
            who=by,
            runtime="human",
            broken=[f"changes requested by {by}:\n{feedback}"],
            next_step="address each requested change (at its file:line), verify, then stop",
        )
    return True
