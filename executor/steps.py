"""A run's steps from its tool's own stream: one reader per runtime, one step format.

Each reader is fed what its tool says (a stdout line, a gateway event, a session
store's messages) and returns the steps that ended with it, in order: a model turn
(with its tokens), a tool call (name, arguments, status, duration), a command, a
file change, an MCP or sub-agent call, an error. The executor hands them to the
board (:class:`executor.attempt.Attempt`), which masks secrets in arguments, bounds
them and stores them (:mod:`board.store.steps`): a reader passes arguments on as the
tool gave them. The kinds and statuses are the board's tables (:mod:`board.runs`).

Which stream event is which step, per tool:

============  =========================================  ==========================
runtime       stream event                               step
============  =========================================  ==========================
claude-code   ``assistant`` message (by id)              model_turn (its usage)
claude-code   ``tool_use`` … its ``tool_result``         by tool name (TOOL_KINDS)
claude-code   ``result`` with ``is_error``               error
codex         ``item.completed`` command_execution       command (exit code)
codex         ``item.completed`` file_change             file_change
codex         ``item.completed`` mcp_tool_call           mcp_call
codex         ``item.completed`` web_search              tool_call
codex         ``turn.completed``                         model_turn (its usage)
codex         ``turn.failed`` / ``error``                error
hermes        session store: assistant ``tool_calls``    by tool name (TOOL_KINDS)
hermes        … and the ``tool`` message answering it    (status from its result)
openclaw      ``agent`` event, stream ``item`` phase end  by tool name (TOOL_KINDS)
openclaw      stream ``lifecycle`` phase ``error``       error
============  =========================================  ==========================

No Django here: a remote worker runs the readers.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from board.runs import StepKind, StepStatus

DETAIL_CHARS = 2_000  # a result's text kept by the reader (the board bounds it again)

# Tool names (as each tool calls them, lower case) whose calls are not plain tool calls.
TOOL_KINDS: dict[str, StepKind] = {
    "bash": StepKind.COMMAND,
    "exec_command": StepKind.COMMAND,
    "exec": StepKind.COMMAND,
    "shell": StepKind.COMMAND,
    "terminal": StepKind.COMMAND,
    "process": StepKind.COMMAND,
    "write": StepKind.FILE_CHANGE,
    "write_file": StepKind.FILE_CHANGE,
    "edit": StepKind.FILE_CHANGE,
    "multiedit": StepKind.FILE_CHANGE,
    "notebookedit": StepKind.FILE_CHANGE,
    "patch": StepKind.FILE_CHANGE,
    "apply_patch": StepKind.FILE_CHANGE,
    "task": StepKind.SUBAGENT,
    "agent": StepKind.SUBAGENT,
    "delegate_task": StepKind.SUBAGENT,
}


def kind_of_tool(name: str) -> StepKind:
    """The step kind of a call to the tool ``name``: an MCP tool (``mcp__server__tool``,
    ``server.tool``) is an MCP call; a shell, an edit or a sub-agent by the table."""
    lowered = name.lower()
    if lowered.startswith("mcp__") or lowered.startswith("mcp_"):
        return StepKind.MCP_CALL
    return TOOL_KINDS.get(lowered, StepKind.TOOL_CALL)


@dataclass
class Step:
    """One step, as every reader makes it and the board's API takes it (:meth:`as_body`)."""

    kind: str
    name: str
    status: str = StepStatus.OK
    arguments: dict[str, Any] = field(default_factory=dict)
    detail: str = ""
    started_at: float | None = None  # seconds since the epoch
    duration_ms: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_millicents: int | None = None
    model: str | None = None

    def as_body(self) -> dict[str, Any]:
        body = asdict(self)
        body["kind"], body["status"] = str(self.kind), str(self.status)
        return body

    @property
    def failed(self) -> bool:
        return self.status == StepStatus.ERROR


def _text(value: Any) -> str:
    """A tool result's text: a string, or the text blocks of a content list."""
    if isinstance(value, str):
        return value[:DETAIL_CHARS]
    if isinstance(value, list):
        parts = [item.get("text", "") if isinstance(item, dict) else str(item) for item in value]
        return "\n".join(p for p in parts if isinstance(p, str))[:DETAIL_CHARS]
    if value is None:
        return ""
    return json.dumps(value, default=str)[:DETAIL_CHARS]


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class _Open:
    """A tool call seen started, waiting for its result."""

    def __init__(self, name: str, arguments: dict[str, Any], at: float) -> None:
        self.name, self.arguments, self.at = name, arguments, at

    def ended(self, status: str, detail: str, now: float, kind: StepKind | None = None) -> Step:
        return Step(
            kind=kind or kind_of_tool(self.name),
            name=self.name,
            status=status,
            arguments=self.arguments,
            detail=detail,
            started_at=self.at,
            duration_ms=max(round((now - self.at) * 1000), 0),
        )


