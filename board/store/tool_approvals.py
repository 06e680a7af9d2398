"""Approval before a tool runs (GOVERNANCE §5): a running agent's tool call that its
permission mode did not allow waits here for a person.

The runtime asks through the board's MCP server (Claude Code's permission prompt
tool, :func:`boardmcp.tools.permission_prompt`): :func:`ask` records the call —
its arguments with secret-looking values masked — as ``pending`` on the run's task
and the run waits in :func:`wait`. A person answers (:func:`decide`):
``allow_once``, ``allow_always`` (this agent and this tool, from then on, without
asking: a :class:`~board.models.ToolGrant`) or ``deny``. A call longer than a person
is shown (:data:`ARGUMENTS_MAX`) is denied at once by the server, never put to one.
Nobody answering by the timeout is a deny: the row becomes ``timed_out`` by the same
conditional update a decision takes, so a late answer gets 409, never a half-allowed
call.

The only writer of ``tool_approvals`` and ``tool_grants``.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import time
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from board.errors import TaskNotFound
from board.models import (
    Task,
    ToolApproval,
    ToolApprovalState,
    ToolDecision,
    ToolGrant,
)
from board.store._base import depends_on_ids, now
from core import events, storage
from core.authors import NARRATOR
from core.checks import check_choice, check_text
from core.errors import Conflict, NotFound

MASK = "***"
# A key that names a secret: its value is never stored or shown.
_SECRET_KEY = re.compile(
    r"pass(word|wd)?|secret|token|api[_-]?key|auth|credential|private[_-]?key|cookie|session",
    re.IGNORECASE,
)
# Secret-looking values inside free text (a shell command, a URL): provider keys,
# bearer tokens, NAME=value pairs whose name is a secret's, passwords in URLs.
_SECRET_TEXT = (
    re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{12,}"),
    re.compile(r"\b(ghp|gho|ghs|ghu|github_pat|glpat|xox[abpr])[-_][A-Za-z0-9_-]{10,}"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
    re.compile(r"(?i)(bearer|token)\s+[A-Za-z0-9._~+/=-]{12,}"),
    re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
)
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:PASS(?:WORD)?|SECRET|TOKEN|API_?KEY|CREDENTIAL|PRIVATE_?KEY)[A-Z0-9_]*"
    r"\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s\"']+)"
)
# What the shell expands when it reads a value -- a command substitution, a
# parameter expansion -- makes it code the call runs, not a secret it carries: such
# a span is shown, never masked. Masked, it hid the call from the person deciding
# it (``API_KEY="$(curl … | sh)" make test`` read ``API_KEY=*** make test``).
_EXPANDS = re.compile(r"\$\(|\$\{|`")
TOOL_MAX = 255
ARGUMENTS_MAX = 20_000  # characters of masked arguments kept (JSON), for the card
# Who denies a call too long to show a person (:func:`ask`), and what its run is told.
SERVER = NARRATOR
TOO_LONG = (
    f"its arguments are longer than the {ARGUMENTS_MAX} characters a person is shown, "
    "so nobody could see what they would allow: make the call smaller"
)
POLL_S = 0.25


def mask(value: Any, key: str | None = None) -> Any:
    """``value`` with every secret-looking part replaced by ``***``: values under a
    secret's key, and secret-looking text (tokens, keys, ``PASSWORD=…``) -- but not
    text that runs something when the shell reads it (:data:`_EXPANDS`): the person
    asked to allow a call sees what it runs, whatever the agent names it."""
    if key is not None and _SECRET_KEY.search(key) and value not in (None, "", [], {}):
        return MASK
    if isinstance(value, dict):
        return {str(k): mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [mask(v) for v in value]
    if isinstance(value, str):
        text = _SECRET_ASSIGNMENT.sub(
            lambda m: m.group(0) if _EXPANDS.search(m.group(2)) else m.group(1) + MASK, value
        )
        for pattern in _SECRET_TEXT:
            text = pattern.sub(lambda m: m.group(0) if _EXPANDS.search(m.group(0)) else MASK, text)
        return text
    return value


def timeout() -> dt.timedelta:
    return dt.timedelta(milliseconds=settings.CLAWBOO_TOOL_APPROVAL_TIMEOUT_MS)


def is_granted(agent_id: str, tool: str) -> bool:
    return ToolGrant.objects.filter(agent_id=agent_id, tool=tool).exists()


def _emit(row: ToolApproval, kind: str, *, actor: str | None = None) -> None:
    """The event of a tool approval, in the caller's write: the task's body (so the
    board places the card) and the approval itself (so the card shows it)."""
    task = row.task
    payload: dict[str, Any] = {
        "task": task.as_dict(depends_on=depends_on_ids(task.id)),
        "prev_status": None,
        "revision": task.revision,
        "tool_approval": row.as_dict(),
    }
    if actor is not None:
        payload["actor"] = actor
    events.append(task.team_id, kind, payload, task_id=task.id)


def ask(
    task_id: str, agent_id: str, tool: Any, arguments: Any, tool_use_id: Any = ""
) -> ToolApproval | None:
    """Record a tool call waiting for a person on ``task_id`` (a ``pending`` row and a
    ``tool_approval_requested`` event), or None when ``allow_always`` already holds
    for this agent and tool (the call goes ahead unasked)."""
    name = check_text(tool, "tool_name", limit=TOOL_MAX, required=True)
    masked = mask(arguments if isinstance(arguments, dict) else {"input": arguments})
    # A call longer than a person is shown is never put to one: what they allowed
    # would be its first ARGUMENTS_MAX characters, and the run would go on to run the
    # rest (padding hid the tail). It is denied at once, by the server (fail closed).
    unshowable = len(repr(masked)) > ARGUMENTS_MAX
    if unshowable:
        masked = {"input": repr(masked)[:ARGUMENTS_MAX] + "…"}
    use_id = tool_use_id if isinstance(tool_use_id, str) else ""
    if is_granted(agent_id, name):
        return None

    def run() -> ToolApproval:
        task = Task.objects.filter(pk=task_id).first()
        if task is None:
            raise TaskNotFound(task_id)
        at = now()
        denied: dict[str, Any] = {
            "state": ToolApprovalState.DENIED,
            "decision": ToolDecision.DENY,
            "decided_by": SERVER,
            "decided_at": at,
        }
        row = ToolApproval.objects.create(
            id=secrets.token_hex(8),
            task=task,
            team_id=task.team_id,
            agent_id=agent_id,
            tool=name,
            arguments=masked,
            tool_use_id=use_id[:128],
            created_at=at,
            expires_at=at + timeout(),
            **(denied if unshowable else {}),
        )
        _emit(row, "tool_approval_requested")
        if unshowable:
            _emit(row, "tool_approval_decided", actor=SERVER)
        return row

    return storage.write(run)


_STATE_OF = {
    ToolDecision.ALLOW_ONCE: ToolApprovalState.ALLOWED,
    ToolDecision.ALLOW_ALWAYS: ToolApprovalState.ALLOWED,
    ToolDecision.DENY: ToolApprovalState.DENIED,
}


def decide(approval_id: str, decision: Any, *, by: str) -> ToolApproval:
    """A person's answer to a pending tool call. One conditional update from
    ``pending`` decides it, so of two answers (or an answer and the timeout) exactly
    one lands; the other gets :class:`Conflict` ("already decided", 409).
    ``allow_always`` also grants this agent the tool from then on."""
    check_choice(decision, "decision", ToolDecision.values)

    def run() -> ToolApproval:
        at = now()
        changed = ToolApproval.objects.filter(
            pk=approval_id, state=ToolApprovalState.PENDING
        ).update(
            state=_STATE_OF[ToolDecision(decision)], decision=decision, decided_by=by, decided_at=at
        )
        row = ToolApproval.objects.select_related("task").filter(pk=approval_id).first()
        if row is None:
            raise NotFound(f"approval {approval_id!r} does not exist", approval_id=approval_id)
        if not changed:
            raise Conflict(
                f"approval {approval_id!r} is already decided ({row.state})", state=row.state
            )
        if decision == ToolDecision.ALLOW_ALWAYS:
            ToolGrant.objects.get_or_create(
                agent_id=row.agent_id,
                tool=row.tool,
                defaults={"granted_by": by, "approval": row, "created_at": at},
            )
        _emit(row, "tool_approval_decided", actor=by)
        return row

    return storage.write(run)


def expire(approval_id: str) -> bool:
    """Deny a still-pending call whose time is up (fail closed): True if this call
    did it."""

    def run() -> bool:
        changed = ToolApproval.objects.filter(
            pk=approval_id, state=ToolApprovalState.PENDING
        ).update(state=ToolApprovalState.TIMED_OUT, decided_at=now())
        if changed:
            row = ToolApproval.objects.select_related("task").get(pk=approval_id)
            _emit(row, "tool_approval_timed_out")
        return bool(changed)

    return storage.write(run)


def wait(approval_id: str, *, deadline_s: float | None = None) -> ToolApproval:
    """Wait for a person's answer until the approval's own expiry (or ``deadline_s``
    from now, whichever is first), polling the database: every process and host
    sees the one answer there. At the end a still-pending call is denied."""
    row = ToolApproval.objects.get(pk=approval_id)
    limit = (row.expires_at - now()).total_seconds()
    if deadline_s is not None:
        limit = min(limit, deadline_s)
    ends = time.monotonic() + max(0.0, limit)
    while row.state == ToolApprovalState.PENDING and time.monotonic() < ends:
        time.sleep(POLL_S)
        row = ToolApproval.objects.get(pk=approval_id)
    if row.state == ToolApprovalState.PENDING:
        expire(approval_id)
        row = ToolApproval.objects.get(pk=approval_id)
    return row


def list_approvals(
    *,
    teams: list[str] | None,
    state: str | None = ToolApprovalState.PENDING,
    task: str | None = None,
) -> QuerySet[ToolApproval]:
    """Tool approvals of ``teams`` (None: all), oldest first; by ``state`` (None: any)."""
    qs = ToolApproval.objects.all()
    if teams is not None:
        qs = qs.filter(team_id__in=teams)
    if state is not None:
        check_choice(state, "state", ToolApprovalState.values)
        qs = qs.filter(state=state)
    if task is not None:
        qs = qs.filter(task_id=task)
    return qs.order_by("created_at", "id")


def revoke_grants(grant_ids: list[int]) -> int:
    """Withdraw ``allow_always`` grants: those agents ask again for those tools."""
    return storage.write(lambda: ToolGrant.objects.filter(pk__in=grant_ids).delete()[0])
