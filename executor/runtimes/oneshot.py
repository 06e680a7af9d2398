"""What every one-shot CLI adapter shares: find the binary, run it, judge the end.

A subclass says how to build its argv and which line parser reads its stdout; this
module turns the process's end and the parser's findings into a :class:`RunResult`
by one rule, so timeouts, cancels and missing binaries read the same everywhere.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from abc import abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from core.worker_environment import agent_environment
from executor.runtimes.base import (
    Capabilities,
    Outcome,
    OutputCallback,
    RunRequest,
    RunResult,
    RuntimeAdapter,
    UsageSoFar,
    executable_missing,
    usage_fields,
)
from executor.runtimes.process import ProcessRun, run_process
from executor.steps import Step
from worktrees.git import GitError


@dataclass
class ParsedRun:
    """What a line parser learned from a run's stdout."""

    native_session_id: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_cents: int | None = None
    cost_millicents: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    model: str | None = None
    summary: str = ""
    error: str = ""
    # True/False once the stream itself said how the run ended; None if it never did.
    ok: bool | None = None


class LineParser:
    """Reads stdout one line at a time. Must never raise on bad input."""

    def __init__(self) -> None:
        self.parsed = ParsedRun()

    def feed(self, line: str) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def feed_stderr(self, line: str) -> None:
        """A stderr line; most CLIs keep nothing there worth parsing."""


class OneShotCliAdapter(RuntimeAdapter):
    capabilities = Capabilities(integration="one-shot", worktrees=True)
    # The executable looked up on PATH (settings["binary"] may name another).
    binary: str
    # Whether success needs the stream's own verdict (a result/turn.completed line);
    # when False, exit code 0 is enough.
    requires_verdict: bool = True

    def executable_name(self, request: RunRequest) -> str:
        """The program to run: ``settings["binary"]`` or the CLI's usual name."""
        return setting_str(request.settings, "binary") or self.binary

    def locate(self, name: str, request: RunRequest, env: Mapping[str, str]) -> str | None:
        """The program's path, or None when it is not installed."""
        return find_executable(name, env)

    @abstractmethod
    def build_argv(self, request: RunRequest, executable: str, scratch: Path) -> list[str]:
        """The full argv, starting with ``executable``.

        ``scratch`` is a private directory, removed after the run, for files the CLI
        should write outside the worktree (where they would show up in the diff).
        """

    @abstractmethod
    def new_parser(self, request: RunRequest) -> LineParser:
        """A fresh parser for one run."""

    def default_model(self, request: RunRequest, env: Mapping[str, str]) -> str | None:
        """The model a run uses when its stream does not name one (prices its tokens)."""
        return setting_str(request.settings, "model")

    def prepare_run(self, request: RunRequest, scratch: Path, env: dict[str, str]) -> None:
        """Hook for what a run needs besides its argv: files in ``scratch`` (removed
        with it) and ``env`` entries pointing at them. May raise :class:`SettingsError`."""

    def after_exit(
        self, request: RunRequest, parser: LineParser, scratch: Path, process: ProcessRun
    ) -> None:
        """Hook for reading what the CLI left in ``scratch`` (e.g. a usage file)."""

    def steps_after_exit(
        self, request: RunRequest, parser: LineParser, process: ProcessRun
    ) -> list[Step]:
        """Steps a CLI leaves behind rather than prints (Hermes's session store),
        read once it has exited; told to ``request.on_step`` after the stream's."""
        return []

    def new_step_reader(self) -> StepReader | None:
        """A fresh reader of the run's steps from its stdout's JSON lines, or None
        (a CLI whose stdout tells no steps)."""
        return None

    def run(
        self,
        request: RunRequest,
        *,
        cancel: threading.Event | None = None,
        on_output: OutputCallback | None = None,
    ) -> RunResult:
        env = child_environment(request)
        with tempfile.TemporaryDirectory(prefix=f"clawboo-{self.runtime}-") as tmp:
            scratch = Path(tmp)
            try:
                name = self.executable_name(request)
                executable = self.locate(name, request, env)
                if executable is None:
                    return RunResult(outcome=Outcome.FAILED, error=executable_missing(name))
                argv = self.build_argv(request, executable, scratch)
                self.prepare_run(request, scratch, env)
            except SettingsError as exc:
                return RunResult(
                    outcome=Outcome.FAILED, error=f"bad {self.runtime} settings: {exc}"
                )
            except GitError as exc:
                # The run's project files (its base commit's) could not be read: not
                # run without them.
                return RunResult(outcome=Outcome.FAILED, error=f"{self.runtime}: {exc}")
            parser = self.new_parser(request)
            try:
                parser.parsed.model = self.default_model(request, env)
            except SettingsError:
                parser.parsed.model = None
            process = run_process(
                argv,
                cwd=request.cwd,
                env=env,
                timeout_s=request.timeout_s,
                on_stdout_line=_reporting_steps(self, request, _reporting_usage(parser, request)),
                on_stderr_line=parser.feed_stderr,
                on_output=on_output,
                cancel=cancel,
            )
            self.after_exit(request, parser, scratch, process)
            if request.on_step is not None:
                for step in self.steps_after_exit(request, parser, process):
                    request.on_step(step)
        return judge(process, parser.parsed, request, requires_verdict=self.requires_verdict)


