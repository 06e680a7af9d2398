"""The run's logic -- the one loop and the one settlement of :class:`executor.attempt.Attempt`
-- driven through an in-memory board port: no server, no database (no ``db`` fixture:
any query would fail), a scripted runtime in a thread. The port records what a run
did to the board; the rules it applies at the run's end are the product's own
(:func:`executor.breakers.classify`, :func:`executor.breakers.counts`,
:func:`executor.pricing.ceiling_reached`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from board.runs import ErrorClass
from executor import breakers, pricing
from executor.attempt import Answer, Attempt
from executor.runtimes.base import (
    Capabilities,
    Outcome,
    RunRequest,
    RunResult,
    RuntimeAdapter,
    UsageSoFar,
)

BREAKER_FAILURES = 3


class ScriptedRuntime(RuntimeAdapter):
    """Reports ``cents_per_step`` more each step for ``steps`` steps, then ends with
    ``outcome`` (``error`` says why a failure failed); a cancel ends it at once."""

    runtime = "scripted"
    capabilities = Capabilities(integration="one-shot", worktrees=False)

    def __init__(self, steps: int = 3, cents_per_step: int = 10, **end: Any) -> None:
        self.steps, self.cents_per_step = steps, cents_per_step
        self.end = {"outcome": Outcome.SUCCEEDED, "summary": "did it", **end}
        self.cancelled = threading.Event()

    def run(self, request, *, cancel=None, on_output=None) -> RunResult:
        assert cancel is not None and request.on_usage is not None
        usage = UsageSoFar()
        for step in range(1, self.steps + 1):
            if on_output is not None:
                on_output("stdout", f"step {step}")
            usage = UsageSoFar(tokens_in=step * 1000, cost_cents=step * self.cents_per_step)
            request.on_usage(usage)
            if cancel.wait(0.02):
                self.cancelled.set()
                return RunResult(outcome=Outcome.CANCELLED, **_counts(usage))
        return RunResult(**self.end, **_counts(usage))


def _counts(usage: UsageSoFar) -> dict[str, Any]:
    return {"tokens_in": usage.tokens_in, "cost_cents": usage.cost_cents}


@dataclass
class Execution:
    outcome: str = "running"
    error_class: str = ""
    error: str | None = None
    cost_cents: int = 0


@dataclass
class InMemoryBoard:
    """One claimed task's board, in memory: the task's status, its executions, the
    agent's breaker. ``judge`` is what the judge answers each landing, in turn."""

    ceiling: int | None = None
    judge: list[str] = field(default_factory=lambda: ["review"])
    budget_paused: bool = False
    claim_held: bool = True
    status: str = "in_progress"
    comments: list[str] = field(default_factory=list)
    executions: list[Execution] = field(default_factory=list)
    beats: int = 0
    lines: list[str] = field(default_factory=list)
    failures_in_a_row: int = 0
    agent_paused: bool = False

    def attempt(self) -> Attempt:
        self.executions.append(Execution())
        return Attempt(self, heartbeat_s=0.01)

    @property
    def execution(self) -> Execution:
        return self.executions[-1]

    # --- the run --------------------------------------------------------------

    def beat(self) -> float | None:
        self.beats += 1
        return 0.01 if self.claim_held else None

    def report(self, usage: UsageSoFar) -> Answer:
        self.execution.cost_cents = usage.cost_cents or 0
        why = pricing.ceiling_reached(usage.cost_cents, self.ceiling, "reported")
        if why is None and self.budget_paused:
            why = "stopped: the team 'default' reached its budget (cap)"
        return Answer(stop=why)

    def over(self, usage: UsageSoFar) -> str | None:
        return pricing.ceiling_reached(usage.cost_cents, self.ceiling, "reported")

    def output(self, stream: str, line: str) -> None:
        self.lines.append(line)

    # --- its end ----------------------------------------------------------------

    def claim_lost(self, result: RunResult | None) -> None:
        self.execution.outcome, self.execution.error = "cancelled", "claim lost"

    def ended(self, result: RunResult, stop: str | None) -> str | None:
        self.execution.cost_cents = result.cost_cents or 0
        if stop is not None:
            self.execution.outcome, self.execution.error = "cancelled", stop
            self.execution.error_class = ErrorClass.BUDGET
            self.status = "todo"
            self.comments.append(stop)
            return stop
        self.execution.outcome = str(result.outcome)
        if not result.succeeded:
            self.execution.error_class = breakers.classify(result, result.error)
            self._count(failed=breakers.counts(self.execution.error_class))
        return None

    def fail(self, result: RunResult, message: str) -> None:
        self.status = "todo"
        self.execution.error = message

    def land(self, result: RunResult) -> str:
        self._count(failed=False)
        action = self.judge.pop(0)
        self.status = {"review": "in_review", "fix": "in_progress", "debt": "blocked"}[action]
        return action

    def _count(self, *, failed: bool) -> None:
        self.failures_in_a_row = self.failures_in_a_row + 1 if failed else 0
        if self.failures_in_a_row >= BREAKER_FAILURES:
            self.agent_paused = True


