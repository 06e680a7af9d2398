"""The executor: a claimed task worked by its agent's runtime, verified, and landed.

claim → open execution row → provision / resume / rebuild the worktree → run the
adapter with a heartbeat renewing the lease → write or read AGENT_HANDOFF.json →
judge (the gate, the critic, the fix loop: :mod:`executor.judge`) → complete the worktree (empty →
``done``, non-empty → ``in_review`` behind the gate) → close the execution row with
outcome, cost and git before/after. A failed run maps to a soft or hard fail; with
``keep_for_resume`` the handoff is written, the task released to ``todo`` and the
worktree kept so another runtime resumes it.

Every board write goes through :mod:`board.store`; settling writes carry the claim
ticket, so a worker that lost its claim (lease lapsed, stale sweep) records nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from board import ceilings, store
from board.errors import ClaimConflict, DepthExceeded
from board.models import Task
from board.runs import ErrorClass
from board.store import spend as spend_store
from boardmcp import credentials as mcp_credentials
from core import beats, reconnect, registry, repositories, server_commands, wakeups
from core.errors import ClawbooError
from core.models import Agent
from core.runlogs import RunLog
from executor import breakers, health, judge, pricing, prompts, spending
from executor.attempt import Answer, Attempt
from executor.runtimes import (
    McpEndpoint,
    RunRequest,
    RunResult,
    adapter_for,
    capabilities,
    resume_id_for,
)
from executor.runtimes.base import Outcome, UsageSoFar
from worktrees import agent_files, checkouts, handoff, scaffold
from worktrees import service as worktree_service

log = logging.getLogger(__name__)

DEFAULT_RUN_TIMEOUT_S = 3600.0
LOG_TAIL = 64_000


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


class _Clock:
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


def heartbeat_seconds() -> float:
    return float(settings.CLAWBOO_HEARTBEAT_MS) / 1000.0


def _tee(
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


class LocalBoard:
    """The board in process, as a local run sees it (:class:`executor.attempt.Board`):
    the store's heartbeat and spend writes, a database outage waited out while the
    run goes on."""

    def __init__(
        self,
        task: Task,
        ticket: str,
        execution_id: int | None,
        clock: _Clock,
        output: Callable[[str, str], None] | None,
        heartbeat_s: float,
        ceiling: int | None,
    ) -> None:
        self.task, self.ticket, self.execution_id = task, ticket, execution_id
        self.clock, self._output, self.heartbeat_s = clock, output, heartbeat_s
        self.ceiling = ceiling
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

    def over(self, usage: UsageSoFar) -> str | None:
        if self.ceiling is None:
            return None
        return spending.ceiling_reached(pricing.usage_of(usage), self.ceiling)

    def output(self, stream: str, line: str) -> None:
        if self._output is not None:
            self._output(stream, line)


class Executor:
    """Runs the board's tasks for one agent. Each step is a method a test can call."""

    def __init__(
        self,
        agent_id: str,
        *,
        keep_for_resume: bool = False,
        lease_ms: int | None = None,
        run_timeout_s: float | None = None,
        heartbeat_s: float | None = None,
        on_output: Callable[[str, str], None] | None = None,
    ) -> None:
        self.agent: Agent = registry.get_agent(agent_id)
        self.caps = capabilities(self.agent.runtime)
        self.keep_for_resume = keep_for_resume
        self.lease_ms = lease_ms
        self.run_timeout_s = run_timeout_s or float(
            self.agent.settings.get("timeout_s", DEFAULT_RUN_TIMEOUT_S)
        )
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else heartbeat_seconds()
        self.on_output = on_output
        # Why the current run was stopped for spend (set by _run), or None.
        self._spend_stop: str | None = None
        # The last preflight: (runtime, updated_at) it probed, when (monotonic).
        self._probed: tuple[tuple[str, Any], float] | None = None
        self._health: health.Health | None = None

    # --- entry points ---------------------------------------------------------

    def work_once(self, *, team: str | None = None) -> WorkReport:
        """Work a claim a person took for this agent (a review sent back, a blocked
        task resumed for it), else claim the next ready task of its team (or idle)."""
        report = WorkReport(agent_id=self.agent.id)
        # Fresh before every claim: an agent switched to another runtime, paused or
        # changed since the last pass is seen now, not after it claimed.
        self.agent = registry.get_agent(self.agent.id)
        self.caps = capabilities(self.agent.runtime)
        refusal = self._claim_refusal()
        if refusal is not None:
            report.outcome, report.error = "refused", refusal
            return report
        with _Clock(report).phase("board"):
            started = store.start_assigned(
                self.agent.id,
                team=team or self.agent.team_id,
                runtime=self.agent.runtime,
                pid=os.getpid(),
            )
        if started is not None:
            return self.run_claimed(
                started.task.id, started.ticket, report=report, execution_id=started.execution.id
            )
        leased_at = time.monotonic()
        with _Clock(report).phase("board"):
            claimed = store.claim_next(
                self.agent.id,
                runtime=self.agent.runtime,
                team=team or self.agent.team_id,
                lease_ms=self.lease_ms,
            )
        if claimed is not None and not claimed.ok:
            # agent_paused, budget_paused: waits like a refusal (a resume or a new
            # window is a board change that wakes it).
            report.outcome, report.error = "refused", claimed.detail
            return report
        if claimed is None or claimed.task is None or claimed.ticket is None:
            return report
        return self.run_claimed(claimed.task.id, claimed.ticket, report=report, leased_at=leased_at)

    def run_claimed(
        self,
        task_id: str,
        ticket: str,
        *,
        report: WorkReport | None = None,
        execution_id: int | None = None,
        leased_at: float | None = None,
    ) -> WorkReport:
        """Work a task this agent already claimed (``ticket`` from the claim), in the
        execution ``execution_id`` when one was opened with the claim's start.
        ``leased_at``: when (``time.monotonic()``) the claim last set its lease, if the
        caller knows; the first heartbeat is due one interval after it."""
        report = report or WorkReport(agent_id=self.agent.id)
        report.task_id = task_id
        report.execution_id = execution_id
        clock = _Clock(report)
        try:
            with clock.phase("board"):
                task = store.get_task(task_id)
                # Fresh: what runs is what was checked, even if the row changed since.
                self.agent = registry.get_agent(self.agent.id)
                refusal = self._dispatch_refusal(task)
                if refusal is not None:
                    if execution_id is not None:
                        self._close(execution_id, "cancelled", None, None, None, refusal)
                    store.fail(task_id, refusal, ticket=ticket, if_allowed=True)
                    report.outcome, report.error = "refused", refusal
                    return self._finish(report)
                if execution_id is None:
                    try:
                        execution = store.open_execution(
                            task_id, ticket, runtime=self.agent.runtime, pid=os.getpid()
                        )
                    except ClaimConflict:
                        # Lost already (another executor of this agent runs it, or
                        # the claim moved on): the task is someone else's to settle.
                        report.outcome = "lost"
                        return self._finish(report)
                    execution_id = report.execution_id = execution.id
            cwd, in_worktree, git_before = self._workspace(task, clock)
            if in_worktree and git_before is None:
                git_before = self._head(cwd)
            result = self._run(
                task, ticket, cwd, in_worktree, clock, leased_at, execution_id, str(execution_id)
            )
            if result is None:  # the claim was lost mid-run: record nothing on the task
                report.outcome = "lost"
                self._close(execution_id, "cancelled", None, git_before, None, "claim lost")
                return self._finish(report)
            if self._spend_stop is not None:
                return self._stopped_for_spend(
                    report, execution_id, ticket, result, git_before, cwd, in_worktree, clock
                )
            if in_worktree:
                with clock.phase("git"):
                    write_run_handoff(cwd, self.agent, result)
            if result.outcome != "succeeded":
                return self._failed(
                    report, execution_id, ticket, result, git_before, cwd, in_worktree, clock
                )
            if self.keep_for_resume:
                git_after = self._checkpoint(cwd, task_id, clock) if in_worktree else None
                # Closed before the release, which would close a still-running row as
                # cancelled -- and lose the native session the next run resumes.
                self._close(execution_id, "succeeded", result, git_before, git_after, None)
                with clock.phase("board"):
                    store.release(task_id, ticket=ticket)
                report.outcome, report.worktree = "succeeded", "kept"
                return self._finish(report)
            return self._land(
                report, execution_id, task, ticket, result, git_before, cwd, in_worktree, clock
            )
        except Exception as exc:  # never leave a running execution row behind
            log.exception("executor failed on task %s", task_id)
            detail = exc.detail if isinstance(exc, ClawbooError) else f"{type(exc).__name__}: {exc}"
            report.outcome, report.error = "failed", detail
            error_class = breakers.classify(None, detail)
            try:
                # A database that went away mid-run is waited for (a while), so the
                # outcome is recorded rather than left to the lease to lapse.
                if execution_id is not None:
                    settle_despite_outage(
                        lambda: self._close(
                            execution_id, "failed", None, None, None, detail, error_class
                        )
                    )
                if reconnect.is_unavailable(exc):
                    # Not the task's fault: it goes back to todo to be run again (its
                    # checkout, if any, is resumed), not failed.
                    settle_despite_outage(lambda: store.release(task_id, ticket=ticket))
                else:
                    settle_despite_outage(
                        lambda: store.fail(
                            task_id,
                            f"executor error: {detail}",
                            ticket=ticket,
                            if_allowed=True,
                            retry=True,
                        )
                    )
                    breakers.after_run(self.agent.id, failed=True, detail=detail)
            except Exception:
                log.exception("could not record the failure of task %s", task_id)
            return self._finish(report)

    # --- steps ----------------------------------------------------------------

    def _claim_refusal(self) -> str | None:
        """Why this executor takes no work for its agent now, or None: a runtime it
        does not run (a person's), an agent no operator approved, a paused one, or
        one whose preflight here fails (re-probed every CLAWBOO_HEALTH_PROBE_MS and
        whenever the agent changed)."""
        if not self.caps.automated:
            return f"runtime {self.agent.runtime!r} is not run by this executor"
        not_approved = server_commands.agent_run_refusal(self.agent)
        if not_approved is not None:
            return not_approved
        if self.agent.state == "paused":
            return f"agent is paused: {self.agent.state_reason}"
        version = (self.agent.runtime, self.agent.updated_at)
        if (
            self._probed is None
            or self._probed[0] != version
            or (time.monotonic() - self._probed[1] >= health.probe_interval_s())
        ):
            self._health = health.check(self.agent)
            self._probed = (version, time.monotonic())
        if self._health is not None and not self._health.ok:
            return f"agent is unhealthy: {self._health.detail}"
        return None

    def _dispatch_refusal(self, task: Task) -> str | None:
        self.caps = capabilities(self.agent.runtime)
        if not self.caps.automated:
            return f"runtime {self.agent.runtime!r} needs a person; the executor does not run it"
        not_approved = server_commands.agent_run_refusal(self.agent)
        if not_approved is not None:
            return not_approved
        try:
            store.check_dispatch_depth(task.id, ceilings.MAX_DEPTH)
        except DepthExceeded as exc:
            return exc.detail
        return None

    def _repo_path(self, task: Task) -> str | None:
        """Where the task's worktree is made: the task's repository, else the path its
        metadata names, else the agent's default repository (``settings.repository``)
        or path (``settings.repo_path``). Whatever it is, the worktree service makes a
        worktree only in a registered repository of the task's team."""
        if task.repository_id is not None:
            named = repositories.registered(task.repository_id, task.team_id)
            if named is not None:
                return named.path
        value = (task.metadata or {}).get("repo_path")
        if isinstance(value, str) and value:
            return value
        conf = self.agent.settings or {}
        default = conf.get("repository")
        if isinstance(default, str) and default:
            named = repositories.registered(default, task.team_id)
            if named is not None:
                return named.path
        value = conf.get("repo_path")
        if not isinstance(value, str) or not value:
            return None
        if (
            self.agent.team_id == task.team_id
            and repositories.registered_path(task.team_id, value) is None
        ):
            # The agent's settings are an operator's (approved before every run, see
            # _dispatch_refusal): its path registers as its team's repository.
            return repositories.ensure(task.team_id, value).path
        return value

    def _workspace(self, task: Task, clock: _Clock) -> tuple[Path, bool, str | None]:
        """The task's checkout (provisioned, resumed, or rebuilt from its branch when
        the row is stale or the directory is gone), or a scratch dir for work that
        needs no worktree; and the checkout's HEAD when provisioning already knows it."""
        repo = self._repo_path(task)
        if self.caps.worktrees and task.file_mutating and repo:
            with clock.phase("git"):
                ws, head = worktree_service.checkout_for_run(task.id, repo)
                self._write_context(Path(ws.worktree_path), task)
            return Path(ws.worktree_path), True, head
        scratch = Path(settings.CLAWBOO_STATE_DIR) / "scratch" / task.id
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch, False, None

    def _write_context(self, worktree: Path, task: Task) -> None:
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
            + f", run by {self.agent.display_name} ({self.agent.runtime})",
        ]
        if task.feedback:
            # A reviewer's requested changes, or why the previous attempt failed.
            lines.append(f"- feedback from the previous attempt: {task.feedback}")
        if task.error:
            lines.append(f"- last error: {task.error}")
        agent_files.write_text(path, text + marker + "\n".join(lines) + "\n")

    def _mcp_url(self) -> str | None:
        url = settings.CLAWBOO_MCP_URL
        return url if url and self.caps.mcp else None

    def _run(
        self,
        task: Task,
        ticket: str,
        cwd: Path,
        in_worktree: bool,
        clock: _Clock,
        leased_at: float | None = None,
        execution_id: int | None = None,
        attempt: str | None = None,
    ) -> RunResult | None:
        """Run the adapter through the one run loop (:class:`executor.attempt.Attempt`)
        on the board in process: the first beat at once, or one interval after
        ``leased_at`` (a claim just taken renewed the lease itself). Returns None
        when a heartbeat finds the claim lost (the run is cancelled); a run that
        reached its ceiling, or whose scope a cap budget paused, is cancelled and
        ``_spend_stop`` says why."""
        self._spend_stop = None
        state = handoff.reconstruct_state(cwd) if in_worktree else None
        resume = resume_id_for(
            self.agent.runtime,
            state.lastRuntime if state else None,
            state.nativeSessionId if state else None,
        )
        mcp_url = self._mcp_url()
        # The run's own credential on the board's MCP server: this agent, this claim.
        key = None
        if mcp_url:
            key = mcp_credentials.mint_run_credential(self.agent.id, task.id, ticket)
        # Every line of the run, kept whole (the row keeps a tail) and streamed to
        # whoever watches the card, as it is printed.
        log = RunLog(task.team_id, task.id, execution_id) if execution_id is not None else None
        port = LocalBoard(
            task, ticket, execution_id, clock, _tee(log, self.on_output), self.heartbeat_s,
            spend_store.run_ceiling(task, dict(self.agent.settings or {})),
        )  # fmt: skip
        run = Attempt(port, self.heartbeat_s)
        try:
            request = RunRequest(
                task_id=task.id,
                title=task.title,
                prompt=prompts.run_prompt(task, state, board_tools=key is not None),
                cwd=cwd,
                timeout_s=self.run_timeout_s,
                settings=dict(self.agent.settings or {}),
                resume_session_id=resume,
                mcp=McpEndpoint(mcp_url, key) if mcp_url and key is not None else None,
                # The execution: a connected runtime's idempotency key per attempt.
                attempt_id=attempt,
            )
            first = 0.0 if leased_at is None else leased_at + self.heartbeat_s - time.monotonic()
            with clock.phase("runtime"):
                result = run.run(adapter_for(self.agent.runtime), request, max(first, 0.0))
            clock.report.timings["runtime"] -= port.board_s
            self._spend_stop = run.meter.stop
        finally:
            if key is not None:
                settle_despite_outage(lambda: mcp_credentials.revoke_run_credential(key))
            if log is not None:
                log.close()
        return None if run.lost else result

    def _stopped_for_spend(
        self,
        report: WorkReport,
        execution_id: int,
        ticket: str,
        result: RunResult,
        git_before: str | None,
        cwd: Path,
        in_worktree: bool,
        clock: _Clock,
    ) -> WorkReport:
        """A run stopped for spend: execution ``cancelled`` (``error_class: budget``),
        the task back to todo with a comment saying why, one notification."""
        why = self._spend_stop or "stopped for spend"
        git_after = self._checkpoint(cwd, report.task_id or "", clock) if in_worktree else None
        result.outcome = Outcome.CANCELLED
        self._close(
            execution_id, "cancelled", result, git_before, git_after, why, ErrorClass.BUDGET
        )
        with clock.phase("board"):
            spending.settle_stop(report.task_id or "", ticket, why)
        report.outcome, report.error = "cancelled", why
        report.worktree = "kept" if in_worktree else None
        return self._finish(report)

    def _checkpoint(self, cwd: Path, task_id: str, clock: _Clock) -> str:
        with clock.phase("git"):
            return checkouts.commit_worktree_work(cwd, task_id)

    def _head(self, cwd: Path) -> str | None:
        try:
            return checkouts.git_out(["rev-parse", "HEAD"], cwd=cwd)
        except ClawbooError:
            return None

    def _failed(
        self,
        report: WorkReport,
        execution_id: int,
        ticket: str,
        result: RunResult,
        git_before: str | None,
        cwd: Path,
        in_worktree: bool,
        clock: _Clock,
    ) -> WorkReport:
        """A failed run: soft fail (back to todo with feedback) or hard fail (blocked);
        the worktree is kept so the next attempt resumes from the handoff."""
        message = result.error or f"run {result.outcome}"
        error_class = breakers.classify(result, message)
        git_after = self._checkpoint(cwd, report.task_id or "", clock) if in_worktree else None
        self._close(
            execution_id, result.outcome, result, git_before, git_after, message, error_class
        )
        counted = breakers.counts(error_class)
        with clock.phase("board"):
            # A failure the breaker counts is the agent's: the task goes back to todo.
            store.fail(report.task_id or "", message, ticket=ticket, if_allowed=True, retry=counted)
        breakers.after_run(self.agent.id, failed=counted, detail=message)
        report.outcome, report.error = str(result.outcome), message
        report.worktree = "kept" if in_worktree else None
        return self._finish(report)

    def _land(
        self,
        report: WorkReport,
        execution_id: int,
        task: Task,
        ticket: str,
        result: RunResult,
        git_before: str | None,
        cwd: Path,
        in_worktree: bool,
        clock: _Clock,
    ) -> WorkReport:
        if not in_worktree:
            with clock.phase("board"):
                # Before the completion, which closes the run's row with its own words.
                spend_store.record_usage(execution_id, _priced(result))
                outcome = store.complete(
                    task.id,
                    {"summary": result.summary},
                    ticket=ticket,
                    if_allowed=True,
                    refuse_when_parked=True,
                )
            if outcome.declined and outcome.reason == "lost-claim":
                report.outcome = "lost"
                self._close(execution_id, "cancelled", result, None, None, "claim lost")
                return self._finish(report)
            self._close(execution_id, "succeeded", result, None, None, None)
            breakers.after_run(self.agent.id, failed=False)
            report.outcome = "succeeded"
            return self._finish(report)
        with clock.phase("verify"):
            judged = judge.judge(
                task,
                self.agent,
                ticket,
                cwd,
                repo_path=self._repo_path(task),
                heartbeat_s=self.heartbeat_s,
            )
        report.verdict = judged.verdict
        if judged.action != "review":
            # Sent back to fix, or blocked with its debt: the judge recorded it.
            git_after = self._head(cwd)
            lost = judged.action == "lost"
            closed, note = ("cancelled", "claim lost") if lost else ("succeeded", None)
            self._close(execution_id, closed, result, git_before, git_after, note)
            report.outcome = "lost" if lost else "succeeded"
            report.worktree = "kept"
            return self._finish(report)
        with clock.phase("board"):
            fence = store.renew_lease(task.id, ticket)
        if fence.declined:
            # The work stays on its branch for whoever runs the task next.
            git_after = self._checkpoint(cwd, task.id, clock)
            report.outcome = "lost"
            self._close(execution_id, "cancelled", result, git_before, git_after, "claim lost")
            return self._finish(report)
        with clock.phase("git"):
            # Retained work is checkpointed on its branch; work cleaned up is not.
            landed = worktree_service.complete(task.id, checkpoint=True)
        report.worktree = landed["result"]
        self._close(execution_id, "succeeded", result, git_before, landed["head"], None)
        # A file-mutating run that changed nothing counts like a failure.
        unchanged = task.file_mutating and landed["result"] == "cleaned"
        breakers.after_run(self.agent.id, failed=unchanged, detail="the run changed no file")
        report.outcome = "succeeded"
        return self._finish(report)

    def _close(
        self,
        execution_id: int | None,
        outcome: str,
        result: RunResult | None,
        git_before: str | None,
        git_after: str | None,
        error: str | None,
        error_class: str | None = None,
    ) -> None:
        if execution_id is None:
            return
        usage = _priced(result).__dict__ if result is not None else {}
        store.close_execution(
            execution_id,
            outcome,
            git_before=git_before,
            error_class=error_class,
            **usage,
            git_after=git_after,
            exit_code=result.exit_code if result else None,
            error=error,
            log=(result.log_tail or "")[-LOG_TAIL:] if result else None,
            native_session_id=result.native_session_id if result else None,
        )

    def _finish(self, report: WorkReport) -> WorkReport:
        if report.task_id:
            task = store.find_task(report.task_id)
            report.status = task.status if task else None
        return report


