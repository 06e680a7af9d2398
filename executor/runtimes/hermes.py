"""The ``hermes`` runtime: ``hermes -z`` for a new session, ``hermes chat -q -Q
--resume`` to continue one.

What the real CLI (0.19.0) does, and why this module reads it the way it does:

- ``hermes -z PROMPT --usage-file PATH`` prints the final answer only. It **exits 0
  even when the model call failed**, printing the error as its answer; only the usage
  report says how the run ended (``"completed": false, "failed": true``). So the
  report, when there is one, is the verdict; without one the exit code decides.
  The report is flat: ``input_tokens``, ``output_tokens``, ``estimated_cost_usd``,
  ``cost_status`` (``"unknown"`` means no price, not a cost of 0), ``session_id``.
- ``-z`` ignores ``--resume`` (every run is a new session). ``hermes chat -q PROMPT
  -Q --resume ID`` really resumes: it exits 1 when the model failed, prints the
  answer last on stdout after tool previews, and ``session_id: ID`` on stderr. It
  takes no ``--usage-file``; its tokens and cost are what the session's row in
  Hermes's session store (``state.db``, ``sessions``: running totals per session)
  gained during the run, read before and after it; unknown when the store cannot
  be read. It is given the approvals ``-z`` grants itself (``--yolo``, ``--accept-hooks``): there
  is nobody to answer a prompt.
- ``--provider`` without ``--model`` exits 2: refused here before anything runs.

The board's MCP server (``RunRequest.mcp``) reaches Hermes only through
``mcp_servers:`` in ``$HERMES_HOME/config.yaml``: the run gets a home of its own in
its scratch dir, the user's linked entry by entry with the board added to the config
(:mod:`executor.runtimes.hermes_home`, which says why and what stays the user's).
``--toolsets`` names the board too when the agent's settings list toolsets.

Settings: ``model``, ``provider``, ``toolsets`` (list or "a,b"), ``extra_args``,
``binary``.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from executor.runtimes import hermes_home
from executor.runtimes.base import (
    Capabilities,
    RunRequest,
    as_count,
    prompt_argument,
    usd_to_cents,
    usd_to_millicents,
)
from executor.runtimes.oneshot import (
    LineParser,
    OneShotCliAdapter,
    SettingsError,
    child_environment,
    setting_list,
    setting_str,
)
from executor.runtimes.process import ProcessRun
from executor.steps import Step, hermes_steps

USAGE_FILE = "usage.json"
# A resumed session's totals in Hermes's store as the run starts (for the difference).
SESSION_BEFORE = "session-before.json"
SESSION_STORE = "state.db"
# The final answer is kept whole up to this size; beyond it only the start is kept.
SUMMARY_CHARS = 20_000

_INPUT_KEYS = ("input_tokens", "prompt_tokens", "total_input_tokens")
_OUTPUT_KEYS = ("output_tokens", "completion_tokens", "total_output_tokens")
_COST_KEYS = ("total_cost_usd", "cost_usd", "estimated_cost_usd")
_SESSION_KEYS = ("session_id", "sessionId", "session")
_SESSION_LINE = re.compile(r"^session_id: (\S+)\s*$")
# chat -Q's decorations before the answer: "  ⚠ ..." notices and "  ┊ ..." tool
# previews; a "┊ review diff" preview is followed by the diff itself.
_DECORATION = re.compile(r"^\s+[⚠┊]")
_DIFF_LINE = re.compile(r"^(a/.* → b/|@@ |[+\- \\])")


# hermes_cli/plugins.py (0.19.0): "Project plugins (./.hermes/plugins/)", opt-in.
PROJECT_PLUGINS_ENV = "HERMES_ENABLE_PROJECT_PLUGINS"


class HermesOutputParser(LineParser):
    """Collects stdout (the final text) as the summary; in chat mode, the session id
    from stderr and the answer without the tool previews."""

    def __init__(self, *, chat: bool = False) -> None:
        super().__init__()
        self.chat = chat
        self._chars = 0
        self._lines: list[str] = []
        self._in_diff = False

    def feed(self, line: str) -> None:
        if self.chat and self._is_decoration(line):
            return
        if self._chars >= SUMMARY_CHARS:
            return
        self._lines.append(line)
        self._chars += len(line) + 1
        self.parsed.summary = "\n".join(self._lines).strip()[:SUMMARY_CHARS]

    def _is_decoration(self, line: str) -> bool:
        if _DECORATION.match(line):
            self._in_diff = "review diff" in line
            return True
        if self._in_diff and _DIFF_LINE.match(line):
            return True
        self._in_diff = False
        return False

    def feed_stderr(self, line: str) -> None:
        match = _SESSION_LINE.match(line)
        if match:
            self.parsed.native_session_id = match.group(1)

    def read_usage(self, report: object) -> None:
        """Fill tokens, cost, session id and the verdict from the usage report."""
        if not isinstance(report, dict):
            return
        nested = report.get("usage")
        sources: list[dict[str, Any]] = [report] + ([nested] if isinstance(nested, dict) else [])
        for source in sources:
            tokens_in = _first(source, _INPUT_KEYS)
            if tokens_in is not None:
                self.parsed.tokens_in = as_count(tokens_in)
            tokens_out = _first(source, _OUTPUT_KEYS)
            if tokens_out is not None:
                self.parsed.tokens_out = as_count(tokens_out)
            if source.get("cost_status") != "unknown":
                cost = usd_to_cents(_first(source, _COST_KEYS))
                if cost is not None:
                    self.parsed.cost_cents = cost
                    self.parsed.cost_millicents = usd_to_millicents(_first(source, _COST_KEYS))
            for key, field in (
                ("cache_read_tokens", "cache_read"),
                ("cache_write_tokens", "cache_write"),
            ):
                if key in source:
                    setattr(self.parsed, field, as_count(source.get(key)))
            model = source.get("model")
            if isinstance(model, str) and model:
                self.parsed.model = model
            session = _first(source, _SESSION_KEYS)
            if isinstance(session, str) and session:
                self.parsed.native_session_id = session
        failed, completed = report.get("failed"), report.get("completed")
        if failed is True or completed is False:
            self.parsed.ok = False
            detail = self.parsed.summary or str(report.get("failure") or "")
            self.parsed.error = "hermes reported a failed run" + (f": {detail}" if detail else "")
        elif completed is True:
            self.parsed.ok = True

    def read_session_gain(self, before: dict[str, Any], after: dict[str, Any]) -> None:
        """A resumed run's tokens and cost: what its session's totals gained."""
        self.parsed.tokens_in = max(0, after["input_tokens"] - before["input_tokens"])
        self.parsed.tokens_out = max(0, after["output_tokens"] - before["output_tokens"])
        spent = after["cost_usd"], before["cost_usd"]
        if after["cost_status"] != "unknown" and None not in spent:
            self.parsed.cost_cents = usd_to_cents(max(0.0, spent[0] - spent[1]))
            self.parsed.cost_millicents = usd_to_millicents(max(0.0, spent[0] - spent[1]))


def session_totals(home: Path, session_id: str) -> dict[str, Any] | None:
    """The running totals Hermes's session store keeps for ``session_id``, or None
    (no store, no such session, a store this version cannot read). Read-only: the
    store is the user's and Hermes's."""
    path = (home / SESSION_STORE).resolve()
    if not path.is_file():
        return None
    row = None
    for attempt in range(3):
        try:
            with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=2)) as db:
                row = db.execute(
                    "SELECT input_tokens, output_tokens, estimated_cost_usd, cost_status"
                    " FROM sessions WHERE id = ?",
                    (session_id,),
                ).fetchone()
            break
        except sqlite3.DatabaseError as exc:
            # Not a store at all, or no sessions table: nothing to read.
            if not isinstance(exc, sqlite3.OperationalError) or "no such" in str(exc):
                return None
            # A reader can catch Hermes mid-checkpoint; Hermes's own readers retry too.
            if attempt == 2:
                return None
            time.sleep(0.05)
    if row is None:
        return None
    return {
        "input_tokens": as_count(row[0]),
        "output_tokens": as_count(row[1]),
        "cost_usd": row[2] if isinstance(row[2], int | float) else None,
        "cost_status": row[3],
    }


def session_messages(home: Path, session_id: str, since: float) -> list[dict[str, Any]]:
    """The session's messages from ``since`` (epoch seconds) in Hermes's store, oldest
    first; none when the store cannot be read. Read-only, as :func:`session_totals`."""
    path = (home / SESSION_STORE).resolve()
    if not path.is_file():
        return []
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=2)) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT role, content, tool_calls, tool_call_id, tool_name, timestamp,"
                " token_count FROM messages WHERE session_id = ? AND timestamp >= ?"
                " ORDER BY id",
                (session_id, since),
            ).fetchall()
    except sqlite3.DatabaseError:
        return []
    return [dict(row) for row in rows]


def _first(source: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in source:
            return source[key]
    return None


class HermesAdapter(OneShotCliAdapter):
    runtime = "hermes"
    binary = "hermes"
    requires_verdict = False
    capabilities = Capabilities(integration="one-shot", worktrees=True, mcp=True)

    def build_argv(self, request: RunRequest, executable: str, scratch: Path) -> list[str]:
        settings = request.settings
        prompt = prompt_argument(request.prompt)
        if request.resume_session_id:
            # The equals form, so an id starting with "-" is not read as a flag.
            argv = [executable, "chat", "-q", prompt, "-Q"]
            argv += [f"--resume={request.resume_session_id}", "--yolo", "--accept-hooks"]
        else:
            argv = [executable, "-z", prompt, "--usage-file", str(scratch / USAGE_FILE)]
        model = setting_str(settings, "model")
        if model is not None:
            argv += ["--model", model]
        provider = setting_str(settings, "provider")
        if provider is not None:
            if model is None:
                raise SettingsError("provider needs model (hermes exits 2 without it)")
            argv += ["--provider", provider]
        toolsets = setting_list(settings, "toolsets", comma_separated=True)
        if toolsets and request.mcp is not None:
            toolsets.append(request.mcp.name)
        if toolsets:
            argv += ["--toolsets", ",".join(toolsets)]
        extra = setting_list(settings, "extra_args")
        if request.mcp is not None:
            # The run's home is the profile's already (hermes_home.user_home).
            extra, _ = hermes_home.split_profile(extra)
        argv += extra
        return argv

    def prepare_run(self, request: RunRequest, scratch: Path, env: dict[str, str]) -> None:
        # Hermes loads plugins (Python it imports and runs) from ./.hermes/plugins/ in
        # its working directory when this is set; the worktree is the builder's to
        # write and its next run starts in it, so a run never inherits the opt-in: a
        # plugin the builder wrote would widen that run without a person (GOVERNANCE
        # §6). Hermes reads nothing else of the project but context files (prompt).
        env.pop(PROJECT_PLUGINS_ENV, None)
        _, profile = hermes_home.split_profile(setting_list(request.settings, "extra_args"))
        if request.resume_session_id:
            try:
                store_home = hermes_home.user_home(env, profile)
            except SettingsError:
                store_home = None  # a profile that is not there: hermes says so itself
            if store_home is not None:
                before = session_totals(store_home, request.resume_session_id)
                record = {"home": str(store_home), "totals": before}
                (scratch / SESSION_BEFORE).write_text(json.dumps(record), encoding="utf-8")
        if request.mcp is None:
            return
        home = hermes_home.user_home(env, profile)
        try:
            run_home = hermes_home.make_run_home(scratch, home, request.mcp)
        except OSError as exc:
            raise SettingsError(f"cannot make the run's hermes home from {home}: {exc}") from exc
        env["HERMES_HOME"] = str(run_home)

    def new_parser(self, request: RunRequest) -> LineParser:
        return HermesOutputParser(chat=bool(request.resume_session_id))

    def after_exit(
        self, request: RunRequest, parser: LineParser, scratch: Path, process: ProcessRun
    ) -> None:
        assert isinstance(parser, HermesOutputParser)
        if parser.chat:
            # chat -q's verdict is its exit code; its reason is the answer it printed.
            if process.exit_code not in (0, None) and parser.parsed.summary:
                last = parser.parsed.summary.rsplit("\n", 1)[-1]
                parser.parsed.error = f"hermes exited with code {process.exit_code}: {last}"
            self._read_session_gain(request, parser, scratch)
            return
        try:
            report = json.loads((scratch / USAGE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return  # no report (killed, older version): the exit code decides
        parser.read_usage(report)

    def steps_after_exit(
        self, request: RunRequest, parser: LineParser, process: ProcessRun
    ) -> list[Step]:
        """The run's steps from its session's messages in Hermes's store: ``-z``
        prints only its answer, and the store keeps every turn and tool call."""
        session = parser.parsed.native_session_id or request.resume_session_id
        if not session:
            return []
        _, profile = hermes_home.split_profile(setting_list(request.settings, "extra_args"))
        try:
            home = hermes_home.user_home(child_environment(request), profile)
        except SettingsError:
            return []
        since = time.time() - process.duration_s - 1.0  # a resumed session's older turns
        return hermes_steps(session_messages(home, session, since))

    def _read_session_gain(
        self, request: RunRequest, parser: HermesOutputParser, scratch: Path
    ) -> None:
        try:
            record = json.loads((scratch / SESSION_BEFORE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        before = record.get("totals")
        session = parser.parsed.native_session_id or request.resume_session_id
        if session != request.resume_session_id:
            # Continued under a new id: all of that session's totals are this run's.
            before = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        if not isinstance(before, dict) or not session:
            return
        after = session_totals(Path(record["home"]), session)
        if after is not None:
            parser.read_session_gain(before, after)
