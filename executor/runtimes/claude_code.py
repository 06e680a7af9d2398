"""The ``claude-code`` runtime: ``claude -p`` with ``--output-format stream-json``.

Wire format (RUNTIMES.md): one JSON object per line, keyed by ``type``. ``system``
(subtype ``init``) names the session; ``assistant`` lines carry text and per-message
usage; ``result`` ends the run. ``is_error`` decides success -- it can be true with
``subtype: "success"`` (a model 401 is exactly that, exit 1). A tool call the
permission mode refused (a ``system``/``permission_denied`` line, the result's
``permission_denials``) fails the run too: the real CLI still ends it ``success``,
``is_error: false``, exit 0, with nothing written. Unknown types and fields are
ignored; malformed lines skipped.

Settings: ``model``, ``permission_mode`` (default ``acceptEdits``: with no mode a
``-p`` run may not write, and ``bypassPermissions`` exits 1 as root),
``max_turns``, ``allowed_tools`` (list or "a,b"), ``extra_args`` (list, inserted
before the prompt), ``binary``.

A run reads no configuration from the worktree: ``--setting-sources user`` and
``--strict-mcp-config`` (the builder writes the worktree its next run starts in).
An operator who wants the project's files read says so in ``extra_args``. The
project's instructions (``CLAUDE.md``, ``.claude/CLAUDE.md``), which that flag drops
too, come back from the task's base commit
(:func:`executor.runtimes.claude_instructions.project_instructions`) through
``--append-system-prompt``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from executor.runtimes.base import (
    AsksPeople,
    Capabilities,
    RunRequest,
    as_count,
    usd_to_cents,
    usd_to_millicents,
)
from executor.runtimes.claude_instructions import project_instructions
from executor.runtimes.oneshot import (
    LineParser,
    OneShotCliAdapter,
    SettingsError,
    json_line,
    setting_list,
    setting_str,
)
from executor.steps import ClaudeSteps

# What Claude Code 2.1.332 accepts: "acceptEdits, auto, bypassPermissions, manual,
# dontAsk, plan", and still "default" (shown as "default", as is "manual").
PERMISSION_MODES = {
    "acceptEdits",
    "auto",
    "bypassPermissions",
    "default",
    "dontAsk",
    "manual",
    "plan",
}
DEFAULT_PERMISSION_MODE = "acceptEdits"


class ClaudeStreamParser(LineParser):
    def __init__(self) -> None:
        super().__init__()
        # Claude Code prints one assistant line per content block, each repeating the
        # message's usage: count each message id once, keeping its latest figures.
        self._usage_by_message: dict[str, tuple[int, int, int, int]] = {}
        self._last_text = ""
        # Tool calls the permission mode refused: tool name -> the CLI's message.
        self.denials: dict[str, str] = {}

    def feed(self, line: str) -> None:
        event = json_line(line)
        if event is None:
            return
        kind = event.get("type")
        session_id = event.get("session_id")
        if isinstance(session_id, str) and session_id:
            self.parsed.native_session_id = session_id
        model = event.get("model")
        if kind == "system" and event.get("subtype") == "init" and isinstance(model, str):
            self.parsed.model = model
        if kind == "assistant":
            self._read_assistant(event)
        elif kind == "system" and event.get("subtype") == "permission_denied":
            self._deny(event.get("tool_name"), event.get("message"))
        elif kind == "result":
            self._read_result(event)

    def _deny(self, tool: object, message: object) -> None:
        name = tool if isinstance(tool, str) and tool else "a tool"
        if name not in self.denials or (isinstance(message, str) and message):
            self.denials[name] = message if isinstance(message, str) else ""

    def _read_assistant(self, event: dict[str, Any]) -> None:
        message = event.get("message")
        if not isinstance(message, dict):
            return
        content = message.get("content")
        if isinstance(content, list):
            texts = [
                block["text"]
                for block in content
                if isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ]
            if texts:
                self._last_text = "\n".join(texts)
                if self.parsed.ok is None:
                    self.parsed.summary = self._last_text
        usage = message.get("usage")
        if isinstance(usage, dict):
            message_id = message.get("id")
            # Without an id each line counts on its own ("#n" cannot clash with "msg_...").
            key = message_id if isinstance(message_id, str) else f"#{len(self._usage_by_message)}"
            self._usage_by_message[key] = _counts(usage)
            model = message.get("model")
            if isinstance(model, str) and model and not model.startswith("<"):
                self.parsed.model = model
            if self.parsed.ok is None:  # the result line's totals, once seen, win
                totals = [sum(u[i] for u in self._usage_by_message.values()) for i in range(4)]
                self._set_counts(tuple(totals))

    def _read_result(self, event: dict[str, Any]) -> None:
        is_error = event.get("is_error")
        subtype = event.get("subtype")
        text = event.get("result")
        # Judge by is_error; fall back to subtype only if is_error is missing.
        ok = (not is_error) if isinstance(is_error, bool) else subtype == "success"
        self.parsed.ok = ok
        if isinstance(text, str):
            self.parsed.summary = text
        elif self._last_text:
            self.parsed.summary = self._last_text
        denials = event.get("permission_denials")
        if isinstance(denials, list):
            for denial in denials:
                if isinstance(denial, dict):
                    self._deny(denial.get("tool_name"), None)
        if not ok:
            detail = text if isinstance(text, str) and text else ""
            errors = event.get("errors")
            if not detail and isinstance(errors, list):
                detail = "; ".join(str(e) for e in errors if e)
            status = event.get("api_error_status")
            if isinstance(status, int) and not isinstance(status, bool):
                label = f"an API error (HTTP {status})"
            elif isinstance(subtype, str) and subtype and subtype != "success":
                label = subtype
            else:
                label = "an error"
            self.parsed.error = f"claude reported {label}" + (f": {detail}" if detail else "")
        elif self.denials:
            self.parsed.ok = False
            refused = "; ".join(
                f"{tool}: {message}" if message else tool for tool, message in self.denials.items()
            )
            self.parsed.error = f"claude was refused permission ({refused})"
        cost = usd_to_cents(event.get("total_cost_usd"))
        if cost is not None:
            self.parsed.cost_cents = cost
            self.parsed.cost_millicents = usd_to_millicents(event.get("total_cost_usd"))
        usage = event.get("usage")
        if isinstance(usage, dict):
            self._set_counts(_counts(usage))

    def _set_counts(self, counts: tuple[int, ...]) -> None:
        parsed = self.parsed
        parsed.tokens_in, parsed.tokens_out, parsed.cache_read, parsed.cache_write = counts


def _counts(usage: dict[str, Any]) -> tuple[int, int, int, int]:
    """(input, output, cache read, cache write): Anthropic reports cached prompt
    tokens apart from ``input_tokens``, each priced at its own rate."""
    return (
        as_count(usage.get("input_tokens")),
        as_count(usage.get("output_tokens")),
        as_count(usage.get("cache_read_input_tokens")),
        as_count(usage.get("cache_creation_input_tokens")),
    )


def write_mcp_config(request: RunRequest, scratch: Path) -> Path:
    """The run's ``--mcp-config`` file, in the run's private scratch dir (removed with
    it): the board's server over HTTP with the run's credential."""
    assert request.mcp is not None
    path = scratch / "mcp.json"
    server = {
        "type": "http",
        "url": request.mcp.url,
        "headers": {"Authorization": f"Token {request.mcp.token}"},
        # In the prompt from the first turn, not deferred behind tool search (2.1.332
        # defers MCP tools by default): the run's own board is not something to find.
        "alwaysLoad": True,
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump({"mcpServers": {request.mcp.name: server}}, file)
    return path


def permission_prompt_tool(server: str) -> str:
    """The board's permission prompt tool as Claude Code names an MCP tool."""
    from boardmcp.tools import PERMISSION_PROMPT_TOOL

    return f"mcp__{server}__{PERMISSION_PROMPT_TOOL}"


