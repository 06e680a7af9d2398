"""The judge of a finished file-mutating run: builder is not judge (GOVERNANCE §4).

:func:`judge` runs after the builder's runtime succeeded, in its checkout: the
verify command (the task's, else its agent's default, else its repository's), the
critic on a risky change with a green gate (:mod:`executor.critic`), then one of
three ends, each recorded through the board's data layer:

* ``review``: the verdict is recorded and the work goes on to review as before
  (a pass; a ``fail (none configured)``, which a builder cannot fix; or no verdict
  when ``CLAWBOO_VERIFY_REQUIRED`` is false and nothing is configured);
* ``fix``: a failing gate or a blocking finding sends the task back to its builder
  with ``{what, why, how_to_fix}`` in its context (feedback, so ``TASK.md``, and the
  handoff), at most ``CLAWBOO_MAX_FIX_CYCLES`` times in a row;
* ``debt``: the loop is spent: ``completed_with_debt``, the task ``blocked`` with its
  debt notes (one notification).

Every round is an attempt on the verdict (``attempts``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from django.conf import settings

from board import judgement, store
from board.models import Task, Verdict, Workspace
from core import repositories
from core.errors import ClawbooError
from core.models import Agent
from executor import critic, verification
from worktrees import checkouts, handoff

log = logging.getLogger(__name__)

Action = Literal["review", "fix", "debt", "lost"]
WHY_CHARS = 1_500


@dataclass(frozen=True)
class Judgement:
    """What the judge decided; ``renewed``: its verdict's write renewed the builder's
    lease (the landing's fence is passed); ``fenced``: lost at that fence, the
    work not yet saved on its branch."""

    action: Action
    verdict: str | None
    renewed: bool = False
    fenced: bool = False


@dataclass(frozen=True)
class FixRequest:
    """What the builder is told: what failed, why (the evidence), how to fix it."""

    what: str
    why: str
    how_to_fix: str

    def as_text(self) -> str:
        return f"{self.what}\nWhy: {self.why}\nHow to fix: {self.how_to_fix}"


def verify_required() -> bool:
    return bool(settings.CLAWBOO_VERIFY_REQUIRED)


def max_fix_cycles() -> int:
    return int(settings.CLAWBOO_MAX_FIX_CYCLES)


def repository_verify_command(task: Task, repo_path: str | None) -> str:
    """The default verify command of the registered repository the run worked in
    (``repo_path``: the run's repository, :func:`board.repository.run_repository`)."""
    if not repo_path:
        return ""
    repo = repositories.for_real_path(task.team_id, Path(repo_path).resolve())
    return repo.verify_cmd if repo is not None and repo.verify_cmd else ""


def verify_command(task: Task, agent: Agent | None, repo_path: str | None) -> str:
    """The command that judges this task: its own, else its agent's default (agent
    settings ``verify_cmd``, an operator's decision like the rest of the settings),
    else its repository's. The judge's, a remote submission's intake and the merge
    queue's gate all ask here (``agent``: the builder, None when it is gone)."""
    own = verification.verify_command(task)
    if own:
        return own
    default = ((agent.settings if agent is not None else None) or {}).get("verify_cmd")
    if isinstance(default, str) and default.strip():
        return default
    return repository_verify_command(task, repo_path)


def fix_for_gate(gate: dict[str, Any]) -> FixRequest:
    command = gate.get("command") or "the verify command"
    if gate.get("timed_out"):
        what = f"verification gate timed out: `{command}` did not finish"
    else:
        what = f"verification gate failed: `{command}` exited {gate.get('exit_code')}"
    tail = (gate.get("output_tail") or "").strip()[-WHY_CHARS:] or "(no output)"
    return FixRequest(
        what=what,
        why=f"its output ends with:\n{tail}",
        how_to_fix=f"make `{command}` pass in this checkout (./init.sh runs it), then stop.",
    )


def _where(finding: dict[str, Any]) -> str:
    path = finding.get("file")
    if not path:
        return ""
    line = finding.get("line")
    return f"{path}:{line}" if line else str(path)


def _fix_for_findings(findings: list[dict[str, Any]]) -> FixRequest:
    blocking = [f for f in findings if judgement.is_blocking(f)]
    lines = []
    for f in blocking:
        where = _where(f)
        lines.append(
            f"- [{f['severity']}] {where + ': ' if where else ''}{f['title']}"
            + (f" -- {f['body']}" if f.get("body") else "")
        )
    return FixRequest(
        what=f"the reviewer found {len(blocking)} blocking issue(s)",
        why="\n" + "\n".join(lines),
        how_to_fix="fix each finding at its file:line, keep the verify command green, then stop.",
    )


def _attempts(task: Task) -> tuple[list[dict[str, Any]], int]:
    detail = task.verification_detail if isinstance(task.verification_detail, dict) else {}
    return list(detail.get("attempts") or []), int(detail.get("fix_cycles") or 0)


def write_fix_context(worktree: Path, agent: Agent, fix: FixRequest) -> None:
    """Put the fix request into the checkout's handoff, so a runtime that clocks in
    from it (any runtime) reads what to fix; TASK.md carries it as the task's
    feedback at the next run."""
    handoff.note_for_next_run(
        worktree,
        who=agent.display_name,
        runtime=agent.runtime,
        broken=[f"{fix.what}. Why: {fix.why}"],
        next_step=fix.how_to_fix,
    )


def judge(
    task: Task,
    agent: Agent,
    ticket: str,
    worktree: Path,
    *,
    repo_path: str | None,
    heartbeat_s: float,
) -> Judgement:
    """Judge the builder's finished run in ``worktree`` and record the outcome (see
    the module docstring). The caller then lands the work (``review``) or closes the
    run and leaves the task as recorded (``fix``, ``debt``, ``lost``)."""
    command = verify_command(task, agent, repo_path)
    attempts, cycles = _attempts(task)
    at = store.now().isoformat()
    if not command:
        if not verify_required():
            return Judgement("review", None)
        attempts.append({"gate": None, "findings": [], "at": at})
        # Not a round of the fix loop: the builder cannot add a verify command.
        return _to_review(
            task,
            ticket,
            Verdict.FAIL,
            judgement.NONE_CONFIGURED,
            judgement.detail(None, [], None, attempts),
        )
    gate = verification.verify(worktree, task, command)
    assert gate is not None  # a command was given
    # The work's diff is what a critic judges and what a failing gate sends back; a
    # pass with no reviewer named needs none (the landing takes its own).
    ws, diff = None, None
    if not gate.passed or critic.reviewer_named(task):
        ws = store.live_workspace(task.id)
        diff = checkouts.work_diff(worktree, ws.base_commit).as_dict() if ws is not None else None
    findings: list[dict[str, Any]] = []
    reviewer: dict[str, Any] | None = None
    if gate.passed and ws is not None and diff is not None:
        report = _critic(task, ticket, worktree, ws, diff, heartbeat_s)
        if report is not None:
            findings, reviewer = report.findings, report.reviewer
    blocking = any(judgement.is_blocking(f) for f in findings)
    passed = gate.passed and not blocking
    attempts.append({"gate": gate.gate, "findings": findings, "at": at})
    if passed or not (diff or {}).get("files"):
        # A pass; or a run that changed nothing, which lands done whatever its
        # verdict (no deliverable to fix or to judge).
        verdict = Verdict.PASS if passed else Verdict.FAIL
        detail = {**judgement.detail(gate.gate, findings, reviewer, attempts), "fix_cycles": 0}
        return _to_review(task, ticket, verdict, gate.evidence, detail)
    fix = fix_for_gate(gate.gate) if not gate.passed else _fix_for_findings(findings)
    evidence = gate.evidence if not gate.passed else fix.why
    detail = judgement.detail(gate.gate, findings, reviewer, attempts)
    changed = [f["path"] for f in (diff or {}).get("files") or ()]
    return _send_back(task, agent, ticket, worktree, fix, evidence, detail, cycles, changed)


def _to_review(
    task: Task, ticket: str, verdict: str, evidence: str, detail: dict[str, Any]
) -> Judgement:
    """The verdict of work that goes on to review, recorded under the builder's claim:
    its lease renewed in the same write (the landing's fence), or nothing recorded
    when the claim was lost meanwhile."""
    recorded = store.record_verification(task.id, verdict, evidence, detail, ticket=ticket)
    if recorded is None:
        return Judgement("lost", verdict, fenced=True)
    return Judgement("review", verdict, renewed=True)


def _send_back(
    task: Task,
    agent: Agent,
    ticket: str,
    worktree: Path,
    fix: FixRequest,
    evidence: str,
    detail: dict[str, Any],
    cycles: int,
    changed: list[str] | None = None,
) -> Judgement:
    """A run the judge did not pass: back to its builder to fix, while the loop has
    rounds left; else settled with its debt (blocked, one notification). ``changed``:
    the paths the run changed, the fix round's scope when the task names none."""
    attempts = detail.get("attempts") or []
    if cycles < max_fix_cycles():
        write_fix_context(worktree, agent, fix)
        checkouts.commit_worktree_work(worktree, task.id)
        sent = store.send_back_for_fix(
            task.id,
            ticket,
            evidence=evidence,
            detail={**detail, "fix_cycles": cycles + 1},
            feedback=fix.as_text(),
            changed_paths=changed,
        )
        return Judgement("lost" if sent.declined else "fix", Verdict.FAIL)
    notes = (
        f"completed with debt after {len(attempts)} attempt(s): {fix.what}.\n"
        f"{fix.why}\nWhat is left: {fix.how_to_fix}"
    )
    checkouts.commit_worktree_work(worktree, task.id)
    settled = store.settle_with_debt(
        task.id, ticket, evidence=evidence, detail={**detail, "fix_cycles": 0}, notes=notes
    )
    return Judgement("lost" if settled.declined else "debt", Verdict.COMPLETED_WITH_DEBT)


def _critic(
    task: Task,
    ticket: str,
    worktree: Path,
    ws: Workspace,
    diff: dict[str, Any],
    heartbeat_s: float,
) -> critic.CriticReport | None:
    if not diff.get("files") or not critic.is_risky(task, diff):
        return None
    reviewer = critic.reviewer_of(task)
    if reviewer is None:
        return None
    if reviewer.id == task.assignee_agent_id:
        # Builder is not judge: the team's reviewer built this change, so nobody
        # independent can review it. Said on the verdict for the person who does.
        return critic.CriticReport(findings=[critic.self_review_finding(reviewer)], reviewer=None)
    stopped = critic.stopped_reviewer_finding(reviewer, task)
    if stopped is not None:
        return critic.CriticReport(findings=[stopped], reviewer=None)
    head = checkouts.commit_worktree_work(worktree, task.id)
    try:
        return critic.review(
            task,
            reviewer,
            repo=Path(ws.repo_path),
            base=ws.base_commit,
            head=head,
            ticket=ticket,
            heartbeat_s=heartbeat_s,
        )
    except (ClawbooError, OSError) as exc:
        # A critic that could not run is no verdict on the builder's work: the change
        # goes on, with a finding that says so.
        log.exception("the critic of task %s could not run", task.id)
        detail = exc.detail if isinstance(exc, ClawbooError) else str(exc)
        return critic.CriticReport(
            findings=[{"severity": "other", "title": "the critic could not run", "body": detail}],
            reviewer=critic.reviewer_body(reviewer),
        )