class ClaudeSteps:
    """Claude Code's ``stream-json``: a model turn per assistant message (one line
    per content block, each repeating the message's usage), a step per ``tool_use``
    once its ``tool_result`` comes back (``is_error`` marks it failed)."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}
        self._turn: Step | None = None
        self._turn_id: str | None = None

    def feed(self, event: dict[str, Any]) -> list[Step]:
        now = time.time()
        out: list[Step] = []
        kind = event.get("type")
        found = event.get("message")
        message: dict[str, Any] = found if isinstance(found, dict) else {}
        if kind == "assistant":
            message_id = message.get("id")
            if message_id != self._turn_id or self._turn is None:
                out += self._end_turn(now)
                model = message.get("model")
                self._turn_id = message_id if isinstance(message_id, str) else None
                self._turn = Step(
                    kind=StepKind.MODEL_TURN,
                    name="model",
                    model=model if isinstance(model, str) else None,
                    started_at=now,
                )
            usage = message.get("usage")
            if isinstance(usage, dict) and self._turn is not None:
                self._turn.tokens_in = _count(usage.get("input_tokens"))
                self._turn.tokens_out = _count(usage.get("output_tokens"))
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    call_id, name = block.get("id"), block.get("name")
                    if isinstance(call_id, str) and isinstance(name, str):
                        self._open[call_id] = _Open(name, _arguments(block.get("input")), now)
            return out
        out += self._end_turn(now)
        if kind == "user":
            for block in message.get("content") or []:
                if not isinstance(block, dict) or block.get("type") != "tool_result":
                    continue
                call = self._open.pop(str(block.get("tool_use_id")), None)
                if call is None:
                    continue
                status = StepStatus.ERROR if block.get("is_error") else StepStatus.OK
                out.append(call.ended(status, _text(block.get("content")), now))
        elif kind == "result":
            out += self._unanswered(now)
            if event.get("is_error") is True:
                detail = event.get("result") or event.get("subtype") or "the run failed"
                out.append(Step(StepKind.ERROR, "result", StepStatus.ERROR, detail=_text(detail),
                                started_at=now))  # fmt: skip
        return out

    def _end_turn(self, now: float) -> list[Step]:
        turn, self._turn, self._turn_id = self._turn, None, None
        if turn is None:
            return []
        turn.duration_ms = max(int((now - (turn.started_at or now)) * 1000), 0)
        return [turn]

    def _unanswered(self, now: float) -> list[Step]:
        calls, self._open = list(self._open.values()), {}
        return [
            call.ended(StepStatus.ERROR, "no result before the run ended", now) for call in calls
        ]


class CodexSteps:
    """Codex's ``exec --json``: a step per completed item, a model turn per
    completed turn (its usage), an error per failed turn or error event."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}
        self._turn_at: float | None = None

    def feed(self, event: dict[str, Any]) -> list[Step]:
        now = time.time()
        kind = event.get("type")
        if kind == "turn.started":
            self._turn_at = now
        elif kind == "item.started":
            item = event.get("item")
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                self._started[item["id"]] = now
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict):
                step = self._item(item, now)
                return [step] if step is not None else []
        elif kind == "turn.completed":
            found = event.get("usage")
            usage: dict[str, Any] = found if isinstance(found, dict) else {}
            at = self._turn_at or now
            return [Step(StepKind.MODEL_TURN, "model", started_at=at,
                         duration_ms=int((now - at) * 1000),
                         tokens_in=_count(usage.get("input_tokens")),
                         tokens_out=_count(usage.get("output_tokens")))]  # fmt: skip
        elif kind in ("turn.failed", "error"):
            error = event.get("error") if kind == "turn.failed" else event
            message = error.get("message") if isinstance(error, dict) else None
            return [Step(StepKind.ERROR, kind, StepStatus.ERROR,
                         detail=_text(message or "failed"), started_at=now)]  # fmt: skip
        return []

    def _item(self, item: dict[str, Any], now: float) -> Step | None:
        at = self._started.pop(str(item.get("id")), now)
        failed = item.get("status") in ("failed", "declined")
        base: dict[str, Any] = {"started_at": at, "duration_ms": max(int((now - at) * 1000), 0)}
        match item.get("type"):
            case "command_execution":
                code = item.get("exit_code")
                bad = failed or (isinstance(code, int) and code != 0)
                command = str(item.get("command") or "")
                detail = _text(item.get("aggregated_output"))
                if isinstance(code, int):
                    detail = f"exit code {code}" + (f"\n{detail}" if detail else "")
                return Step(StepKind.COMMAND, command[:200] or "command",
                            StepStatus.ERROR if bad else StepStatus.OK,
                            {"command": command}, detail, **base)  # fmt: skip
            case "file_change":
                changes = [c for c in item.get("changes") or [] if isinstance(c, dict)]
                paths = ", ".join(str(c.get("path")) for c in changes) or "files"
                return Step(StepKind.FILE_CHANGE, paths[:200],
                            StepStatus.ERROR if failed else StepStatus.OK,
                            {"changes": changes}, **base)  # fmt: skip
            case "mcp_tool_call":
                name = f"{item.get('server')}.{item.get('tool')}"
                error = item.get("error")
                detail = _text(
                    error.get("message") if isinstance(error, dict) else item.get("result")
                )
                return Step(StepKind.MCP_CALL, name,
                            StepStatus.ERROR if failed or error else StepStatus.OK,
                            _arguments(item.get("arguments")), detail, **base)  # fmt: skip
            case "web_search":
                return Step(StepKind.TOOL_CALL, "web_search", StepStatus.OK,
                            {"query": item.get("query")}, **base)  # fmt: skip
        return None  # agent_message, reasoning, todo_list, a warning's error item


