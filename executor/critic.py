"""The critic: the team's reviewer agent reads a risky change its builder finished.

After a green gate, :func:`is_risky` decides whether the change needs a second pair
of eyes (GOVERNANCE §4); :func:`review` runs the team's ``reviewer_agent`` through
its own runtime in a detached checkout at the committed change (no branch: a
reviewer has nothing to push, and what it writes there reaches neither the task's
branch nor the base; the checkout is removed afterwards). Its credential on the
board's MCP server reads and settles nothing. The run is recorded as an execution
of the task, with its cost, like any run.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from board import judgement, store
from board.models import ExecutionProcess, Task
from board.store import spend as spend_store
from board.store import steps as steps_store
from boardmcp import credentials as mcp_credentials
from core import server_commands
from core.models import Agent, AgentState, Team
from executor import breakers, pricing
from executor.attempt import run_timeout_of
from executor.runtimes import McpEndpoint, RunRequest, RunResult, adapter_for, capabilities
from executor.runtimes.base import ProjectBase, start_run
from executor.steps import Step
from worktrees import checkouts
from worktrees.review import PLAIN_DIFF
from worktrees.scaffold import SOR_FILES

log = logging.getLogger(__name__)

RISK_LABEL = "risk"
DEFAULT_TIMEOUT_S = 1800.0
PROMPT_DIFF_CHARS = 60_000


@dataclass(frozen=True)
class CriticReport:
    findings: list[dict[str, Any]]
    # Who reviewed ({agent, runtime, model}); None: nobody did (the findings say why).
    reviewer: dict[str, Any] | None


def min_files() -> int:
    return int(settings.CLAWBOO_CRITIC_MIN_FILES)


def min_lines() -> int:
    return int(settings.CLAWBOO_CRITIC_MIN_LINES)


def is_risky(task: Task, diffstat: dict[str, Any]) -> bool:
    """More than CLAWBOO_CRITIC_MIN_FILES files or CLAWBOO_CRITIC_MIN_LINES changed
    lines, a task with a parent, or the label ``risk``."""
    files = diffstat.get("files") or []
    lines = int(diffstat.get("insertions") or 0) + int(diffstat.get("deletions") or 0)
    return (
        len(files) > min_files()
        or lines > min_lines()
        or task.parent_task_id is not None
        or RISK_LABEL in (task.labels or [])
    )


def reviewer_named(task: Task) -> bool:
    """Whether the task's team names a reviewer at all (whether it may run is
    :func:`reviewer_of`'s question)."""
    return Team.objects.filter(pk=task.team_id, reviewer_agent__isnull=False).exists()


def reviewer_of(task: Task) -> Agent | None:
    """The team's reviewer agent, when one is named and the executor can run it: any
    runtime the executor runs (GOVERNANCE §4), the connected ``openclaw`` too (over
    the gateway, as its ordinary tasks; it reviews the diff its prompt carries, its
    workspace being its own). A person cannot be named (``human``: refused when the
    team names it)."""
    team = Team.objects.select_related("reviewer_agent").filter(pk=task.team_id).first()
    agent = team.reviewer_agent if team is not None else None
    if agent is None or agent.team_id != task.team_id:
        return None
    if not capabilities(agent.runtime).automated:
        return None
    if server_commands.agent_run_refusal(agent) is not None:
        log.warning("reviewer %s is not approved to run; no critic for %s", agent.id, task.id)
        return None
    return agent


def self_review_finding(reviewer: Agent) -> dict[str, Any]:
    """The one non-blocking finding of a risky change its team's reviewer built."""
    return {
        "severity": "other",
        "title": "no independent critic",
        "body": f"the team's reviewer {reviewer.id!r} built this change, and a builder "
        "does not judge its own work; name another reviewer agent to have such "
        "changes reviewed",
    }


def stopped_reviewer_finding(reviewer: Agent, task: Task) -> dict[str, Any] | None:
    """The one non-blocking finding of a risky change whose team's reviewer may not
    run now (paused by a person or its breaker, unhealthy, or under a cap budget
    that is spent), or None when it may. A paused agent runs nothing until a person
    resumes it, and a spent cap stops every run it covers, reviews included: the
    person who reviews the change is told there was no critic, and why."""
    budget = spend_store.paused_cap_over(task, reviewer.id)
    if budget is not None:
        return {
            "severity": "other",
            "title": "no critic: a cap budget over the review is spent",
            "body": f"the {budget.scope} {budget.scope_id!r} {budget.limit_cents}¢ "
            f"{budget.window} budget (cap) is paused; resume it to have such changes "
            "reviewed",
        }
    state = reviewer.dispatch_state
    if state == AgentState.ACTIVE:
        return None
    why = reviewer.state_reason if state == AgentState.PAUSED else reviewer.health_detail
    return {
        "severity": "other",
        "title": f"no critic: the team's reviewer is {state}",
        "body": f"the team's reviewer {reviewer.id!r} is {state}"
        + (f" ({why})" if why else "")
        + "; resume it (or name another reviewer agent) to have such changes reviewed",
    }


def prompt(task: Task, base: str, head: str, diff: str) -> str:
    severities = ", ".join(judgement.SEVERITIES)
    blocking = ", ".join(judgement.BLOCKING_SEVERITIES)
    shown = diff[:PROMPT_DIFF_CHARS]
    cut = "\n[diff truncated; run git diff yourself]" if len(diff) > len(shown) else ""
    return (
        f"You are the critic of task {task.id}: {task.title}\n\n"
        f"{task.description}\n\nAcceptance criteria: {task.goal or '(none given)'}\n\n"
        f"Review the committed change in this checkout: `git diff {base} {head}`, "
        f"leaving out the task's bookkeeping files ({', '.join(SOR_FILES)}). "
        "Do not change any file: you review, you do not fix.\n\n"
        f"The change:\n```diff\n{shown}{cut}\n```\n\n"
        "Answer with exactly one JSON object and nothing else:\n"
        '{"findings": [{"severity": "...", "title": "...", "body": "...", '
        '"file": "path", "line": 1, "confidence": 0.9}]}\n'
        f"severity is one of {severities}; only {blocking} block the change. "
        'No findings: {"findings": []}.'
    )


