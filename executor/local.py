"""The board in process, as a local run sees it: the in-process port of
:class:`executor.attempt.Attempt` (the store's heartbeat and spend writes, a
database outage waited out while the run goes on) and the run's checkout on this
host (the task's repository, its worktree brought up to date with the board)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from board import store
from board.errors import VerificationRequired
from board.models import Task
from board.repository import run_repository
from board.store import spend as spend_store
from board.store import steps as steps_store
from core import reconnect
from core.errors import ClawbooError
from core.models import Agent
from core.runlogs import RunLog
from executor import breakers, pricing, settle, spending
from executor.attempt import Answer, Stop
from executor.runtimes.base import ProjectBase, RunResult, UsageSoFar
from executor.steps import Step
from worktrees import agent_files, checkouts, scaffold
from worktrees import service as worktree_service


@dataclass
class WorkReport:
    """What one pass of the executor did (returned to callers and benches)."""

    agent_id: str
    task_id: str | None = None
    outcome: str = "idle"  # idle | succeeded | failed | timed_out | cancelled | lost | refused
    status: str | None = None
    execution_id: int | None = None
    worktree: str | None = None  # cleaned | retained | kept | None
    verdict: str | None = None
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Clock:
    """Wall time per phase (git, runtime, board, verify) for the end-to-end bench."""

    def __init__(self, report: WorkReport) -> None:
        self.report = report

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self.report.timings[name] = self.report.timings.get(name, 0.0) + spent


def tee(
    log: RunLog | None, then: Callable[[str, str], None] | None
) -> Callable[[str, str], None] | None:
    """One output callback that writes the run's log and calls the caller's own."""
    if log is None:
        return then

    def both(stream: str, line: str) -> None:
        log.write(stream, line)
        if then is not None:
            then(stream, line)

    return both


@dataclass
class Checkout:
    """Where a local run works: its directory, whether it is the task's worktree,
    the worktree's HEAD before the run, and the operator's commit it was made from."""

    cwd: Path
    in_worktree: bool
    git_before: str | None
    repo: str | None = None
    project_base: ProjectBase | None = None


class LocalBoard:
    """The board in process, as a local run sees it (:class:`executor.attempt.Board`):
    the store's heartbeat and spend writes, a database outage waited out while the
    run goes on; at its end, :mod:`executor.settle` in this process, in the run's
    checkout (the handoff written, the work checkpointed on its branch)."""

    def __init__(
        self,
        agent: Agent,
        keep_for_resume: bool,
        heartbeat_s: float,
        report: WorkReport,
        task: Task,
        run: settle.Run,
        checkout: Checkout,
        output: Callable[[str, str], None] | None,
    ) -> None:
        self.agent, self.keep_for_resume = agent, keep_for_resume
        self.work, self.clock = report, Clock(report)
        self.task, self.run, self.checkout = task, run, checkout
        self.ticket, self.execution_id = run.ticket, run.execution_id
        self._output, self.heartbeat_s = output, heartbeat_s
        self.ceiling = spend_store.run_ceiling(task, dict(self.agent.settings or {}))
        self.outage = reconnect.Outage(f"run of task {task.id}")
        self.board_s = 0.0  # time the run's loop spent on the board

    @contextmanager
    def _board(self) -> Iterator[None]:
        start = time.perf_counter()
        with self.clock.phase("board"):
            yield
        self.board_s += time.perf_counter() - start

    def beat(self) -> float | None:
        try:
            with self._board():
                beat = store.heartbeat(self.task.id, self.ticket)
        except Exception as exc:
            if not reconnect.is_unavailable(exc):
                raise
            # The database is away: the run goes on, and the beat is tried again
            # soon. If the lease lapses meanwhile, the first beat that gets through
            # is declined and cancels the run.
            return self.outage.lost(exc)
        self.outage.ok()
        return None if beat.declined else self.heartbeat_s

    def report(self, usage: UsageSoFar) -> Answer:
        if self.execution_id is None:
            return Answer()
        try:
            with self._board():
                why = spending.record(self.execution_id, pricing.usage_of(usage), self.ceiling)
        except Exception as exc:
            if not reconnect.is_unavailable(exc):
                raise
            # The database is away: this report is not written; the run's close
            # writes its final usage.
            return Answer()
        return Answer(stop=why)

    def over(self, usage: UsageSoFar) -> Stop | None:
        if self.ceiling is None:
            return None
        return spending.ceiling_reached(pricing.usage_of(usage), self.ceiling)

    def output(self, stream: str, line: str) -> None:
        if self._output is not None:
            self._output(stream, line)

    def steps(self, steps: list[Step]) -> None:
        if self.execution_id is None:
            return
        try:
            with self._board():
                steps_store.record_steps(self.execution_id, [step.as_body() for step in steps])
        except Exception as exc:
            if not reconnect.is_unavailable(exc):
                raise
            # The database is away: these steps are lost from the trace, not the run.

    def stalled(self, silent_s: float) -> bool:
        if self.execution_id is None:
            return True
        with self._board():
            return steps_store.mark_stalled(self.execution_id, silent_s)

    # --- the run's end ----------------------------------------------------------

    def claim_lost(self, result: RunResult | None) -> None:
        self.work.outcome = "lost"
        git = self.checkout.git_before
        settle.close(self.run, "cancelled", None, error="claim lost", git_before=git)

    def ended(self, result: RunResult, stop: Stop | None) -> str | None:
        if stop is None:
            if self.checkout.in_worktree:
                with self.clock.phase("git"):
                    settle.write_run_handoff(self.checkout.cwd, self.agent, result)
            return None
        git_after = self._checkpoint()
        with self.clock.phase("board"):
            settle.close_run(self.run, result, stop=stop, error=stop.why,
                             git_before=self.checkout.git_before, git_after=git_after)  # fmt: skip
        self._kept("cancelled", stop.why)
        return stop.why

    def fail(self, result: RunResult, message: str) -> None:
        git_after = self._checkpoint()
        with self.clock.phase("board"):
            settle.close_run(self.run, result, error=message,
                             git_before=self.checkout.git_before, git_after=git_after)  # fmt: skip
        self._kept(str(result.outcome), message)

    def land(self, result: RunResult) -> str:
        """Kept for resume; done without a worktree; in one, judged and landed for
        review, or left to the fix or debt path the judge recorded."""
        run, task, report = self.run, self.task, self.work
        if self.keep_for_resume:
            git_after = self._checkpoint()
            # Closed before the release, which would close a still-running row as
            # cancelled -- and lose the native session the next run resumes.
            settle.close(run, "succeeded", result, git_before=self.checkout.git_before,
                         git_after=git_after)  # fmt: skip
            with self.clock.phase("board"):
                store.release(task.id, ticket=run.ticket)
            report.outcome, report.worktree = "succeeded", "kept"
            return "kept"
        if not self.checkout.in_worktree:
            return self._complete(result)
        with self.clock.phase("verify"):
            landing = settle.land(task, self.agent, run.ticket, self.checkout.cwd,
                                  self.checkout.repo, self.heartbeat_s)  # fmt: skip
        report.verdict = landing.verdict
        git = {"git_before": self.checkout.git_before}
        if landing.landed is not None:
            report.worktree = landing.landed["result"]
            settle.close(run, "succeeded", result, git_after=landing.landed["head"], **git)
            # A file-mutating run that changed nothing counts like a failure.
            unchanged = task.file_mutating and landing.landed["result"] == "cleaned"
            breakers.after_run(
                self.agent.id,
                failed=unchanged,
                detail="the run changed no file",
                execution_id=run.execution_id,
            )
            report.outcome = "succeeded"
            return landing.action
        # Sent back to fix, or blocked with its debt (the judge recorded it), or lost:
        # the work stays on its branch for whoever runs the task next.
        git_after = self._checkpoint() if landing.fenced else self._head()
        lost = landing.action == "lost"
        closed, note = ("cancelled", "claim lost") if lost else ("succeeded", None)
        settle.close(run, closed, result, error=note, git_after=git_after, **git)
        report.outcome = "lost" if lost else "succeeded"
        report.worktree = None if landing.fenced else "kept"
        return landing.action

    def _complete(self, result: RunResult) -> str:
        """A run without a worktree that succeeded: its task done with its summary."""
        run = self.run
        assert run.execution_id is not None
        with self.clock.phase("board"):
            # Before the completion, which closes the run's row with its own words.
            spend_store.record_usage(run.execution_id, pricing.usage_of(result.usage), final=True)
            try:
                outcome = store.complete(
                    run.task_id,
                    self.output_of(result),
                    ticket=run.ticket,
                    if_allowed=True,
                    refuse_when_parked=True,
                )
                settled = "done"
            except VerificationRequired:
                # A person's verdict stands against the work (it outlives a return to
                # todo: board.store.moves.clear_verdict): the run's end hands the work
                # to a person in review, never done -- and is no failure of the agent's.
                outcome = store.await_review(run.task_id, ticket=run.ticket, if_allowed=True)
                settled = "review"
        if outcome.declined and outcome.reason == "lost-claim":
            self.work.outcome = "lost"
            settle.close(run, "cancelled", result, error="claim lost")
            return "lost"
        settle.close_run(run, result, count_success=True)
        self.work.outcome = "succeeded"
        return settled

    def output_of(self, result: RunResult) -> dict[str, Any]:
        """The output a run without a worktree leaves on its task when it succeeds."""
        return {"summary": result.summary}

    def _kept(self, outcome: str, error: str) -> None:
        self.work.outcome, self.work.error = outcome, error
        self.work.worktree = "kept" if self.checkout.in_worktree else None

    def _checkpoint(self) -> str | None:
        if not self.checkout.in_worktree:
            return None
        with self.clock.phase("git"):
            return checkouts.commit_worktree_work(self.checkout.cwd, self.task.id)

    def _head(self) -> str | None:
        return head_of(self.checkout.cwd)


def head_of(cwd: Path) -> str | None:
    try:
        return checkouts.git_out(["rev-parse", "HEAD"], cwd=cwd)
    except ClawbooError:
        return None


def workspace(task: Task, agent: Agent, worktrees: bool, clock: Clock) -> Checkout:
    """The task's checkout (provisioned, resumed, or rebuilt from its branch when
    the row is stale or the directory is gone) and its HEAD, or a scratch dir for
    work that needs no worktree."""
    repo = run_repository(task, agent).path
    if worktrees and task.file_mutating and repo:
        with clock.phase("git"):
            ws, head = worktree_service.checkout_for_run(task.id, repo)
            write_context(Path(ws.worktree_path), task, agent)
        cwd = Path(ws.worktree_path)
        base = ProjectBase(Path(ws.repo_path), ws.base_sha) if ws.base_sha else None
        return Checkout(cwd, True, head if head is not None else head_of(cwd), repo, base)
    scratch = Path(settings.CLAWBOO_STATE_DIR) / "scratch" / task.id
    scratch.mkdir(parents=True, exist_ok=True)
    return Checkout(scratch, False, None)


def write_context(worktree: Path, task: Task, agent: Agent) -> None:
    """Bring TASK.md up to date with the board: this attempt, who runs it, and the
    feedback of the last one, so the checkout alone tells a runtime where it is."""
    path = worktree / scaffold.TASK_FILE
    try:  # what the agent left there: a regular file, read under a deadline
        text = agent_files.read_text(path)
    except (OSError, ValueError):
        text = f"# {task.title}\n"
    marker = "\n## Latest from the board\n"
    text = text.split(marker, 1)[0].rstrip("\n") + "\n"
    lines = [
        f"- attempt {task.attempts}"
        + (f" of {task.max_attempts}" if task.max_attempts else "")
        + f", run by {agent.display_name} ({agent.runtime})",
    ]
    if task.feedback:
        # A reviewer's requested changes, or why the previous attempt failed.
        lines.append(f"- feedback from the previous attempt: {task.feedback}")
    if task.error:
        lines.append(f"- last error: {task.error}")
    agent_files.write_text(path, text + marker + "\n".join(lines) + "\n")
