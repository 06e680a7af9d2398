"""The run's loop hands the board its steps as the runtime reports them, and watches
for silence: a run with no step, output or usage for CLAWBOO_STALL_MS is marked
stalled once -- within a second of the threshold -- and, when its agent says
``on_stall: cancel``, cancelled and ended as a timeout (the breaker's class).
Driven through an in-memory port (no database), then once through the local
executor with a real silent process."""

from __future__ import annotations

import threading
import time

import pytest

from board.runs import ErrorClass
from executor import breakers
from executor.attempt import Answer, Attempt, Stall
from executor.runtimes.base import (
    Capabilities,
    Outcome,
    RunRequest,
    RunResult,
    RuntimeAdapter,
    UsageSoFar,
)
from executor.steps import Step


class Port:
    """The board as the run sees it, in memory: what it was told, when."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.told: list[Step] = []
        self.stalls: list[float] = []
        self.lines: list[str] = []

    def beat(self) -> float | None:
        return 0.05

    def report(self, usage: UsageSoFar) -> Answer:
        return Answer()

    def over(self, usage: UsageSoFar) -> None:
        return None

    def output(self, stream: str, line: str) -> None:
        self.lines.append(line)

    def steps_seen(self) -> list[str]:
        return [f"{s.kind}:{s.name}:{s.status}" for s in self.told]

    def steps(self, steps: list[Step]) -> None:
        self.told.extend(steps)

    def stalled(self, silent_s: float) -> None:
        self.stalls.append(time.monotonic() - self.started)

    def claim_lost(self, result: RunResult | None) -> None: ...

    def ended(self, result: RunResult, stop: object) -> None:
        return None

    def fail(self, result: RunResult, message: str) -> None: ...

    def land(self, result: RunResult) -> str:
        return "done"


class Silent(RuntimeAdapter):
    """Prints ``lines`` lines ``every`` seconds apart, then nothing until cancelled
    (or ``hold_s`` passes); reports two steps first when ``with_steps``."""

    runtime = "silent"
    capabilities = Capabilities(integration="one-shot", worktrees=False)

    def __init__(self, hold_s: float = 3.0, with_steps: bool = False) -> None:
        self.hold_s, self.with_steps = hold_s, with_steps

    def run(self, request, *, cancel=None, on_output=None) -> RunResult:
        assert cancel is not None
        if self.with_steps:
            assert request.on_step is not None
            request.on_step(Step("tool_call", "Read", arguments={"path": "a"}))
            request.on_step(Step("command", "false", "error", detail="exit code 1"))
        if cancel.wait(self.hold_s):
            return RunResult(outcome=Outcome.CANCELLED, error="cancelled")
        return RunResult(outcome=Outcome.SUCCEEDED)


def _request() -> RunRequest:
    from pathlib import Path

    return RunRequest(task_id="t", title="t", prompt="p", cwd=Path("."), timeout_s=30)


def test_the_steps_a_runtime_reports_reach_the_board_in_order() -> None:
    port = Port()
    attempt = Attempt(port, 0.05)  # type: ignore[arg-type]
    result = attempt.run(Silent(hold_s=0.1, with_steps=True), _request())
    assert result.succeeded
    assert port.steps_seen() == ["tool_call:Read:ok", "command:false:error"]


@pytest.mark.timing
def test_a_silent_run_is_marked_stalled_once_within_a_second_of_the_threshold() -> None:
    port = Port()
    attempt = Attempt(port, 0.05, Stall(after_s=0.4))  # type: ignore[arg-type]
    result = attempt.run(Silent(hold_s=1.5), _request())
    assert result.succeeded  # marked, not cancelled: the agent did not ask for that
    assert len(port.stalls) == 1
    assert 0.4 <= port.stalls[0] < 1.4


def test_a_run_that_keeps_printing_is_not_stalled() -> None:
    class Chatty(Silent):
        def run(self, request, *, cancel=None, on_output=None) -> RunResult:
            for n in range(12):
                on_output("stdout", f"line {n}")
                time.sleep(0.05)
            return RunResult(outcome=Outcome.SUCCEEDED)

    port = Port()
    Attempt(port, 0.05, Stall(after_s=0.3)).run(Chatty(), _request())  # type: ignore[arg-type]
    assert port.stalls == []


@pytest.mark.timing
def test_an_agent_that_says_cancel_has_its_stalled_run_ended_as_a_timeout() -> None:
    port = Port()
    stall = Stall.of({"on_stall": "cancel"})
    assert stall is not None and stall.cancel
    attempt = Attempt(port, 0.05, Stall(after_s=0.3, cancel=True))  # type: ignore[arg-type]
    started = time.monotonic()
    result = attempt.run(Silent(hold_s=10), _request())
    assert time.monotonic() - started < 2.0
    assert result.outcome is Outcome.TIMED_OUT and "stalled" in result.error
    assert breakers.classify(result, result.error) == ErrorClass.TIMEOUT
    assert breakers.counts(ErrorClass.TIMEOUT)
    assert len(port.stalls) == 1


def test_the_stall_time_comes_from_the_environment_and_zero_turns_it_off(monkeypatch) -> None:
    monkeypatch.setenv("CLAWBOO_STALL_MS", "2500")
    assert Stall.of({}) == Stall(after_s=2.5, cancel=False)
    monkeypatch.setenv("CLAWBOO_STALL_MS", "0")
    assert Stall.of({"on_stall": "cancel"}) is None


@pytest.mark.timing
@pytest.mark.django_db(transaction=True)
def test_a_local_run_printing_nothing_is_stalled_on_its_card_with_one_notification(
    tmp_path, settings, monkeypatch
) -> None:
    from board import store
    from board.models import ExecutionProcess
    from core import registry
    from core.models import Event
    from executor.runner import Executor
    from ops import notify
    from ops.models import Reason

    settings.CLAWBOO_STATE_DIR = tmp_path
    monkeypatch.setenv("CLAWBOO_STALL_MS", "500")
    registry.create_agent(
        id="quiet", display_name="Quiet", team="default", runtime="command",
        settings={"argv": ["sleep", "2"]},
    )  # fmt: skip
    task = store.create_task(title="say nothing", file_mutating=False).task
    watching = threading.Event()
    seen: list[float] = []

    def watch() -> None:
        started = time.monotonic()
        while not watching.is_set():
            if ExecutionProcess.objects.filter(task_id=task.id, stalled_at__isnull=False).exists():
                seen.append(time.monotonic() - started)
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        report = Executor("quiet", heartbeat_s=0.2).work_once()
    finally:
        watching.set()
        watcher.join()
    assert report.task_id == task.id
    run = ExecutionProcess.objects.get(task_id=task.id)
    assert run.stalled_at is not None and run.as_dict()["stalled_at"]
    assert seen and seen[0] < 1.5  # the threshold (0.5 s) and under a second more
    stalls = list(Event.objects.filter(kind="run_stalled", task_id=task.id))
    assert len(stalls) == 1
    assert notify.reason_for(stalls[0]) == Reason.RUN_STALLED


def test_a_run_the_board_says_waits_for_a_person_is_not_stalled_and_its_clock_restarts() -> None:
    class Waiting(Port):
        def stalled(self, silent_s: float) -> bool:
            super().stalled(silent_s)
            return len(self.stalls) > 1  # the first look: a tool call waits for a person

    port = Waiting()
    attempt = Attempt(port, 0.05, Stall(after_s=0.3, cancel=True))  # type: ignore[arg-type]
    result = attempt.run(Silent(hold_s=10), _request())
    # Asked twice, a silence apart: cancelled only at the second.
    assert len(port.stalls) == 2 and port.stalls[1] - port.stalls[0] >= 0.3
    assert result.outcome is Outcome.TIMED_OUT
