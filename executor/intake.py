"""The server's intake of the agent side's handed-in work: fetch, judge, review.

A remote worker submits a file-mutating task with its pushed branch
(:func:`worktrees.intake.submit`, ``POST /api/board/tasks/{id}/submit``); an agent
working in the task's checkout on the server submits that checkout (no branch: the
fetch and merge below are skipped, the judge runs on the checkout as it is). The
commit enqueues :func:`take_in` as a django-q2 task, so the git and judge work is
off the request path. :func:`take_in` then does what the local executor does
after a run (:func:`executor.settle.land`), on the server, under the
claim the worker submitted with:

fetch the branch into the registered repository → the task's checkout
(provisioned like a local run's: workspace row, branch, base) with the pushed
commit merged in → the judge (verify gate, critic, fix loop;
``CLAWBOO_VERIFY_REQUIRED`` as for any run) → ``in_review`` (or ``done`` for an
empty change) through :func:`worktrees.service.complete`, or the fix/debt path the
judge recorded. Work that no longer merges onto its base (a landing moved it on
since the worker's clone) goes back to its builder under the same claim, a rebase
round (:func:`executor.settle.send_back_to_rebase`: the conflicting paths and
``git merge origin/<base>`` in its feedback; blocked once
``CLAWBOO_MAX_REBASE_ROUNDS`` are spent), never counted by the breaker. A fetch
or merge that fails otherwise fails the task (back to ``todo``).

Crash-safe: every step is idempotent and the intake stays ``pending`` on the task
until it ends -- a landing for review ends it in the landing's own transaction
(:func:`board.store.workspaces.settle_from_worktree`), so an intake killed after it
is not run again -- and an intake killed half-way before it is run again — by the boot pass and
the periodic ``clawboo.intake-recover`` job (:func:`recover_intakes`), or by
anyone calling :func:`take_in` -- at most ``MAX_INTAKE_STARTS`` times a submission;
then it is ``failed`` and the task blocked for a person. Two intakes of one task never interleave:
a per-task lock across this host's processes (waited for), and one across hosts
that share the database (:func:`core.storage.lock_across_hosts`: another host's
running intake is left to it).
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from django.conf import settings

from board import store
from board.models import ExecutionProcess, Task, Verdict, Workspace
from board.repository import run_repository
from core import registry, server_commands, storage
from core.errors import ClawbooError
from executor import breakers, settle
from executor.runner import heartbeat_seconds
from executor.runtimes.base import Outcome, RunResult
from executor.settle import write_run_handoff
from worktrees import checkouts, intake, landing
from worktrees import service as worktree_service
from worktrees.locks import path_lock

log = logging.getLogger(__name__)

# Starts of one submission's intake before it is given up: one that dies half-way
# is run again (the recovery pass), but one that dies every time is a fault a
# person must see, not an outage -- each run renews the claim's lease, so nothing
# else would ever end it (and each re-runs the verify command and the critic).
MAX_INTAKE_STARTS = 3


def _judged_already(task: Task, submitted_at: str) -> str | None:
    """What the judge decided for this submission if it ran before a crash:
    ``fix`` (sent back, still in progress), ``review`` (a verdict, not yet settled),
    or None (not judged yet)."""
    try:
        submitted = dt.datetime.fromisoformat(submitted_at)
    except ValueError:
        return None
    if task.verdict_at is None or task.verdict_at < submitted:
        return None
    detail = task.verification_detail if isinstance(task.verification_detail, dict) else {}
    if task.verdict == Verdict.FAIL and int(detail.get("fix_cycles") or 0) > 0:
        return "fix"
    return "review"


def take_in(task_id: str) -> dict[str, Any]:
    """Take in the task's submitted work (see the module docstring). Returns
    ``{"result": "nothing"|"running"|"review"|"fix"|"rebase"|"blocked"|"debt"|"failed"|
    "lost", ...}``; a task with no pending intake is ``nothing`` (already taken in: a
    repeat is harmless), one whose intake another host is running ``running`` (left to
    it; run again by a recovery pass should that host die)."""
    task = store.find_task(task_id)
    if task is None or not store.intake_pending(task):
        return {"result": "nothing"}
    if intake.from_checkout(task):
        ws = store.live_workspace(task.id)
        repo_path = ws.repo_path if ws is not None else None
        missing = "its checkout on the server is gone"
    else:
        registered = run_repository(task, register=False).takes_in
        repo_path = registered.path if registered is not None else None
        missing = "its repository is no longer registered with a remote"
    if repo_path is None:
        return _failed(task, missing)
    # This host's processes wait for each other; another host's intake of the task
    # (its boot or recovery pass, sharing the database) is left to run.
    with (
        path_lock(f"{repo_path}#intake/{task.id}"),
        storage.lock_across_hosts(f"intake/{task.id}") as held,
    ):
        if not held:
            return {"result": "running"}
        task = store.get_task(task_id)
        if not store.intake_pending(task):
            return {"result": "nothing"}
        starts = store.start_intake(task.id)
        if starts > MAX_INTAKE_STARTS:
            # Blocked, not retried: running it again would only die again.
            return _failed(
                store.get_task(task.id),
                f"it died {MAX_INTAKE_STARTS} times before it ended (the server's log "
                "says why); a person decides",
                retry=False,
            )
        return _take_in(store.get_task(task.id), repo_path)


def _take_in(task: Task, repo_path: str) -> dict[str, Any]:
    record = store.intake_of(task) or {}
    ticket = store.Ticket.for_task(task).encode()
    span = int(settings.CLAWBOO_INTAKE_LEASE_MS)
    if store.renew_lease(task.id, ticket, lease_ms=span).declined:
        store.set_intake_state(task.id, "lost")
        return {"result": "lost"}
    output = task.output if isinstance(task.output, dict) else {}
    try:
        ws = _bring_in(task, repo_path, str(output.get("commit") or ""))
        worktree = Path(ws.worktree_path)
    except intake.WorkDoesNotMerge as exc:
        log.info("intake of task %s: does not merge (%s)", task.id, ", ".join(exc.conflicts))
        return _rebase(task, store.get_workspace(task.id), exc.conflicts, ticket, record)
    except ClawbooError as exc:
        log.warning("intake of task %s failed: %s", task.id, exc.detail)
        return _failed(task, exc.detail, ticket)
    task = store.get_task(task.id)
    agent = registry.get_agent(task.assignee_agent_id or "")
    refusal = server_commands.agent_run_refusal(agent)
    if refusal is not None:
        # The judge runs the agent's settings (its verify_cmd) here on the server: as
        # the local executor, never for an agent no operator approved. Blocked, not
        # retried: only an operator's approval changes the answer.
        return _failed(task, refusal, ticket, retry=False)
    try:
        already = _judged_already(task, str(record.get("submitted_at") or ""))
        if already is None:
            # The run's handoff, as the local executor writes it after a run: the
            # next attempt, on any host and runtime, resumes from it.
            write_run_handoff(worktree, agent, _submitted_run(task, output))
        judged = None if already is None else settle.Landing(already, task.verdict)
        landing = settle.land(task, agent, ticket, worktree, repo_path, heartbeat_seconds(), judged)
        action = landing.action
        if landing.landed is not None:
            # Counted as a local run is once landed: a file-mutating run that changed
            # nothing counts like a failure.
            unchanged = task.file_mutating and landing.landed["result"] == "cleaned"
            breakers.after_run(
                agent.id,
                failed=unchanged,
                detail="the run changed no file",
                execution_id=_submitted_execution(task),
            )
            store.set_intake_state(task.id, "review")
            result = landing.landed["result"]
            return {"result": "review", "worktree": result, "verdict": landing.verdict}
        if landing.fenced:
            store.set_intake_state(task.id, "lost")
            return {"result": "lost"}
    except ClawbooError as exc:
        # A refusal that running again would only repeat (a database outage is not
        # one: it propagates, and the intake stays pending for the recovery pass).
        log.warning("intake of task %s failed: %s", task.id, exc.detail)
        return _failed(task, exc.detail, ticket)
    if action == "fix":
        # Back to its builder: the claim's own span again, not the intake's.
        store.renew_lease(task.id, ticket, lease_ms=record.get("lease_ms"))
    store.set_intake_state(task.id, action)
    return {"result": action, "verdict": landing.verdict}


def _bring_in(task: Task, repo_path: str, commit: str) -> Workspace:
    """The task's checkout with the submitted work in it: a pushed ``commit`` fetched
    from the registered repository's remote and merged into the checkout (provisioned
    as for a local run), or the checkout itself for work made there."""
    if intake.from_checkout(task):
        return worktree_service.checkout_for_run(task.id, repo_path)[0]
    registered = run_repository(task, register=False).takes_in
    if registered is None:
        raise ClawbooError("its repository is no longer registered with a remote")
    intake.fetch_submitted(registered, task.id, commit)
    ws, _head = worktree_service.checkout_for_run(task.id, repo_path)
    intake.adopt(task.id, Path(ws.worktree_path), commit)
    intake.drop_intake_ref(Path(repo_path), task.id)
    return ws


def _rebase(
    task: Task, ws: Workspace, conflicts: list[str], ticket: str, record: dict[str, Any]
) -> dict[str, Any]:
    """The work does not merge onto its base (a landing moved it on): a rebase round
    for its builder (:func:`executor.settle.send_back_to_rebase`), not a failed run.
    The checkout goes first -- it holds nothing the pushed branch does not -- so the
    next submission is taken into one provisioned from the base as it is then, not
    onto this one's scaffold (a crash before the send-back runs the intake again)."""
    repo = Path(ws.repo_path)
    branch = ws.base_branch or landing.base_branch_of(repo)
    tip = checkouts.branch_tip(repo, branch) or ws.base_sha
    worktree_service.discard(task.id)
    intake.drop_intake_ref(repo, task.id)
    # A remote worker's clone has the base the server pushed back as origin/<base>.
    fix = settle.conflict_fix(
        branch,
        tip,
        conflicts,
        merge_ref=f"origin/{branch}",
        then="finish again; the server takes it in again",
    )
    action = settle.send_back_to_rebase(
        task, ticket, fix, conflicts, repo=repo, lease_ms=record.get("lease_ms")
    )
    if action == "lost":
        store.set_intake_state(task.id, "lost")
    return {"result": action, "conflicts": conflicts}