def parse_findings(result: RunResult, runtime: str) -> list[dict[str, Any]]:
    """The reviewer's one JSON object of findings; output it cannot parse becomes
    one non-blocking ``other`` finding."""
    texts = [result.summary]
    if runtime == "command":
        # A command reviewer's findings are the one JSON object it prints on stdout.
        texts += list(reversed(result.log_tail.splitlines()))
    for text in texts:
        found = _findings_in(text or "")
        if found is not None:
            return [f for f in (judgement.clean_finding(raw) for raw in found) if f is not None]
    said = (result.summary or result.error or result.log_tail or "").strip()
    return [
        {
            "severity": "other",
            "title": "the reviewer's answer could not be read as findings",
            "body": said[-judgement.BODY_MAX :] or f"(no output; run {result.outcome})",
        }
    ]


def _findings_in(text: str) -> list[Any] | None:
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _end = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict) and isinstance(value.get("findings"), list):
            return list(value["findings"])
        start = text.find("{", start + 1)
    return None


def review(
    task: Task,
    reviewer: Agent,
    *,
    repo: Path,
    base: str,
    head: str,
    ticket: str,
    heartbeat_s: float,
) -> CriticReport:
    """Run ``reviewer`` on the change ``base..head`` in a detached checkout at
    ``head``, heartbeating the builder's claim meanwhile; record its run."""
    checkout = checkouts.provision_review_worktree(repo, head)
    started = store.now()
    steps: list[Step] = []
    key: str | None = None
    try:
        # The change, as the landing counts it: the task's bookkeeping files (its
        # handoff, its verification notes) are not the builder's work to review.
        diff = checkouts.git_out(
            ["diff", "--no-color", *PLAIN_DIFF, base, head, "--", *checkouts.WORK_PATHS],
            cwd=checkout,
        )
        mcp_url = settings.CLAWBOO_MCP_URL
        if mcp_url and capabilities(reviewer.runtime).mcp:
            key = mcp_credentials.mint_run_credential(reviewer.id, task.id, ticket, read_only=True)
        request = RunRequest(
            task_id=task.id,
            title=f"review: {task.title}",
            prompt=prompt(task, base, head, diff),
            cwd=checkout,
            timeout_s=run_timeout_of(reviewer.settings, default=DEFAULT_TIMEOUT_S),
            settings=dict(reviewer.settings or {}),
            env={"CLAWBOO_REVIEW_BASE": base, "CLAWBOO_REVIEW_HEAD": head},
            mcp=McpEndpoint(mcp_url, key) if key is not None else None,
            # A connected runtime's idempotency key: one review run per change.
            attempt_id=f"review-{head[:12]}",
            # The review's trace, written with its execution once it ended.
            on_step=steps.append,
            project_base=ProjectBase(repo, base) if base else None,
        )
        handle = start_run(adapter_for(reviewer.runtime), request)
        while not handle.wait(heartbeat_s):
            if store.heartbeat(task.id, ticket).declined:
                handle.cancel()
        result = handle.result()
    finally:
        if key is not None:
            mcp_credentials.revoke_run_credential(key)
        try:
            checkouts.remove_review_worktree(repo, head)
        except Exception:
            log.exception("could not remove the review checkout of %s", task.id)
    findings = parse_findings(result, reviewer.runtime)
    row = _record(task, reviewer, started, head, result)
    _count_for_breaker(reviewer, result)
    if steps:
        steps_store.record_steps(row.id, [step.as_body() for step in steps], finished=True)
    return CriticReport(findings=findings, reviewer=reviewer_body(reviewer))


def _count_for_breaker(reviewer: Agent, result: RunResult) -> None:
    """A review is a run of the reviewer: its failures count toward the reviewer's
    breaker as a build's do, so a broken reviewer is paused (and then reviews
    nothing, the verdict says so) instead of failing on every risky change."""
    failed = str(result.outcome) != "succeeded"
    error_class = breakers.classify(result) if failed else None
    breakers.after_run(
        reviewer.id, failed=failed and breakers.counts(error_class), detail=result.error or ""
    )


def _record(
    task: Task, reviewer: Agent, started: Any, head: str, result: RunResult
) -> ExecutionProcess:
    """The review run, recorded as an execution of the reviewer on the task, priced
    as any run is (:func:`executor.pricing.usage_of`: reported, else estimated)."""
    usage = pricing.usage_of(result.usage)
    return store.record_review_run(
        task.id,
        agent_id=reviewer.id,
        runtime=reviewer.runtime,
        started_at=started,
        outcome=str(result.outcome),
        tokens_in=usage.tokens_in,
        tokens_out=usage.tokens_out,
        cost_millicents=usage.millicents,
        cost_status=usage.cost_status,
        git_before=head,
        exit_code=result.exit_code,
        error=result.error or None,
        log=result.log_tail,
        pid=os.getpid(),
    )


def reviewer_body(reviewer: Agent) -> dict[str, Any]:
    """The verdict's ``reviewer``: who reviewed, on which runtime and model."""
    model = (reviewer.settings or {}).get("model")
    return {
        "agent": reviewer.id,
        "runtime": reviewer.runtime,
        "model": model if isinstance(model, str) else None,
    }
