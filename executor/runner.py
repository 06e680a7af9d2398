"""The local executor: a claimed task worked by its agent's runtime on this host.

claim → the agent's gate (:meth:`Executor.before`) → open execution row → provision /
resume / rebuild the worktree → the one run loop (:class:`executor.attempt.Attempt`,
through the in-process board port :class:`executor.local.LocalBoard`) → the one
settlement (:mod:`executor.settle`: classify → close → spend stop or breaker →
judge → land or send back). With ``keep_for_resume`` the handoff is written, the
task released to ``todo`` and the worktree kept so another runtime resumes it.

Every board write goes through :mod:`board.store`; settling writes carry the claim
ticket, so a worker that lost its claim (lease lapsed, stale sweep) records nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from board import ceilings, store
from board.errors import ClaimConflict, DepthExceeded
from board.models import Task
from boardmcp import credentials as mcp_credentials
from core import reconnect, registry, server_commands
from core.errors import ClawbooError
from core.models import Agent
from core.runlogs import RunLog
from executor import breakers, health, prompts, settle
from executor.attempt import Attempt, Stall, run_settings, run_timeout_of
from executor.local import Clock, LocalBoard, WorkReport, tee, workspace
from executor.runtimes import (
    McpEndpoint,
    RunRequest,
    adapter_for,
    capabilities,
    resume_id_for,
)
from executor.settle import write_run_handoff
from worktrees import handoff

__all__ = ["Executor", "WorkReport", "write_run_handoff"]

log = logging.getLogger(__name__)


def heartbeat_seconds() -> float:
    return float(settings.CLAWBOO_HEARTBEAT_MS) / 1000.0


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
        # The worker's own override; else each run reads the agent's settings as
        # they are at its claim (an edit of ``timeout_s`` applies to the next run).
        self.run_timeout_override = run_timeout_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else heartbeat_seconds()
        self.on_output = on_output
        # The agent's health gate here (the remote worker's rule too).
        self.gate = health.Gate(health.probe_interval_s)

    # --- entry points ---------------------------------------------------------

    def work_once(self, *, team: str | None = None) -> WorkReport:
        """Work a claim a person took for this agent (a review sent back, a blocked
        task resumed for it), else claim the next ready task of its team (or idle)."""
        report = WorkReport(agent_id=self.agent.id)
        # Fresh before every claim: an agent switched to another runtime, paused or
        # changed since the last pass is seen now, not after it claimed.
        self.agent = registry.get_agent(self.agent.id)
        refusal = self.before()
        if refusal is not None:
            report.outcome, report.error = "refused", refusal
            return report
        with Clock(report).phase("board"):
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
        with Clock(report).phase("board"):
            # The run's execution is opened with the claim: one commit, not two.
            claimed = store.claim_next(
                self.agent.id,
                runtime=self.agent.runtime,
                team=team or self.agent.team_id,
                lease_ms=self.lease_ms,
                pid=os.getpid(),
                registered=True,  # deleted since get_agent above: NotFound, as it is
            )
        if claimed is not None and not claimed.ok:
            # agent_paused, budget_paused: waits like a refusal (a resume or a new
            # window is a board change that wakes it).
            report.outcome, report.error = "refused", claimed.detail
            return report
        if claimed is None or claimed.task is None or claimed.ticket is None:
            return report
        opened = claimed.execution.id if claimed.execution is not None else None
        return self.run_claimed(
            claimed.task.id, claimed.ticket, report=report, execution_id=opened, leased_at=leased_at
        )

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
        clock = Clock(report)
        try:
            task = self._dispatch(task_id, ticket, report, clock)
            if task is not None and report.execution_id is not None:
                run = settle.Run(task.id, ticket, self.agent.id, report.execution_id)
                self._run(report, task, run, leased_at)
        except Exception as exc:  # never leave a running execution row behind
            self._crashed(report, task_id, ticket, exc)
        return self._finish(report)

    # --- steps ----------------------------------------------------------------

    def before(self) -> str | None:
        """The agent's gate: why this executor takes no work for it now, or None: a runtime it
        does not run (a person's), an agent no operator approved, a paused one, or
        one whose preflight here fails (re-probed every CLAWBOO_HEALTH_PROBE_MS and
        whenever the agent changed)."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        if self.agent.state == "paused":
            return f"agent is paused: {self.agent.state_reason}"
        agent = self.agent
        return self.gate.refusal((agent.runtime, agent.updated_at), lambda: health.check(agent))

    def _dispatch(self, task_id: str, ticket: str, report: WorkReport, clock: Clock) -> Task | None:
        """The claimed task, checked again for this agent and with its execution open;
        None when it is refused here (failed, with why) or lost already."""
        with clock.phase("board"):
            task = store.get_task(task_id)
            # Fresh: what runs is what was checked, even if the row changed since.
            self.agent = registry.get_agent(self.agent.id)
            run = settle.Run(task_id, ticket, self.agent.id, report.execution_id)
            paused = settle.refuse_paused(run, self.agent)
            if paused is not None:
                report.outcome, report.error = "refused", paused
                return None
            refusal = self._dispatch_refusal(task)
            if refusal is not None:
                settle.close(run, "cancelled", None, error=refusal)
                store.fail(task_id, refusal, ticket=ticket, if_allowed=True)
                report.outcome, report.error = "refused", refusal
                return None
            if report.execution_id is None:
                try:
                    execution = store.open_execution(
                        task_id, ticket, runtime=self.agent.runtime, pid=os.getpid()
                    )
                except ClaimConflict:
                    # Lost already (another executor of this agent runs it, or
                    # the claim moved on): the task is someone else's to settle.
                    report.outcome = "lost"
                    return None
                report.execution_id = execution.id
        return task

    def _refusal(self) -> str | None:
        self.caps = capabilities(self.agent.runtime)
        return agent_refusal(self.agent)

    def _dispatch_refusal(self, task: Task) -> str | None:
        self.caps = capabilities(self.agent.runtime)
        return dispatch_refusal(self.agent, task)

    def _mcp_url(self) -> str | None:
        url = settings.CLAWBOO_MCP_URL
        return url if url and self.caps.mcp else None

    def _run(
        self, report: WorkReport, task: Task, run: settle.Run, leased_at: float | None
    ) -> None:
        """The claimed task's one :class:`executor.attempt.Attempt` on the board in
        process, in the task's checkout: run (the first beat at once, or one
        interval after ``leased_at``: a claim just taken renewed the lease itself),
        then settled (:meth:`executor.attempt.Attempt.settle`)."""
        clock = Clock(report)
        checkout = workspace(task, self.agent, self.caps.worktrees, clock)
        state = handoff.reconstruct_state(checkout.cwd) if checkout.in_worktree else None
        resume = resume_id_for(
            self.agent.runtime,
            state.lastRuntime if state else None,
            state.nativeSessionId if state else None,
        )
        if resume is not None and not store.ran_session(task.id, resume):
            # The handoff is the builder's own file: a session no run of this task
            # had (another agent's, the gateway's main one) is not its to continue.
            resume = None
        mcp_url = self._mcp_url()
        # The run's own credential on the board's MCP server: this agent, this claim.
        key = None
        if mcp_url:
            key = mcp_credentials.mint_run_credential(self.agent.id, task.id, run.ticket)
        # Every line of the run, kept whole (the row keeps a tail) and streamed to
        # whoever watches the card, as it is printed.
        assert run.execution_id is not None
        log = RunLog(task.team_id, task.id, run.execution_id)
        port = LocalBoard(
            self.agent, self.keep_for_resume, self.heartbeat_s, report, task, run, checkout,
            tee(log, self.on_output),
        )  # fmt: skip
        attempt = Attempt(port, self.heartbeat_s, Stall.of(self.agent.settings))
        try:
            request = RunRequest(
                task_id=task.id,
                title=task.title,
                prompt=prompts.run_prompt(task, state, board_tools=key is not None),
                cwd=checkout.cwd,
                timeout_s=run_timeout_of(self.agent.settings, self.run_timeout_override),
                settings=run_settings(self.agent.settings, task.metadata),
                resume_session_id=resume,
                mcp=McpEndpoint(mcp_url, key) if mcp_url and key is not None else None,
                # The execution: a connected runtime's idempotency key per attempt.
                attempt_id=str(run.execution_id),
                project_base=checkout.project_base,
            )
            first = 0.0 if leased_at is None else leased_at + self.heartbeat_s - time.monotonic()
            with clock.phase("runtime"):
                result = attempt.run(adapter_for(self.agent.runtime), request, max(first, 0.0))
            clock.report.timings["runtime"] -= port.board_s
        finally:
            if key is not None:
                settle_despite_outage(lambda: mcp_credentials.revoke_run_credential(key))
            log.close()
        attempt.settle(result)

    def _crashed(self, report: WorkReport, task_id: str, ticket: str, exc: Exception) -> None:
        """The executor itself failed on the task: settled by the one rule
        (:func:`settle_crash`), the task failed (retried)."""
        log.exception("executor failed on task %s", task_id)
        run = settle.Run(task_id, ticket, self.agent.id, report.execution_id)
        report.outcome, report.error = "failed", crash_detail(exc)
        try:
            settle_crash(run, exc, fail_task=True)
        except Exception:
            log.exception("could not record the failure of task %s", task_id)

    def _finish(self, report: WorkReport) -> WorkReport:
        if report.task_id:
            task = store.find_task(report.task_id)
            report.status = task.status if task else None
        return report


def agent_refusal(agent: Agent) -> str | None:
    """Why ``agent``, as it stands now, is not run on this server: a person's runtime,
    or an agent no operator approved."""
    if not capabilities(agent.runtime).automated:
        return f"runtime {agent.runtime!r} needs a person; the executor does not run it"
    return server_commands.agent_run_refusal(agent)


def dispatch_refusal(agent: Agent, task: Task) -> str | None:
    """Why ``agent`` may not run ``task`` now, or None: :func:`agent_refusal`, or the
    task is past the delegation ceiling (:func:`board.store.check_dispatch_depth`).
    The executor asks before each run, and a routine's connected fire before its own."""
    refusal = agent_refusal(agent)
    if refusal is None:
        try:
            store.check_dispatch_depth(task.id, ceilings.MAX_DEPTH)
        except DepthExceeded as exc:
            refusal = exc.detail
    return refusal


def run_claimed_task(task_id: str, agent_id: str, ticket: str) -> dict[str, Any]:
    """The django-q2 entry point (routine fires): work a task the fire already claimed."""
    return Executor(agent_id).run_claimed(task_id, ticket).as_dict()


# How long a worker waits for the database to settle a run it already finished.
SETTLE_PATIENCE_S = 60.0


def settle_despite_outage(write: Callable[[], Any], patience_s: float = SETTLE_PATIENCE_S) -> Any:
    """Run ``write``, waiting out a database outage for up to ``patience_s``."""
    return reconnect.patiently(write, "settling a run", patience_s)


def crash_detail(exc: Exception) -> str:
    return exc.detail if isinstance(exc, ClawbooError) else f"{type(exc).__name__}: {exc}"


def settle_crash(run: settle.Run, exc: Exception, *, fail_task: bool) -> None:
    """The executor failed around a run (no result: what the run streamed stands) --
    one rule for every run in process, the local executor's and a routine's connected
    fire's: the execution is closed ``failed`` (classified); the task is failed and
    retried (``fail_task``; a fire releases it and halts its routine instead), or
    released when the database went away, which is not the task's fault; and the
    agent's breaker counts it unless the database went away. Counted because the
    breaker is what bounds a host whose every run fails before it starts (a
    missing repository, a full disk): uncounted, the agent would spend the attempts
    of every task in the queue. Each write waits out a database outage."""
    detail = crash_detail(exc)
    error_class = breakers.classify(None, detail)
    settle_despite_outage(
        lambda: settle.close(run, "failed", None, error=detail, error_class=error_class)
    )
    if reconnect.is_unavailable(exc) or not fail_task:
        # A database that went away is waited for (a while), so the outcome is
        # recorded rather than left to the lease to lapse; the task runs again.
        settle_despite_outage(lambda: store.release(run.task_id, ticket=run.ticket))
    else:
        settle_despite_outage(
            lambda: store.fail(
                run.task_id, f"executor error: {detail}", ticket=run.ticket, if_allowed=True,
                retry=True,
            )
        )  # fmt: skip
    if not reconnect.is_unavailable(exc):
        # Once: a run the executor failed after counting (its close, its landing)
        # is not counted again here.
        breakers.after_run(run.agent_id, failed=True, detail=detail, execution_id=run.execution_id)
