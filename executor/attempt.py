"""One run of a claimed task, told once for every worker: the run's loop.

A run reaches its board through a :class:`Board` port: in process (the local
executor, :mod:`executor.runner`), over the REST API (the remote worker,
:mod:`executor.remote`), or in memory (tests). Whatever the port, :meth:`Attempt.run`
is the one loop a run is watched by -- the lease renewed every heartbeat, the usage
the runtime streams written as it comes, the run stopped at the report that
reaches its ceiling (checked on the reader's thread, :class:`Meter`) or when the
board says stop (a paused budget), and cancelled when its claim is lost. A rule a
run must obey while it runs is added here, once.

No Django here: a remote worker imports it with nothing but the server's URL.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from executor.runtimes.base import (
    Outcome,
    RunHandle,
    RunRequest,
    RunResult,
    RuntimeAdapter,
    UsageSoFar,
    start_run,
)
from executor.steps import Step

# How long the run's loop waits for news (usage reported, the run ended) before it
# looks again: usage is written as soon as it is reported, and the run's end is
# noticed within this.
USAGE_CHECK_S = 0.05


@dataclass(frozen=True)
class Stop:
    """Why a run must stop for spend; ``ceiling``: at its own ``max_run_cents`` (the
    task is then blocked), else a paused cap budget (the task goes back to todo)."""

    why: str
    ceiling: bool = False

    def __str__(self) -> str:
        return self.why


@dataclass(frozen=True)
class Answer:
    """What the board said to a usage report: stop the run (why), or its claim is gone."""

    stop: Stop | None = None
    lost: bool = False


class Board(Protocol):
    """The board as one running attempt sees it."""

    def beat(self) -> float | None:
        """Renew the claim's lease: the seconds until the next beat, or None when
        the claim is lost (the run is cancelled)."""

    def report(self, usage: UsageSoFar) -> Answer:
        """Write the run's usage so far; whether it must stop."""

    def over(self, usage: UsageSoFar) -> Stop | None:
        """Why a run that reported ``usage`` has reached its ceiling, or None (called
        on the runtime's reader thread: no database, no network)."""

    def output(self, stream: str, line: str) -> None:
        """One line the run printed."""

    def steps(self, steps: list[Step]) -> None:
        """The run's next steps, in order (its trace)."""

    def stalled(self, silent_s: float) -> bool | None:
        """The run said nothing (no step, output or usage) for ``silent_s``: mark it
        ``stalled`` (once; the board notifies). False: it is not stalled but waiting
        for a person (a tool call to approve); its silence is counted again."""

    # --- the run's end (executor.settle in process) ------------------------------

    def claim_lost(self, result: RunResult | None) -> None:
        """The claim was lost: close the run, record nothing on the task."""

    def ended(self, result: RunResult, stop: Stop | None) -> str | None:
        """The run ended (``stop``: why the run's loop stopped it for spend): close
        it -- classified, counted by the breaker -- and say why it was stopped for
        spend (its task then sent back with the one comment), or None."""

    def fail(self, result: RunResult, message: str) -> None:
        """A failed run: its task failed (back to todo when the breaker counts it)."""

    def land(self, result: RunResult) -> str:
        """A succeeded run: judged and landed (``review``, ``done``), or sent back
        (``fix``, ``debt``), or ``lost``."""