def _submitted_execution(task: Task) -> int | None:
    """The execution of the remote run this submission ends (its builder's last run of
    this attempt), or None when the worker opened none. The intake counts the agent's
    breaker through it (:func:`executor.breakers.after_run`), once per run as a local
    run is: an intake killed after its count and run again counts nothing more."""
    return (
        ExecutionProcess.objects.filter(
            task_id=task.id, attempt=task.attempts, agent_id=task.assignee_agent_id
        )
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def _submitted_run(task: Task, output: dict[str, Any]) -> RunResult:
    """The remote run that ended in this submission, as far as the handoff needs it:
    its summary (the submission's output) and its native session (its execution)."""
    session = (
        ExecutionProcess.objects.filter(task_id=task.id, attempt=task.attempts)
        .exclude(native_session_id=None)
        .order_by("-id")
        .values_list("native_session_id", flat=True)
        .first()
    )
    return RunResult(
        outcome=Outcome.SUCCEEDED,
        summary=str(output.get("summary") or ""),
        native_session_id=session or None,
    )


def _failed(
    task: Task, why: str, ticket: str | None = None, *, retry: bool = True
) -> dict[str, Any]:
    message = f"intake of the handed-in work failed: {why}"
    failed = store.fail(
        task.id,
        message,
        ticket=ticket or store.Ticket.for_task(task).encode(),
        if_allowed=True,
        retry=retry,
    )
    store.set_intake_state(task.id, "failed", why)
    if retry and task.assignee_agent_id and not failed.declined:
        # The agent's attempt failed (its work does not merge, say): counted by its
        # breaker after the fail, as a failed run is, so the same refusal on every
        # attempt pauses the agent instead of looping.
        breakers.after_run(
            task.assignee_agent_id,
            failed=True,
            detail=message,
            execution_id=_submitted_execution(task),
        )
    return {"result": "failed", "error": message}


def recover_intakes(older_than_s: float | None = None) -> list[dict[str, Any]]:
    """Run again every intake pending for ``older_than_s`` (default
    ``CLAWBOO_INTAKE_RECOVER_S``): one killed half-way, or enqueued while no
    qcluster ran. One that is running meanwhile is waited for, then is nothing (on
    another host: ``running``, left to it)."""
    wait = float(settings.CLAWBOO_INTAKE_RECOVER_S) if older_than_s is None else older_than_s
    done = []
    for task_id in store.pending_intakes(wait):
        try:
            done.append({"task_id": task_id, **take_in(task_id)})
        except Exception:  # one broken task must not stop the others
            log.exception("could not take in task %s", task_id)
    return done