def usage_so_far(parsed: ParsedRun) -> UsageSoFar:
    return UsageSoFar(**usage_fields(parsed))


def _reporting_usage(parser: LineParser, request: RunRequest) -> Callable[[str], None]:
    """``parser.feed``, telling ``request.on_usage`` each time the usage so far changes."""
    report = request.on_usage
    if report is None:
        return parser.feed
    last = [usage_so_far(parser.parsed)]

    def feed(line: str) -> None:
        parser.feed(line)
        now = usage_so_far(parser.parsed)
        if now != last[0]:
            last[0] = now
            report(now)

    return feed


class StepReader(Protocol):
    """Reads a run's steps from its stream's events (executor.steps)."""

    def feed(self, event: dict[str, Any]) -> list[Step]: ...


def _reporting_steps(
    adapter: OneShotCliAdapter, request: RunRequest, feed: Callable[[str], None]
) -> Callable[[str], None]:
    """``feed``, then each step the line ended told to ``request.on_step``."""
    report = request.on_step
    reader = adapter.new_step_reader() if report is not None else None
    if report is None or reader is None:
        return feed

    def both(line: str) -> None:
        feed(line)
        event = json_line(line)
        if event is not None:
            for step in reader.feed(event):
                report(step)

    return both


class SettingsError(ValueError):
    """An agent's ``settings`` dict cannot be turned into a command line."""


def child_environment(request: RunRequest) -> dict[str, str]:
    """The child's environment: ours (PATH, HOME, CLI credentials) without the
    worker's own configuration (core.worker_environment: the board's database, its
    secret, every CLAWBOO_* knob), plus the task's."""
    return {**agent_environment(), **request.task_environment()}


def find_executable(name: str, env: Mapping[str, str]) -> str | None:
    """``name`` resolved on the child's PATH, so an ``env`` override of PATH counts."""
    return shutil.which(name, path=env.get("PATH"))


def judge(
    process: ProcessRun, parsed: ParsedRun, request: RunRequest, *, requires_verdict: bool
) -> RunResult:
    """The one rule that turns how a process ended into an outcome.

    Timeout and cancel win over anything printed. Otherwise success needs exit code 0,
    no failure reported in the stream, and -- for CLIs that print one -- the
    stream's own success verdict (a crash before the result line is not success).
    """
    result = RunResult(
        outcome=Outcome.FAILED,
        exit_code=process.exit_code,
        native_session_id=parsed.native_session_id,
        summary=parsed.summary,
        log_tail=process.log_tail,
        duration_s=process.duration_s,
        **usage_fields(parsed),
    )
    if process.launch_error:
        result.error = process.launch_error
    elif process.timed_out:
        result.outcome = Outcome.TIMED_OUT
        result.error = f"timed out after {request.timeout_s:g}s; process group killed"
    elif process.cancelled:
        result.outcome = Outcome.CANCELLED
        result.error = "cancelled; process group killed"
    elif process.exit_code == 0 and parsed.ok is not False and (parsed.ok or not requires_verdict):
        result.outcome = Outcome.SUCCEEDED
    else:
        result.error = parsed.error or _why_failed(process, parsed, requires_verdict)
    return result


def _why_failed(process: ProcessRun, parsed: ParsedRun, requires_verdict: bool) -> str:
    last_stderr = process.stderr_tail.rsplit("\n", 1)[-1].strip()
    if process.exit_code != 0:
        reason = f"exited with code {process.exit_code}"
    elif requires_verdict and parsed.ok is None:
        reason = "ended without reporting a result"
    else:
        reason = "failed"
    return f"{reason}: {last_stderr}" if last_stderr else reason


def setting_str(settings: Mapping[str, Any], key: str) -> str | None:
    """A string setting, or None when unset/empty; anything else is a SettingsError."""
    value = settings.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise SettingsError(f"{key} must be a string, got {type(value).__name__}")
    return str(value)


def setting_list(
    settings: Mapping[str, Any], key: str, *, comma_separated: bool = False
) -> list[str]:
    """A list-of-strings setting; with ``comma_separated``, "a,b" is accepted too."""
    value = settings.get(key)
    if value is None or value == "":
        return []
    if isinstance(value, str) and comma_separated:
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise SettingsError(f"{key} must be a list of strings")


def json_line(line: str) -> dict[str, Any] | None:
    """One JSONL line as an object, or None for blank, malformed or non-object lines."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