class Meter:
    """The latest usage a run's reader thread reported, taken by the run's loop.

    The ceiling is checked here, on the reader thread, as each report arrives: the
    run is cancelled at the report that reaches it, not at the loop's next look, so
    it overshoots by what the process printed before the signal reached it."""

    def __init__(self, over: Callable[[UsageSoFar], Stop | None]) -> None:
        self._lock = threading.Lock()
        self._latest: UsageSoFar | None = None
        # The last report of the run (its totals when its end reports none).
        self.last: UsageSoFar | None = None
        # Set when a report arrives (or the run is stopped): the loop looks at once.
        self.reported = threading.Event()
        self.over = over
        # Why the run was stopped for spend, or None.
        self.stop: Stop | None = None
        self.cancel: Callable[[], None] | None = None

    def report(self, usage: UsageSoFar) -> None:
        with self._lock:
            self._latest = self.last = usage
        self.reported.set()
        self.check(usage)

    def check(self, usage: UsageSoFar | None = None) -> None:
        """Stop the run if ``usage`` (default: the last report) reached its ceiling."""
        usage = usage or self.last
        if usage is None or self.stop is not None:
            return
        why = self.over(usage)
        if why is not None:
            self.stopped(why)

    def stopped(self, why: Stop) -> None:
        with self._lock:
            if self.stop is not None:
                return
            self.stop = why
        if self.cancel is not None:
            self.cancel()
        self.reported.set()

    def take(self) -> UsageSoFar | None:
        with self._lock:
            latest, self._latest = self._latest, None
            self.reported.clear()
            return latest


DEFAULT_STALL_MS = 600_000
DEFAULT_RUN_TIMEOUT_S = 3600.0


def run_timeout_of(
    settings: Mapping[str, Any] | None,
    override: float | None = None,
    *,
    default: float = DEFAULT_RUN_TIMEOUT_S,
) -> float:
    """How long a run of an agent may take: the worker's own override (``work``'s or
    ``clawboo worker``'s ``--run-timeout``), else the agent's ``settings.timeout_s``
    (empty -- null, 0 -- is unset), else ``default`` (an hour for a build). One rule
    for the local executor, the remote worker and the critic's review alike."""
    if override:
        return float(override)
    return float((settings or {}).get("timeout_s") or default)


@dataclass(frozen=True)
class Stall:
    """When a run is stalled: silent (no step, output or usage) for ``after_s``; and
    whether it is then cancelled (the agent's ``on_stall: "cancel"``), its end
    counted by the breaker as a timeout."""

    after_s: float
    cancel: bool = False

    @classmethod
    def of(cls, settings: Mapping[str, Any] | None) -> Stall | None:
        """The policy of an agent's ``settings`` under ``CLAWBOO_STALL_MS`` (the
        environment, so a remote worker reads it too; 0: never stalled)."""
        try:
            after_ms = int(os.environ.get("CLAWBOO_STALL_MS", DEFAULT_STALL_MS))
        except ValueError:
            after_ms = DEFAULT_STALL_MS
        if after_ms <= 0:
            return None
        return cls(after_ms / 1000, cancel=(settings or {}).get("on_stall") == "cancel")


def run_settings(
    agent_settings: Mapping[str, Any] | None, task_metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The settings a run of a task is given, on every worker: its agent's, with the
    task's own ``metadata.model`` (what a routine template's ``model`` becomes) over
    the agent's ``model``."""
    chosen = dict(agent_settings or {})
    model = (task_metadata or {}).get("model")
    if isinstance(model, str) and model.strip():
        chosen["model"] = model.strip()
    return chosen