class OpenClawSteps:
    """The OpenClaw gateway's ``agent`` events of one run: a step per tool item once
    it ends (``phase: end``; its ``status`` says how), an error per failed lifecycle.
    The gateway streams a tool's title, not its arguments."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}

    def feed(self, stream: Any, data: dict[str, Any]) -> list[Step]:
        now = time.time()
        if stream == "item" and data.get("kind") == "tool":
            call_id = str(data.get("toolCallId") or data.get("itemId"))
            name = str(data.get("name") or "tool")
            at = data.get("startedAt")
            started = at / 1000 if isinstance(at, int | float) else now
            if data.get("phase") == "start":
                arguments = {k: data[k] for k in ("title", "meta") if isinstance(data.get(k), str)}
                self._open[call_id] = _Open(name, arguments, started)
                return []
            if data.get("phase") != "end":
                return []
            call = self._open.pop(call_id, None) or _Open(name, {}, started)
            ended = data.get("endedAt")
            end = ended / 1000 if isinstance(ended, int | float) else now
            status = data.get("status")
            bad = status not in (None, "completed", "ok", "success")
            detail = _text(data.get("error") or data.get("result") or "")
            return [call.ended(StepStatus.ERROR if bad else StepStatus.OK, detail, end)]
        if stream == "lifecycle" and data.get("phase") == "error":
            detail = _text(data.get("error") or "the run failed")
            return [
                Step(StepKind.ERROR, "lifecycle", StepStatus.ERROR, detail=detail, started_at=now)
            ]
        return []


def hermes_steps(messages: list[dict[str, Any]]) -> list[Step]:
    """Hermes's session messages of one run (its store's ``messages`` rows, oldest
    first: ``role``, ``content``, ``tool_calls``, ``tool_call_id``, ``timestamp``):
    a model turn per assistant message, a step per tool call answered by its
    ``tool`` message. ``-z`` prints only the final text, so the store is the stream."""
    out: list[Step] = []
    open_calls: dict[str, _Open] = {}
    for message in messages:
        role, at = message.get("role"), message.get("timestamp")
        at = float(at) if isinstance(at, int | float) else None
        if role == "assistant":
            out.append(Step(StepKind.MODEL_TURN, "model", started_at=at,
                            tokens_out=_count(message.get("token_count"))))  # fmt: skip
            for call in _arguments(message.get("tool_calls")).get("input") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict):
                    open_calls[str(call.get("id"))] = _Open(
                        str(function.get("name") or "tool"),
                        _arguments(function.get("arguments")),
                        at or time.time(),
                    )
        elif role == "tool":
            call = open_calls.pop(str(message.get("tool_call_id")), None)
            if call is None:
                continue
            content = message.get("content")
            out.append(call.ended(_hermes_status(content), _text(content), at or call.at))
    return out


def _hermes_status(content: Any) -> str:
    """A Hermes tool result's verdict: its JSON's ``error``, ``success: false`` or a
    non-zero ``exit_code`` fail it."""
    result = _arguments(content) if isinstance(content, str) else {}
    code = result.get("exit_code", result.get("returncode"))
    if (
        result.get("error")
        or result.get("success") is False
        or (isinstance(code, int) and not isinstance(code, bool) and code != 0)
    ):
        return StepStatus.ERROR
    return StepStatus.OK