def write_run_handoff(cwd: Path, agent: Agent, result: RunResult) -> None:
    """A run's handoff in its worktree (local, or a remote run's taken in on the
    server): the runtime's own if it wrote one this run; else ours."""
    existing = handoff.read_handoff(cwd)
    if existing is not None and existing.get("runtime") == agent.runtime:
        if result.native_session_id and not existing.get("nativeSessionId"):
            existing["nativeSessionId"] = result.native_session_id
            # A field the reader had to drop is not written back; the writer is.
            existing.setdefault("handoffFrom", agent.display_name)
            handoff.write_handoff(cwd, existing)
        return
    ok = result.outcome == "succeeded"
    doc: dict[str, Any] = {
        "handoffFrom": agent.display_name,
        "runtime": agent.runtime,
        "timestamp": dt.datetime.now(dt.UTC).isoformat(),
        "completedSubtasks": [result.summary[:2000]] if ok and result.summary else [],
        "brokenOrUnverified": [] if ok else [(result.error or result.outcome)[:2000]],
        "nextBestStep": "verify and review the change"
        if ok
        else "fix what broke, then re-run ./init.sh",
        "warnings": [],
    }
    if result.native_session_id:
        doc["nativeSessionId"] = result.native_session_id
    handoff.write_handoff(cwd, doc)