class ClaudeCodeAdapter(OneShotCliAdapter):
    runtime = "claude-code"
    binary = "claude"
    capabilities = Capabilities(
        integration="one-shot",
        worktrees=True,
        mcp=True,
        asks_people=AsksPeople(
            "permission_mode",
            DEFAULT_PERMISSION_MODE,
            frozenset({"bypassPermissions", "dontAsk", "plan"}),
        ),
    )

    def build_argv(self, request: RunRequest, executable: str, scratch: Path) -> list[str]:
        settings = request.settings
        argv = [executable, "--output-format", "stream-json", "--verbose"]
        # The worktree is the builder's to write, and its next run (a fix round, a
        # retry) starts in it: Claude Code would read the project's
        # .claude/settings.json and settings.local.json (permissions.allow, hooks that
        # run shell commands, env, model) and .mcp.json as configuration, so the run
        # could widen its own next run without a person (GOVERNANCE §6). Only the
        # operator's user settings load, and only the MCP servers given here; the
        # flag drops the project's CLAUDE.md and skills too (a skill's allowed-tools):
        # its instructions come back from the task's base commit, as committed.
        argv += ["--setting-sources", "user", "--strict-mcp-config"]
        instructions = project_instructions(request.project_base) if request.project_base else None
        if instructions is not None:
            # The equals form: a text starting with "-" is not read as a flag.
            argv.append(f"--append-system-prompt={instructions}")
        if request.mcp is not None:
            # Right after the fixed flags: --mcp-config takes several values, and the
            # next flag ends them.
            argv += ["--mcp-config", str(write_mcp_config(request, scratch))]
        mode = setting_str(settings, "permission_mode") or DEFAULT_PERMISSION_MODE
        if mode not in PERMISSION_MODES:
            raise SettingsError(
                f"permission_mode {mode!r} is not one of {sorted(PERMISSION_MODES)}"
            )
        argv += ["--permission-mode", mode]
        model = setting_str(settings, "model")
        if model is not None:
            argv += ["--model", model]
        max_turns = settings.get("max_turns")
        if max_turns is not None:
            if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
                raise SettingsError("max_turns must be a positive integer")
            argv += ["--max-turns", str(max_turns)]
        tools = setting_list(settings, "allowed_tools", comma_separated=True)
        if request.mcp is not None:
            # A -p run may not call a tool its permission mode has not allowed; the
            # board's tools are allowed by server name.
            tools.append(f"mcp__{request.mcp.name}")
        if tools:
            argv += ["--allowedTools", ",".join(tools)]
        if request.mcp is not None:
            # A call the permission mode does not allow asks a person through the
            # board (GOVERNANCE §5) instead of failing: the run waits for the answer.
            argv += ["--permission-prompt-tool", permission_prompt_tool(request.mcp.name)]
        if request.resume_session_id:
            # The equals form, so an id starting with "-" is not read as a flag.
            argv.append(f"--resume={request.resume_session_id}")
        argv += setting_list(settings, "extra_args")
        # The prompt goes last after "--" (as the Agent SDK does): --allowedTools takes
        # several values and would swallow a following prompt, and a prompt starting
        # with "-" must not be read as a flag.
        argv += ["-p", "--", request.prompt]
        return argv

    def new_parser(self, request: RunRequest) -> LineParser:
        return ClaudeStreamParser()

    def new_step_reader(self) -> ClaudeSteps:
        return ClaudeSteps()
