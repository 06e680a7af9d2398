"""How a run's end is settled, told once: classify → close → spend stop or breaker →
judge → land or send back.

:func:`close_run` is a run's end on the board, wherever it ran: the local executor
calls it in process (:mod:`executor.runner`), a remote worker's ``…/close`` reaches
it through the API (:class:`executor.api.ExecutionCloseView`). :func:`land` is what
follows a run that succeeded in a worktree: the judge, then review -- or the fix
loop or the debt path the judge recorded -- for a local run here, for a remote
worker's pushed branch in the server's intake (:mod:`executor.intake`). A new rule
of how a run ends is added here, in its place in that order.

Work that no longer applies to its base is not its builder's failure (the work
ahead of it landed first): it is a **rebase round**, told here once
(:func:`conflict_fix`, :func:`conflict_parked`) for the merge queue and the
intake alike -- back to its builder with the conflicting paths and how to bring
the branch up to date, at most ``CLAWBOO_MAX_REBASE_ROUNDS`` times, then blocked
for a person (at once when the repository's on-conflict policy is ``block``).
Never counted by the agent's breaker.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from board import store
from board.models import Task
from board.runs import ErrorClass
from core.models import Agent
from executor import breakers, judge, pricing, spending
from executor.attempt import Stop
from executor.runtimes import RunResult
from worktrees import handoff, landing
from worktrees import queue as merge_queue
from worktrees import service as worktree_service

LOG_TAIL = 64_000


@dataclass(frozen=True)
class Run:
    """The run being settled: its task, claim, agent and execution."""

    task_id: str
    ticket: str
    agent_id: str
    execution_id: int | None
    # A remote worker's run: its final usage is the agent side's word
    # (board.store.spend.Usage.as_final).
    remote: bool = False


def close(
    run: Run,
    outcome: str,
    result: RunResult | None,
    *,
    error: str | None = None,
    error_class: str | None = None,
    git_before: str | None = None,
    git_after: str | None = None,
) -> None:
    """Close the run's execution with its outcome, final usage and output tail. With
    no result (the claim was lost, or the executor failed around the run), the usage
    the run streamed stands: it was spent, and the budgets over it counted it."""
    if run.execution_id is None:
        return
    usage = pricing.usage_of(result.usage).__dict__ if result is not None else {}
    store.close_execution(
        run.execution_id,
        outcome,
        git_before=git_before,
        error_class=error_class,
        **usage,
        git_after=git_after,
        exit_code=result.exit_code if result else None,
        error=error,
        log=(result.log_tail or "")[-LOG_TAIL:] if result else None,
        native_session_id=result.native_session_id if result else None,
        final_usage=result is not None,
        remote=run.remote,
    )


def close_run(
    run: Run,
    result: RunResult,
    *,
    stop: Stop | None = None,
    error: str | None = None,
    fail_task: bool = True,
    count_success: bool = False,
    git_before: str | None = None,
    git_after: str | None = None,
) -> str:
    """A run's end: a run stopped for spend (``stop`` says why) is closed
    ``cancelled`` with ``error_class: budget`` and its task blocked (at its ceiling)
    or sent back (a paused cap budget) with the one comment; a failed one is
    classified, closed, its task failed (``fail_task``: a remote worker sends its
    fail itself) and counted by the agent's breaker -- after
    the fail, which a tripped breaker would otherwise hand back first. A succeeded
    one is closed (and counted when ``count_success``; a local run counts it once
    landed). Returns the error class ("" for a success)."""
    git = {"git_before": git_before, "git_after": git_after}
    if stop is not None:
        close(run, "cancelled", result, error=stop.why, error_class=ErrorClass.BUDGET, **git)
        spending.settle_stop(run.task_id, run.ticket, stop)
        return ErrorClass.BUDGET
    outcome = str(result.outcome)
    if outcome == "succeeded":
        close(run, outcome, result, error=error, **git)
        if count_success:
            breakers.after_run(run.agent_id, failed=False, execution_id=run.execution_id)
        return ""
    error_class = breakers.classify(result, error)
    close(run, outcome, result, error=error, error_class=error_class, **git)
    counted = breakers.counts(error_class)
    if fail_task:
        # A failure the breaker counts is the agent's: the task goes back to todo.
        message = error or f"run {outcome}"
        store.fail(run.task_id, message, ticket=run.ticket, if_allowed=True, retry=counted)
    breakers.after_run(
        run.agent_id, failed=counted, detail=error or outcome, execution_id=run.execution_id
    )
    return error_class


def refuse_paused(run: Run, agent: Agent) -> str | None:
    """Why the run opened under ``run``'s claim is not run -- its agent was paused
    after the claim, before the run started (its breaker tripped on another of its
    runs meanwhile, or a person paused it) -- or None. The claim opened the run, so the
    pause did not hand the task back as work not started (board.store.pause_agent):
    this does, as the pause would have (:func:`hand_back_unstarted`). The local
    executor asks before its run; a remote worker that saw the pause closes its run
    ``started: false`` and the server asks (:class:`executor.api.ExecutionCloseView`)."""
    if agent.state != "paused":
        return None
    return hand_back_unstarted(run, agent, f"agent is paused: {agent.state_reason}")


def hand_back_unstarted(run: Run, agent: Agent | None, why: str) -> str:
    """A run its claim opened that never started: closed ``cancelled`` with
    ``error_class: breaker`` (its agent's breaker paused it) or ``cancelled`` (a
    person paused it, or resumed it since the worker saw the pause), never counted by
    the breaker, and the task back to ``todo`` for the next claim. Returns ``why``."""
    by_breaker = agent is not None and agent.state == "paused" and agent.paused_by == "breaker"
    error_class = ErrorClass.BREAKER if by_breaker else ErrorClass.CANCELLED
    close(run, "cancelled", None, error=why, error_class=error_class)
    store.release(run.task_id, ticket=run.ticket)
    return why


@dataclass(frozen=True)
class Landing:
    """What the judge and the landing made of a run: ``review`` (``landed`` is the
    worktree's completion), ``fix`` or ``debt`` (the judge recorded it), or ``lost``
    (the claim moved on: nothing settled)."""

    action: str
    verdict: str | None
    landed: dict[str, Any] | None = None
    fenced: bool = False  # lost at the fence after the judge (its work not yet saved)


def land(
    task: Task,
    agent: Agent,
    ticket: str,
    worktree: Path,
    repo_path: str | None,
    heartbeat_s: float,
    judged: Landing | None = None,
) -> Landing:
    """Judge the run's work in its worktree (unless ``judged`` says what the judge
    decided before a crash), then land it for review -- fenced: a claim lost
    meanwhile settles nothing -- or leave it to the fix or debt path the judge
    recorded."""
    renewed = False
    if judged is None:
        verdict = judge.judge(
            task, agent, ticket, worktree, repo_path=repo_path, heartbeat_s=heartbeat_s
        )
        judged = Landing(verdict.action, verdict.verdict, fenced=verdict.fenced)
        # A verdict recorded under the claim renewed its lease: the fence is passed.
        renewed = verdict.renewed
    if judged.action != "review":
        return judged
    if not renewed and store.renew_lease(task.id, ticket).declined:
        return Landing("lost", judged.verdict, fenced=True)
    # Retained work is checkpointed on its branch; work cleaned up is not.
    landed = worktree_service.complete(task.id, checkpoint=True)
    return Landing("review", judged.verdict, landed)


def conflict_fix(
    branch: str, tip: str, conflicts: list[str], *, merge_ref: str | None = None, then: str
) -> judge.FixRequest:
    """What a builder whose change no longer applies to ``branch`` (at ``tip``) is
    told: the conflicting paths, and to bring its branch up to date by merging
    ``merge_ref`` (default: the branch itself; a remote worker's clone has it as
    ``origin/<branch>``), resolve, verify -- ``then`` says what follows."""
    return judge.FixRequest(
        what=f"conflict: the change no longer applies to {branch} (now at {tip[:12]})",
        why=f"conflicting files: {', '.join(conflicts)}",
        how_to_fix=(
            f"bring the branch up to date (git merge {merge_ref or branch}), resolve them, "
            f"verify, and {then}"
        ),
    )


def rebase_rounds_spent(rounds: int) -> bool:
    """Whether a change that had ``rounds`` rebase rounds gets no more: blocked for
    a person instead (two builders could otherwise trade conflicts for ever)."""
    return rounds >= merge_queue.max_rebase_rounds()


def conflict_parked(repo: Path, rounds: int) -> str | None:
    """Why a change that no longer applies to its base goes to a person (blocked)
    rather than back to its builder for a rebase round, or None: the repository's
    on-conflict policy is ``block`` (``git config clawboo.onConflict``, else
    ``CLAWBOO_LANDING_ON_CONFLICT``, as a direct landing reads it), or the change's
    ``rounds`` rebase rounds are spent. The merge queue and the remote intake ask."""
    if landing.policy_for(repo).on_conflict == landing.BLOCK:
        return "the repository's on-conflict policy is block"
    if rebase_rounds_spent(rounds):
        return f"its {rounds} rebase round(s) are spent"
    return None


def send_back_to_rebase(
    task: Task,
    ticket: str,
    fix: judge.FixRequest,
    conflicts: list[str],
    *,
    repo: Path,
    lease_ms: Any,
) -> str:
    """A remote worker's submitted work that does not merge onto its base (``repo``):
    a rebase round for its builder under the claim it submitted with (the intake's
    record counts them), or -- :func:`conflict_parked`, or no builder -- ``blocked``
    with the reason. Returns ``rebase``, ``blocked`` or ``lost`` (the claim moved on)."""
    note = fix.as_text()
    rounds = int((store.intake_of(task) or {}).get("rebases") or 0)
    parked = conflict_parked(repo, rounds) or (None if task.assignee_agent_id else "no builder")
    if parked is not None:
        spent = f"{note}\n({parked}: a person decides)"
        blocked = store.block(task.id, spent, ticket=ticket, if_allowed=True)
        if blocked.declined:
            return "lost"
        store.set_intake_state(task.id, "blocked", fix.why)
        return "blocked"
    span = lease_ms if isinstance(lease_ms, int) else None
    sent = store.send_back_to_rebase(task.id, ticket, note, conflicts=conflicts, lease_ms=span)
    return "lost" if sent.declined else "rebase"


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
