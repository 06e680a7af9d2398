"""The one interface every runtime adapter speaks, and the values it trades in.

The executor builds a :class:`RunRequest`, asks :func:`executor.runtimes.adapter_for`
for the agent's adapter, and calls ``adapter.run(request, cancel=..., on_output=...)``
(blocking) or :func:`start_run` (in a thread, so the caller can heartbeat meanwhile).
Adapters never raise for a failed run: every way a run can end, including "the
binary is not installed", comes back as a :class:`RunResult`. The one exception is
the ``human`` seam, which refuses to run at all (:class:`HumanWorkRequired`).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from executor.steps import Step

Integration = Literal["one-shot", "connected"]

# Called with ("stdout" | "stderr", line without its newline) as output arrives;
# the executor uses it for the live log. It must not block for long.
OutputCallback = Callable[[str, str], None]


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class AsksPeople:
    """A runtime whose runs may ask a person about a tool call, through the board's
    MCP tool (``permission_prompt``, GOVERNANCE §5): the agent setting that decides,
    its default, and the values under which a run never asks."""

    setting: str
    default: str
    never: frozenset[str]

    def asks(self, settings: dict[str, Any] | None) -> str | None:
        """The setting's value when a run with ``settings`` may ask, else None."""
        value = str((settings or {}).get(self.setting) or self.default)
        return None if value in self.never else value


@dataclass(frozen=True)
class Capabilities:
    """What the executor may assume about a runtime.

    ``integration``: ``one-shot`` runs a process per task and waits for it;
    ``connected`` hands the task to a long-lived service (or a person) that reports back.
    ``worktrees``: whether the runtime works inside the task's git worktree.
    ``automated``: False only for ``human`` -- the executor must not dispatch to it.
    """

    integration: Integration
    worktrees: bool
    automated: bool = True
    # Whether the adapter hands the run the board's MCP server (RunRequest.mcp).
    mcp: bool = False
    # When its runs may ask a person about a tool call (None: never).
    asks_people: AsksPeople | None = None


@dataclass(frozen=True)
class McpEndpoint:
    """The board's MCP server for one run: where it is and the run's own credential
    (void once the run's claim is lost, deleted when the run ends)."""

    url: str
    token: str
    name: str = "clawboo"


@dataclass(frozen=True)
class RunRequest:
    task_id: str
    title: str
    prompt: str
    cwd: Path
    timeout_s: float
    # The agent registry row's ``settings`` dict (argv, model, permission_mode, ...).
    settings: Mapping[str, Any] = field(default_factory=dict)
    # Native session to continue; pass it only through :func:`resume_id_for`.
    resume_session_id: str | None = None
    task_file: Path | None = None
    handoff_file: Path | None = None
    # Extra environment for the child, applied last (overrides the CLAWBOO_* defaults).
    env: Mapping[str, str] = field(default_factory=dict)
    # Distinguishes two attempts at one task (e.g. the execution row id); connected
    # runtimes derive their idempotency key from it.
    attempt_id: str | None = None
    # The board's MCP server, for runtimes that declare ``Capabilities.mcp``.
    mcp: McpEndpoint | None = None
    # Called (from a reader thread) with the run's usage so far each time the
    # stream reports more; the executor prices it for the ceiling. Must not block.
    on_usage: Callable[[UsageSoFar], None] | None = None
    # Called (from a reader thread) with each step of the run as its tool's stream
    # tells it (executor.steps), in order. Must not block.
    on_step: Callable[[Step], None] | None = None
    # The operator's commit the checkout was made from: a runtime reads the project's
    # instruction files from it, never from ``cwd`` (the builder's to write).
    project_base: ProjectBase | None = None

    def task_environment(self) -> dict[str, str]:
        """The CLAWBOO_* variables the run sees, plus ``env`` extras."""
        task_file = self.task_file or self.cwd / "TASK.md"
        handoff_file = self.handoff_file or self.cwd / "AGENT_HANDOFF.json"
        board = (
            {"CLAWBOO_MCP_URL": self.mcp.url, "CLAWBOO_MCP_TOKEN": self.mcp.token}
            if self.mcp is not None
            else {}
        )
        return {
            "CLAWBOO_TASK_ID": self.task_id,
            "CLAWBOO_TASK_TITLE": self.title,
            "CLAWBOO_TASK_FILE": str(task_file),
            "CLAWBOO_HANDOFF_FILE": str(handoff_file),
            **board,
            **self.env,
        }


@dataclass(frozen=True)
class ProjectBase:
    """A commit of the operator's repository and a git directory that holds it: the
    task's base, where the project's files are what the operator committed."""

    repo: Path
    commit: str