def request(tmp_path: Path) -> RunRequest:
    return RunRequest(task_id="t1", title="t", prompt="do it", cwd=tmp_path, timeout_s=30)


def work(board: InMemoryBoard, runtime: ScriptedRuntime, tmp_path: Path) -> str:
    attempt = board.attempt()
    return attempt.settle(attempt.run(runtime, request(tmp_path)))


def test_a_run_that_succeeds_is_watched_reported_and_landed_for_review(tmp_path):
    board = InMemoryBoard()
    assert work(board, ScriptedRuntime(steps=3), tmp_path) == "review"
    assert board.status == "in_review"
    assert board.execution.outcome == "succeeded" and board.execution.cost_cents == 30
    assert board.lines == ["step 1", "step 2", "step 3"]
    assert board.beats >= 1  # the first beat at once, then every heartbeat


def test_a_run_that_fails_is_classified_and_its_task_sent_back(tmp_path):
    board = InMemoryBoard()
    runtime = ScriptedRuntime(steps=1, outcome=Outcome.FAILED, error="429 too many requests")
    assert work(board, runtime, tmp_path) == "failed"
    assert board.status == "todo" and board.execution.error == "429 too many requests"
    assert board.execution.error_class == ErrorClass.RATE_LIMITED
    assert board.failures_in_a_row == 1 and not board.agent_paused


def test_a_run_is_stopped_at_the_report_that_reaches_its_ceiling(tmp_path):
    board = InMemoryBoard(ceiling=30)
    runtime = ScriptedRuntime(steps=50)
    assert work(board, runtime, tmp_path) == "cancelled"
    assert runtime.cancelled.is_set()
    # Stopped at the third report (30¢), on the reader's thread: not a step later.
    assert board.execution.cost_cents == 30
    assert board.execution.error_class == ErrorClass.BUDGET
    assert board.status == "todo" and "ceiling of 30¢" in board.comments[0]
    assert board.failures_in_a_row == 0  # a budget stop says nothing about the agent


def test_a_paused_budget_the_board_reports_stops_the_run(tmp_path):
    board = InMemoryBoard(budget_paused=True)
    runtime = ScriptedRuntime(steps=50)
    assert work(board, runtime, tmp_path) == "cancelled"
    assert runtime.cancelled.is_set() and "reached its budget" in board.comments[0]


def test_three_failed_runs_in_a_row_trip_the_breaker(tmp_path):
    board = InMemoryBoard()
    for n in range(1, BREAKER_FAILURES + 1):
        runtime = ScriptedRuntime(steps=1, outcome=Outcome.FAILED, error="provider overloaded")
        assert work(board, runtime, tmp_path) == "failed"
        assert board.agent_paused == (n == BREAKER_FAILURES)
    assert [e.error_class for e in board.executions] == [ErrorClass.PROVIDER_ERROR] * 3


def test_a_cancelled_run_is_not_counted_by_the_breaker(tmp_path):
    board = InMemoryBoard(failures_in_a_row=2)
    runtime = ScriptedRuntime(steps=1, outcome=Outcome.CANCELLED, error="stopped by a person")
    assert work(board, runtime, tmp_path) == "cancelled"
    assert board.execution.error_class == ErrorClass.CANCELLED and not board.agent_paused


def test_a_run_sent_back_to_fix_runs_again_and_then_lands(tmp_path):
    board = InMemoryBoard(judge=["fix", "review"])
    assert work(board, ScriptedRuntime(steps=2), tmp_path) == "fix"
    assert board.status == "in_progress"  # back to its builder, under the same claim
    assert work(board, ScriptedRuntime(steps=2), tmp_path) == "review"
    assert [e.outcome for e in board.executions] == ["succeeded", "succeeded"]
    assert board.status == "in_review"


def test_a_lost_claim_cancels_the_run_and_records_nothing_on_the_task(tmp_path):
    board = InMemoryBoard(claim_held=False)
    runtime = ScriptedRuntime(steps=50)
    assert work(board, runtime, tmp_path) == "lost"
    assert runtime.cancelled.is_set()
    assert board.status == "in_progress" and board.execution.error == "claim lost"