class Trail:
    """The steps a run's reader threads reported, and when the run last said anything
    (a step, a line, a usage report): taken by the run's loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self.heard = time.monotonic()

    def step(self, step: Step) -> None:
        with self._lock:
            self._steps.append(step)
        self.heard = time.monotonic()

    def take(self) -> list[Step]:
        with self._lock:
            steps, self._steps = self._steps, []
            return steps


class Attempt:
    """One run of a claimed task through its board ``port``: :meth:`run` watches it
    (lease, usage, ceiling, cancel); :attr:`lost` and :attr:`meter` ``.stop`` say
    afterwards whether the claim was lost or the run stopped for spend."""

    def __init__(self, port: Board, heartbeat_s: float, stall: Stall | None = None) -> None:
        self.port = port
        self.heartbeat_s = heartbeat_s
        self.meter = Meter(port.over)
        self.lost = False
        self.handle: RunHandle | None = None
        self.trail = Trail()
        self.stall = stall
        # Set once the run was seen silent for stall.after_s; "cancel" once cancelled.
        self.stalled: str | None = None

    def start(self, adapter: RuntimeAdapter, request: RunRequest) -> RunHandle:
        request = dataclasses.replace(request, on_usage=self._usage, on_step=self.trail.step)
        self.trail.heard = time.monotonic()
        # The run's end wakes the loop below like a usage report does.
        self.handle = start_run(
            adapter, request, on_output=self._output, on_end=self.meter.reported.set
        )
        self.meter.cancel = self.handle.cancel
        if self.meter.stop is not None:  # reached before the handle was known
            self.handle.cancel()
        return self.handle

    def run(
        self, adapter: RuntimeAdapter, request: RunRequest, first_beat_s: float = 0.0
    ) -> RunResult:
        """Run the adapter to its end, beating first after ``first_beat_s`` (a claim
        just taken set its lease itself), then every heartbeat."""
        handle = self.start(adapter, request)
        try:
            due = time.monotonic() + first_beat_s
            while True:
                if time.monotonic() >= due:
                    wait = self.port.beat()
                    if wait is None:
                        self._lose()
                    due = time.monotonic() + (self.heartbeat_s if wait is None else wait)
                self.write_usage()
                self.write_steps()
                if not handle.done():  # (write_usage clears a wake the end just gave)
                    self.meter.reported.wait(min(max(due - time.monotonic(), 0.0), USAGE_CHECK_S))
                if handle.done():
                    self.write_steps()
                    return self._stall_ended(handle.result())
                self.check_stall()
        except BaseException:
            handle.cancel()  # never leave the process behind
            handle.wait(30)
            raise

    def settle(self, result: RunResult | None) -> str:
        """The run's end, in the one order: a lost claim records nothing; else the run
        is closed (classified; a spend stop sends its task back, a failure is
        counted by the breaker), a failure fails its task, and a success is judged
        and landed or sent back. Returns what became of it: ``lost``,
        ``cancelled`` (stopped for spend), the failed run's outcome, or the
        landing's (``review``, ``done``, ``fix``, ``debt``, ``lost``)."""
        if result is None or self.lost:
            self.port.claim_lost(result)
            return "lost"
        if self.port.ended(result, self.meter.stop) is not None:
            return "cancelled"
        if not result.succeeded:
            self.port.fail(result, result.error or f"run {result.outcome}")
            return str(result.outcome)
        return self.port.land(result)

    def write_usage(self) -> None:
        """Write the latest usage the runtime reported, if any came since the last."""
        usage = self.meter.take()
        if usage is None or self.lost:
            return
        answer = self.port.report(usage)
        if answer.lost:
            self._lose()
        elif answer.stop is not None:
            self.meter.stopped(answer.stop)
        else:
            self.meter.check()  # a report that came meanwhile, priced as the board said

    def write_steps(self) -> None:
        """Hand the board the steps reported since the last look, if any."""
        steps = self.trail.take()
        if steps and not self.lost:
            self.port.steps(steps)

    def check_stall(self) -> None:
        """A run silent for its stall time is marked stalled, once; and cancelled
        when its agent says so."""
        if self.stall is None or self.stalled is not None:
            return
        silent = time.monotonic() - self.trail.heard
        if silent < self.stall.after_s:
            return
        if self.port.stalled(silent) is False:
            self.trail.heard = time.monotonic()  # waiting for a person: not stalled
            return
        self.stalled = "cancel" if self.stall.cancel else "marked"
        if self.stall.cancel and self.handle is not None:
            self.handle.cancel()

    def _stall_ended(self, result: RunResult) -> RunResult:
        """A run cancelled for its silence ended by timing out (the breaker counts it)."""
        if self.stalled != "cancel" or result.outcome is not Outcome.CANCELLED:
            return result
        assert self.stall is not None
        why = f"stalled: nothing from the run for {self.stall.after_s:g}s; cancelled"
        return dataclasses.replace(result, outcome=Outcome.TIMED_OUT, error=why)

    def _output(self, stream: str, line: str) -> None:
        self.trail.heard = time.monotonic()
        self.port.output(stream, line)

    def _usage(self, usage: UsageSoFar) -> None:
        self.trail.heard = time.monotonic()
        self.meter.report(usage)

    def _lose(self) -> None:
        self.lost = True
        if self.handle is not None:
            self.handle.cancel()