def _priced(result: RunResult) -> spend_store.Usage:
    """A finished run's usage with its cost: reported, estimated or unknown."""
    return pricing.usage_of(result.usage)


def run_claimed_task(task_id: str, agent_id: str, ticket: str) -> dict[str, Any]:
    """The django-q2 entry point (routine fires): work a task the fire already claimed."""
    return Executor(agent_id).run_claimed(task_id, ticket).as_dict()


# How long a worker waits for the database to settle a run it already finished.
SETTLE_PATIENCE_S = 60.0


def settle_despite_outage(write: Callable[[], Any], patience_s: float = SETTLE_PATIENCE_S) -> Any:
    """Run ``write``, waiting out a database outage for up to ``patience_s``."""
    return reconnect.patiently(write, "settling a run", patience_s)


def _unavailable_detail(error: str | None) -> bool:
    """A run that failed because the database went away mid-run (the executor
    settles what it can and reports the error as text)."""
    return bool(error) and any(
        name in (error or "") for name in ("OperationalError", "InterfaceError")
    )


# How often work --all looks for agents registered since it started.
DISCOVER_S = 5.0


def work_loop(
    agent_ids: list[str],
    stop: threading.Event,
    *,
    poll_s: float = 5.0,
    once: bool = False,
    report: Callable[[WorkReport], None] | None = None,
    discover: Callable[[], list[str]] | None = None,
    lease_ms: int | None = None,
) -> None:
    """One thread per agent, each claiming and working its team's ready tasks until
    ``stop`` is set (or, with ``once``, until nothing is ready). With ``discover``,
    agents registered later get a thread of their own too. ``lease_ms``: the lease
    of each claim (the board's default when None).

    An idle thread waits for the board to change (:mod:`core.wakeups`), so work that
    becomes claimable is claimed at once; ``poll_s`` is only the safety net."""

    def loop(agent_id: str) -> None:
        outage = reconnect.Outage(f"worker {agent_id}")
        executor: Executor | None = None
        last_refusal: str | None = None
        try:
            while not stop.is_set():
                reconnect.fresh()
                since = wakeups.seen(wakeups.BOARD)  # before the look: no lost wake
                try:
                    if executor is None:
                        executor = Executor(agent_id, lease_ms=lease_ms)
                    result = executor.work_once()
                except Exception as exc:
                    if not reconnect.is_unavailable(exc):
                        raise
                    # The database went away (restart, terminated connection, a
                    # file that stays locked): wait, reconnect, carry on working.
                    stop.wait(outage.lost(exc))
                    continue
                if result.outcome != "failed" or not _unavailable_detail(result.error):
                    outage.ok()
                # A refusal (e.g. an agent no operator approved) is reported once, not
                # at every poll, until it changes.
                refusal = result.error if result.outcome == "refused" else None
                if (
                    result.outcome != "idle"
                    and report is not None
                    and (refusal is None or refusal != last_refusal)
                ):
                    report(result)
                last_refusal = refusal
                if result.outcome in ("idle", "refused"):
                    if once:
                        return
                    wakeups.wait(wakeups.BOARD, since, poll_s)
        except Exception:
            log.exception("worker for agent %s stopped", agent_id)
        finally:
            from django.db import connection

            connection.close()

    threads: dict[str, threading.Thread] = {}

    def start(agent_id: str) -> None:
        thread = threading.Thread(
            target=loop, args=(agent_id,), name=f"work-{agent_id}", daemon=True
        )
        threads[agent_id] = thread
        thread.start()

    for agent_id in agent_ids:
        start(agent_id)
    if not once:
        # Until stopped: look for agents registered since (on a board change, or
        # every DISCOVER_S), and beat for /healthz while any worker thread runs.
        # Whoever sets ``stop`` calls wakeups.wake_all().
        beater = beats.Beater("workers")
        outage = reconnect.Outage("workers")
        try:
            while not stop.is_set():
                reconnect.fresh()
                since = wakeups.seen(wakeups.BOARD)
                if not threads or any(t.is_alive() for t in threads.values()):
                    beater.maybe_beat()
                try:
                    for agent_id in discover() if discover is not None else ():
                        if agent_id not in threads:
                            start(agent_id)
                except Exception as exc:
                    if not reconnect.is_unavailable(exc):
                        raise
                    stop.wait(outage.lost(exc))
                    continue
                outage.ok()
                wakeups.wait(wakeups.BOARD, since, min(DISCOVER_S, beater.interval_s))
        finally:
            beater.stop()
        wakeups.wake_all()  # idle threads return to see the stop
    for thread in list(threads.values()):
        thread.join()
