"""The ``codex`` runtime: ``codex exec --json``, resumed with ``codex exec --json resume``.

Wire format (RUNTIMES.md, codex-rs ``exec_events.rs``, checked against the real CLI
0.171.0): JSONL events keyed by ``type``:
``thread.started{thread_id}``, ``turn.started``, ``item.started|updated|completed
{item}``, ``turn.completed{usage}``, ``turn.failed{error{message}}``,
``error{message}``. The ``thread_id`` is the native session id. The last terminal
event decides: a ``turn.completed`` after a transient ``error`` is still success, and
an ``item`` of type ``error`` (a custom provider's "model metadata not found") is a
warning, not a failure. A model 401 is ``error`` then ``turn.failed``, exit 1.
Codex reports tokens but no cost, so ``cost_cents`` stays None and the run is priced
from its model: ``settings["model"]``, else the ``model`` of Codex's own config.toml.

Settings: ``model``, ``sandbox`` (default ``workspace-write``), ``extra_args``
(inserted before the prompt / ``resume``), ``binary``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from executor.runtimes.base import Capabilities, RunRequest, as_count, prompt_argument
from executor.runtimes.oneshot import (
    LineParser,
    OneShotCliAdapter,
    SettingsError,
    json_line,
    setting_list,
    setting_str,
)
from executor.steps import CodexSteps

SANDBOX_MODES = {"read-only", "workspace-write", "danger-full-access"}


class CodexEventParser(LineParser):
    def feed(self, line: str) -> None:
        event = json_line(line)
        if event is None:
            return
        kind = event.get("type")
        if kind == "thread.started":
            thread_id = event.get("thread_id")
            if isinstance(thread_id, str) and thread_id:
                self.parsed.native_session_id = thread_id
        elif kind == "turn.completed":
            self._add_usage(event.get("usage"))
            self.parsed.ok = True
            self.parsed.error = ""
        elif kind == "turn.failed":
            self.parsed.ok = False
            self.parsed.error = "codex turn failed: " + _message(event.get("error"))
        elif kind == "error":
            self.parsed.ok = False
            self.parsed.error = "codex error: " + _message(event)
        elif kind == "item.completed":
            item = event.get("item")
            if isinstance(item, dict) and item.get("type") == "agent_message":
                text = item.get("text")
                if isinstance(text, str):
                    self.parsed.summary = text

    def _add_usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        # input_tokens already includes cached_input_tokens (OpenAI's convention):
        # the cached part is priced apart, as a cache read.
        cached = as_count(usage.get("cached_input_tokens"))
        fresh = max(as_count(usage.get("input_tokens")) - cached, 0)
        parsed = self.parsed
        parsed.tokens_in = (parsed.tokens_in or 0) + fresh
        parsed.tokens_out = (parsed.tokens_out or 0) + as_count(usage.get("output_tokens"))
        parsed.cache_read = (parsed.cache_read or 0) + cached
        parsed.cache_write = (parsed.cache_write or 0) + as_count(
            usage.get("cache_write_input_tokens")
        )


def _message(payload: Any) -> str:
    if isinstance(payload, dict) and isinstance(payload.get("message"), str):
        return payload["message"]
    return "no message"


class CodexAdapter(OneShotCliAdapter):
    runtime = "codex"
    binary = "codex"
    capabilities = Capabilities(integration="one-shot", worktrees=True, mcp=True)

    def build_argv(self, request: RunRequest, executable: str, scratch: Path) -> list[str]:
        settings = request.settings
        sandbox = setting_str(settings, "sandbox") or "workspace-write"
        if sandbox not in SANDBOX_MODES:
            raise SettingsError(f"sandbox {sandbox!r} is not one of {sorted(SANDBOX_MODES)}")
        # Exec-level flags go before "resume" and are repeated on resume: a resumed
        # session does not keep the sandbox or working directory by itself, and flags
        # after "resume" are rejected. Codex refuses a directory that is not a git
        # checkout unless told otherwise; the executor chose this one (the task's
        # worktree, or its scratch dir for work that needs none).
        argv = [executable, "exec", "--json", "--sandbox", sandbox, "-C", str(request.cwd)]
        argv.append("--skip-git-repo-check")
        model = setting_str(settings, "model")
        if model is not None:
            argv += ["--model", model]
        if request.mcp is not None:
            # The board's server for this run only (config.toml's mcp_servers, as
            # overrides); the credential stays off the command line, in the
            # environment (CLAWBOO_MCP_TOKEN, RunRequest.task_environment).
            server = f"mcp_servers.{request.mcp.name}"
            argv += ["-c", f"{server}.url={json.dumps(request.mcp.url)}"]
            argv += ["-c", f'{server}.bearer_token_env_var="CLAWBOO_MCP_TOKEN"']
        argv += setting_list(settings, "extra_args")
        if request.resume_session_id:
            argv += ["resume", request.resume_session_id]
        argv.append(prompt_argument(request.prompt))
        return argv

    def new_parser(self, request: RunRequest) -> LineParser:
        return CodexEventParser()

    def new_step_reader(self) -> CodexSteps:
        return CodexSteps()

    def default_model(self, request: RunRequest, env: Mapping[str, str]) -> str | None:
        return setting_str(request.settings, "model") or configured_model(env)


def configured_model(env: Mapping[str, str]) -> str | None:
    """The ``model`` at the top of Codex's config.toml ($CODEX_HOME, else ~/.codex)."""
    home = env.get("CODEX_HOME") or str(Path(env.get("HOME") or Path.home()) / ".codex")
    try:
        with (Path(home) / "config.toml").open("rb") as file:
            config = tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    model = config.get("model")
    return model if isinstance(model, str) and model else None