@dataclass(frozen=True)
class UsageSoFar:
    """A run's usage as its runtime reported it: running totals while it streams, or
    its end's (None: not reported). The one usage value of a run, from the runtime's
    report to the board's write: priced by :func:`executor.pricing.usage_of`, sent
    over the API as :meth:`as_body`."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None
    cost_cents: int | None = None
    model: str | None = None
    # The runtime's price to the thousandth of a cent (finer than ``cost_cents``).
    cost_millicents: int | None = None

    @property
    def reported_any(self) -> bool:
        counts = (self.tokens_in, self.tokens_out, self.cache_read, self.cache_write)
        return any(count is not None for count in counts)

    def as_body(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The usage numbers a report carries (``model`` names what they were spent on).
USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(UsageSoFar) if f.name != "model")


def usage_fields(source: Any) -> dict[str, Any]:
    """The usage of anything that carries the usage value's fields (a parsed run, a
    gateway's reply, a run's result), by name: the one copier (absent: None)."""
    return {f.name: getattr(source, f.name, None) for f in dataclasses.fields(UsageSoFar)}


@dataclass
class RunResult:
    outcome: Outcome
    exit_code: int | None = None
    native_session_id: str | None = None
    # None means the runtime did not report it (not zero).
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_cents: int | None = None
    cost_millicents: int | None = None  # the same price, to the thousandth of a cent
    cache_read: int | None = None
    cache_write: int | None = None
    # The model the run used, when the runtime said (prices its tokens).
    model: str | None = None
    summary: str = ""
    error: str = ""
    log_tail: str = ""
    duration_s: float = 0.0

    @property
    def succeeded(self) -> bool:
        return self.outcome is Outcome.SUCCEEDED

    @property
    def usage(self) -> UsageSoFar:
        return UsageSoFar(**usage_fields(self))


class HumanWorkRequired(NotImplementedError):
    """Raised when asked to *run* a task assigned to a person: nothing can execute it.

    A ``NotImplementedError`` so that code which forgot to check
    ``capabilities(runtime).automated`` fails loudly rather than marking work done.
    """


class RuntimeAdapter(ABC):
    runtime: str
    capabilities: Capabilities

    @abstractmethod
    def run(
        self,
        request: RunRequest,
        *,
        cancel: threading.Event | None = None,
        on_output: OutputCallback | None = None,
    ) -> RunResult:
        """Run one task to its end; block until then. Setting ``cancel`` stops it."""


class RunHandle:
    """An adapter run in a background thread, so the caller can heartbeat meanwhile."""

    def __init__(
        self,
        adapter: RuntimeAdapter,
        request: RunRequest,
        on_output: OutputCallback | None = None,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self._cancel = threading.Event()
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        self._ended = threading.Event()
        # Called in the run's thread once it has ended: a caller waiting on its own
        # event (the attempt's loop) looks at once instead of at its next tick.
        self._on_end = on_end
        self._thread = threading.Thread(
            target=self._target,
            args=(adapter, request, on_output),
            name=f"run-{request.task_id}",
            daemon=True,
        )
        self._thread.start()

    def _target(
        self, adapter: RuntimeAdapter, request: RunRequest, on_output: OutputCallback | None
    ) -> None:
        try:
            self._result = adapter.run(request, cancel=self._cancel, on_output=on_output)
        except BaseException as exc:  # re-raised in the caller's thread by result()
            self._error = exc
        finally:
            self._ended.set()
            if self._on_end is not None:
                self._on_end()

    def cancel(self) -> None:
        """Ask the run to stop; its process group is terminated, then killed."""
        self._cancel.set()

    def done(self) -> bool:
        return self._ended.is_set() or not self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds; True when the run has ended."""
        self._thread.join(timeout)
        return self.done()

    def result(self) -> RunResult:
        """The run's result; blocks until it ends. Re-raises what the adapter raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def start_run(
    adapter: RuntimeAdapter,
    request: RunRequest,
    on_output: OutputCallback | None = None,
    on_end: Callable[[], None] | None = None,
) -> RunHandle:
    """Start ``adapter.run(request)`` in a thread and return its handle; ``on_end`` is
    called (in that thread) when the run has ended."""
    return RunHandle(adapter, request, on_output, on_end)


def executable_missing(name: str) -> str:
    """Why ``name`` could not be run: a path that names no file is not a PATH lookup."""
    if os.sep in name:
        return f"no such file: {name}"
    return f"{name} not found on PATH"


def usd_to_millicents(usd: object) -> int | None:
    """A CLI's USD cost in millicents (thousandths of a cent), half up: a run under
    half a cent still costs something. None when absent or not a number."""
    value = _usd(usd)
    return None if value is None else int((value * 100_000).quantize(Decimal(1), ROUND_HALF_UP))


def _usd(usd: object) -> Decimal | None:
    if isinstance(usd, bool) or not isinstance(usd, int | float | str):
        return None
    try:
        value = Decimal(str(usd))
    except InvalidOperation:
        return None
    return value if value.is_finite() and value >= 0 else None


def usd_to_cents(usd: object) -> int | None:
    """A CLI's USD cost as whole cents, half up; None when absent or not a number."""
    value = _usd(usd)
    return None if value is None else int((value * 100).quantize(Decimal(1), ROUND_HALF_UP))


def as_count(value: object) -> int:
    """A token count from untrusted JSON: a non-negative int, else 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)


def prompt_argument(prompt: str) -> str:
    """The prompt made safe as a positional argument.

    CLIs parse a leading ``-`` as a flag (and codex reads ``-`` as "prompt on stdin"),
    so a prompt that starts with a markdown list item would be misread. A leading
    newline is invisible to the model and keeps it a positional value.
    """
    return "\n" + prompt if prompt.startswith("-") else prompt
