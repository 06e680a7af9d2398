"""The merge queue's job: many approvals, one gate run, a base that stays green.

A repository whose ``landing_mode`` is ``queue`` lands approved work here, not one
approval at a time. :func:`drain` (a django-q2 job, kicked by each approval and
run every minute by ``ops.periodic``) takes up to ``CLAWBOO_MERGE_BATCH`` queued
tasks in approval order and:

1. **stacks** each task's change on the one before it (plumbing only: each
   stacked commit's parent is the previous one, so any prefix lands by
   fast-forward). A textual conflict against the base itself sends that task
   back to its builder to bring its branch up to date (the conflicting paths in
   its feedback); one against work stacked ahead of it waits for the next batch,
   where that work is the base;
2. **gates** the stacked tip once: the gate each stacked task's judge runs (its
   own verify command, else its builder's default, else its repository's:
   :func:`executor.judge.verify_command`), in a scratch checkout;
3. green: the base **fast-forwards** to the tip (each task ``done``, the base
   pushed where there is a remote). Red: **bisect** over the stacked prefixes to
   the first that fails; the prefix before it lands, the culprit goes back to its
   builder with the gate's ``{what, why, how_to_fix}``, and the tasks after it
   wait for the next batch.

A base that moved under the batch (a person's commit, another host) abandons it;
its line is stacked on the new base and gated once more in the same drain, no
more. A base that stayed put yet could not be moved (its checkout has local
changes in the way) ends the drain: the next one tries again.

A task sent back waits in review once its fix round brings it there again, and
re-enters the line on a person's approval of the work the round handed back (an
approval is of the work it saw, GOVERNANCE §6); after ``CLAWBOO_MAX_FIX_CYCLES`` fix rounds
for a red gate (or ``CLAWBOO_MAX_REBASE_ROUNDS`` rebase rounds for conflicts) it is blocked
for a person instead.

Crash safety. Everything runs under the repository's landing lock. The batch
record is written before any gate runs, and what the gate decided (the target
commit, the tasks that land with it, the culprits) before the base moves; the
base moves by compare-and-swap from the tip the batch started on, so it is at the
old tip or the new one, never between. Each task's ``done`` and its entry's
``landed`` are one transaction. A job killed at any instant leaves an open batch
that the next drain settles first (:func:`recover`): one killed while gating is
abandoned (its tasks are still in line), one killed while advancing is finished.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from board import store
from board.errors import ClaimRequired
from board.models import WorkspaceStatus
from board.transitions import Status
from core import storage
from core.models import Agent
from executor import judge, settle, verification
from worktrees import checkouts, handoff, intake, landing
from worktrees import queue as mq
from worktrees import service as worktree_service
from worktrees.git import GitError, git_out, run_git
from worktrees.locks import path_lock
from worktrees.models import BatchState, EntryState, MergeBatch, QueuedLanding

log = logging.getLogger(__name__)

# A drain ends after this many batches even if approvals keep arriving (the next
# kick or the periodic run carries on), so one worker is never held forever.
MAX_BATCHES_PER_DRAIN = 50
# Batches that died while gating with one approval in them before it is blocked for
# a person: the recovery abandons such a batch and the next drain stacks the same
# approvals again, so a gate that dies every time (it takes its worker down, a bug)
# would otherwise be re-run every minute for ever.
MAX_GATE_DEATHS = 3


@dataclass
class DrainReport:
    batches: int = 0
    landed: list[str] = field(default_factory=list)
    returned: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    gate_runs: int = 0
    recovered: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def drain(repo_path: str) -> dict[str, Any]:
    """Land what the repository's queue holds, batch by batch (see the module
    docstring). Safe to run anywhere at any time: a second drain of the same
    repository waits for the landing lock on this host, and finds another host's
    open batch and leaves it be."""
    repo = Path(repo_path)
    report = DrainReport()
    with landing.land_lock(repo):
        report.recovered = _recover(repo, report)
        mq.settle_returned(repo_path)
        rebased = False
        for _ in range(MAX_BATCHES_PER_DRAIN):
            entries = mq.waiting(repo_path, mq.batch_size())
            if not entries:
                break
            ran = _run_batch(repo, entries, report)
            if ran == FOREIGN:
                break
            report.batches += 1
            if ran == STUCK or (ran == REBASE and rebased):
                # The base could not be moved to what the gate passed, and the next
                # batch here would stack the same line on the same base (or on one
                # that moves again under every gate): gating it again now would only
                # repeat that, up to the batch limit. The next drain tries again.
                break
            rebased = rebased or ran == REBASE
    return report.as_dict()


def drain_all() -> int:
    """The periodic job: drain every repository with work waiting or a batch left
    open. Returns how many tasks landed."""
    landed = 0
    for repo_path in mq.repos_waiting():
        try:
            landed += len(drain(repo_path)["landed"])
        except Exception:  # one broken repository must not stop the others
            log.exception("the merge queue of %s could not drain", repo_path)
    return landed


def recover(repo_path: str) -> int:
    """Settle the batches a killed job left open in ``repo_path`` (under its
    landing lock). Returns how many."""
    repo = Path(repo_path)
    with landing.land_lock(repo):
        return _recover(repo, DrainReport())


# --- one batch ---------------------------------------------------------------------

# How a batch ended, as the drain reads it.
MOVED = "moved"  # it ran: landed, sent back or withdrawn -- the line moved
FOREIGN = "foreign"  # nothing ran: another host's batch is open
REBASE = "rebase"  # abandoned: the base moved under it; its line is stacked on the new base
STUCK = "stuck"  # abandoned: the base stayed where it was yet could not be moved


def _gate_of(repo: Path, task_id: str) -> verification.Gate | None:
    """The gate that judged the task's work, run again on the stacked tip: its judge's
    command (:func:`executor.judge.verify_command`: the task's own, else its builder's
    default, else its repository's), as its judge runs it (the task's own with its
    install command, :func:`executor.verification.task_gate`)."""
    task = store.find_task(task_id)
    if task is None:
        return None
    builder = Agent.objects.filter(pk=task.assignee_agent_id).first()
    command = judge.verify_command(task, builder, str(repo))
    return verification.task_gate(task, command)


def _tip(repo: Path, branch: str) -> str:
    return git_out(["rev-parse", "--verify", f"refs/heads/{branch}^{{commit}}"], cwd=repo)


def _run_batch(repo: Path, entries: list[QueuedLanding], report: DrainReport) -> str:
    """Stack, gate, land: :data:`MOVED`, or why not (:data:`FOREIGN`,
    :data:`REBASE`, :data:`STUCK`)."""
    branch = entries[0].base_branch
    base = _tip(repo, branch)
    stack: list[dict[str, Any]] = []
    tip = base
    for entry in [e for e in entries if e.base_branch == branch]:
        stacked = _stack_one(repo, entry, branch, base, tip, report)
        if stacked is not None:
            stack.append(stacked)
            tip = stacked["commit"] or tip
    if not stack:
        return MOVED  # every entry was sent back or withdrawn: the line moved
    batch = mq.open_batch(str(repo), branch, base, stack)
    if batch is None:
        return FOREIGN
    prefix_tips = []
    running = base
    for item in stack:
        running = item["commit"] or running
        prefix_tips.append(running)
    # A prefix is green when the gate of each task in it passes on its tip (each
    # distinct gate once): what lands keeps every landed task's own gate green.
    gates = [_gate_of(repo, item["task_id"]) for item in stack]
    results: dict[tuple[str, tuple[verification.Gate, ...]], verification.GateVerdict] = {}

    def gated(prefix: int) -> verification.GateVerdict | None:
        """The verdict on the stack's first ``prefix + 1`` changes; None: nothing to run."""
        commit = prefix_tips[prefix]
        wanted = tuple(dict.fromkeys(g for g in gates[: prefix + 1] if g is not None))
        if commit == base or not wanted:
            return None
        if (commit, wanted) not in results:
            results[commit, wanted] = _gate(repo, batch.pk, commit, wanted)
            report.gate_runs += 1
        return results[commit, wanted]

    def green(prefix: int) -> bool:
        verdict = gated(prefix)
        return verdict is None or verdict.passed

    culprit = _first_red(len(stack), green)
    target = prefix_tips[culprit - 1] if culprit > 0 else base
    culprits = []
    if culprit < len(stack):
        item = stack[culprit]
        gate = gated(culprit)
        assert gate is not None  # it failed
        fix = _fix_for_culprit(gate.gate, branch, [s["task_id"] for s in stack[:culprit]])
        culprits.append({**item, "fix": fix.__dict__})
    decided = mq.decide(batch.pk, target, stack[:culprit], culprits)
    if decided is None:
        return MOVED  # a task left review while it gated: the rest go in the next batch
    return _advance_and_finish(repo, decided, report)


def _first_red(size: int, green: Callable[[int], bool]) -> int:
    """The first stacked prefix that fails (``size``: all green), bisected: a failure
    is taken to stay one as more work stacks on it, so everything before it is green."""
    if green(size - 1):
        return size
    low, high = 0, size - 1
    while low < high:
        middle = (low + high) // 2
        if green(middle):
            low = middle + 1
        else:
            high = middle
    return low


def _stack_one(
    repo: Path,
    entry: QueuedLanding,
    branch: str,
    base: str,
    onto: str,
    report: DrainReport,
) -> dict[str, Any] | None:
    """The entry's change as a commit on ``onto``; None when it is not stacked
    (withdrawn, sent back on a conflict with the base, or waiting on a conflict
    with work ahead of it)."""
    task = store.find_task(entry.task_id)
    ws = store.live_workspace(entry.task_id)
    if task is None or task.status != Status.IN_REVIEW or ws is None:
        mq.withdraw(entry.pk, f"left review ({task.status if task else 'deleted'})")
        return None
    if mq.is_stale(entry, task.attempts):
        mq.withdraw(entry.pk, mq.STALE_REASON)
        return None
    died = mq.batches_died_with(entry)
    if died >= MAX_GATE_DEATHS:
        _park(
            entry,
            report,
            f"the merge queue's batch died {died} times while gating with this change in "
            "it (the server's log says why)",
        )
        return None
    if not Path(ws.worktree_path).is_dir() or ws.status != WorkspaceStatus.ACTIVE:
        # Reaped while it waited in line, or made by another host whose state dir
        # is not visible here: made again here from its branch.
        ws = worktree_service.resume(task.id, take_over=True)
    with path_lock(ws.worktree_path):
        outcome = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=task.id,
            title=task.title,
            base_branch=branch,
            # Its own team's row for this checkout says how it lands (each entry's:
            # two teams may register one checkout with different strategies).
            strategy=worktree_service.landing_policy(task, repo).strategy,
            onto=onto,
        )
    if outcome.result == "conflict":
        if onto != base:
            return None  # against work ahead of it: the next batch stacks it on that
        fix = settle.conflict_fix(
            branch,
            base,
            outcome.conflicts,
            then="finish again; once a person approves it again it re-enters the merge queue",
        )
        _send_back(repo, entry, fix, report, conflicts=outcome.conflicts)
        return None
    return {"entry": entry.pk, "task_id": task.id, "commit": outcome.commit}


def _fix_for_culprit(gate: dict[str, Any], branch: str, ahead: list[str]) -> judge.FixRequest:
    """The gate's own fix request, said of the stacked change it failed on."""
    fix = judge.fix_for_gate(gate)
    with_whom = f" stacked on {', '.join(ahead)}" if ahead else ""
    return judge.FixRequest(
        what=f"merge queue: {fix.what} with this change{with_whom}",
        why=fix.why,
        how_to_fix=(
            f"bring the branch up to date (git merge {branch}: the work ahead of yours "
            f"lands there), then {fix.how_to_fix} Once a person approves it again it "
            "re-enters the merge queue."
        ),
    )


# --- the gate ------------------------------------------------------------------------


def scratch_path(repo: Path) -> Path:
    digest = hashlib.sha256(str(repo).encode()).hexdigest()[:16]
    return Path(settings.CLAWBOO_STATE_DIR) / "merge-queue" / digest


def _scratch_at(repo: Path, commit: str) -> Path:
    """A fresh detached checkout of ``commit`` (what a killed gate left is thrown away)."""
    path = scratch_path(repo)
    # Its own registration only (also one whose directory is gone), never a
    # ``worktree prune``: hosts sharing the repository share its registry, and a
    # prune takes every checkout this host cannot see, other hosts' live ones too.
    _drop_scratch(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(["worktree", "add", "--detach", "--force", "--quiet", str(path), commit], cwd=repo)
    return path


def _drop_scratch(repo: Path) -> None:
    path = scratch_path(repo)
    run_git(["worktree", "remove", "--force", "--force", str(path)], cwd=repo, check=False)
    shutil.rmtree(path, ignore_errors=True)


def _gate(
    repo: Path, batch_id: int, commit: str, gates: tuple[verification.Gate, ...]
) -> verification.GateVerdict:
    """Run ``gates`` one after another in a scratch checkout of ``commit``, up to the
    first that fails: its verdict, else the last one's (one gate run of the batch)."""
    mq.gate_started(batch_id, commit)
    try:
        scratch = _scratch_at(repo, commit)
        for each in gates:
            gate = verification.run_gate(scratch, each)
            if not gate.passed:
                break
    finally:
        _drop_scratch(repo)
    mq.gate_finished(batch_id, {"commit": commit, "passed": gate.passed, **gate.gate})
    return gate


# --- landing a decided batch ------------------------------------------------------------


def _advance_and_finish(repo: Path, batch: MergeBatch, report: DrainReport) -> str:
    """Move the base to the batch's target (compare-and-swap from the tip it started
    on), then record each landed task and send each culprit back: :data:`MOVED`.
    Safe to repeat: an entry already settled is passed over. When the base could not
    be moved the batch is abandoned: :data:`REBASE` when the base had moved from the
    tip the batch started on, else :data:`STUCK` (its checkout could not be
    fast-forwarded: local changes in the way, say)."""
    branch = batch.base_branch
    moves = bool(batch.target) and batch.target != batch.base_before
    if moves and not landing.base_has(repo, branch, batch.target):
        outcome = landing.Landing(
            "landed", branch, "", commit=batch.target, previous_tip=batch.base_before
        )
        try:
            landing.advance(repo, outcome)
        except landing.LandingFailed as exc:
            # Nothing landed; its tasks are still in line for the next batch.
            mq.close_batch(batch.pk, BatchState.ABANDONED, exc.detail)
            return REBASE if _tip(repo, branch) != batch.base_before else STUCK
    if moves:
        # The remote before the board: a landed task's dependents are ready once it
        # is done, and a remote worker taking one clones the remote.
        intake.push_base(repo, branch)
    for item in batch.landing:
        _land_entry(repo, batch, item, report)
    for item in batch.culprits:
        entry = QueuedLanding.objects.filter(pk=item["entry"]).first()
        if entry is not None and entry.state == EntryState.QUEUED:
            _send_back(repo, entry, judge.FixRequest(**item["fix"]), report)
    mq.close_batch(batch.pk, BatchState.LANDED)
    return MOVED


def _land_entry(repo: Path, batch: MergeBatch, item: dict[str, Any], report: DrainReport) -> None:
    entry = QueuedLanding.objects.filter(pk=item["entry"]).first()
    if entry is None or entry.state != EntryState.QUEUED:
        return  # landed already (a repeated finish), or no longer in line
    task_id, commit = entry.task_id, item.get("commit")
    record = {
        "result": "landed" if commit else "nothing",
        "base_branch": batch.base_branch,
        "commit": commit,
        "previous_tip": batch.base_before,
        "queue_batch": batch.pk,
        "by": entry.by,
    }
    if store.live_workspace(task_id) is not None:
        checkouts.remove_worktree_and_branch(repo, task_id)
    landed = f"commit {commit} on {batch.base_branch} (merge queue)" if commit else None

    def run() -> None:
        store.finish_landing(
            task_id, record, by=entry.by, human_override=entry.human_override, landed=landed
        )
        mq.mark_landed(entry.pk, commit, batch.pk)

    storage.write(run)
    report.landed.append(task_id)


def _send_back(
    repo: Path,
    entry: QueuedLanding,
    fix: judge.FixRequest,
    report: DrainReport,
    conflicts: list[str] | None = None,
) -> None:
    """A fix round for the entry's builder (the task back in progress, claimed for
    its agent, the fix in its feedback and handoff), or blocked for a person once
    its rounds are spent or it has no builder. One transaction with the entry."""
    task = store.find_task(entry.task_id)
    if task is None or task.status != Status.IN_REVIEW:
        mq.withdraw(entry.pk, "left review")
        return
    if conflicts is not None:
        store.record_landing(
            task.id,
            {"result": "conflict", "base_branch": entry.base_branch, "conflicts": conflicts},
        )
    note = fix.as_text()
    rebase = conflicts is not None
    if rebase:
        parked = settle.conflict_parked(repo, entry.rebases)
    else:
        parked = "its rounds are spent" if entry.rounds >= judge.max_fix_cycles() else None
    if parked is None and not task.assignee_agent_id:
        parked = "its rounds are spent"  # no builder to send it to
    spent = parked is not None

    def run(blocked: bool) -> None:
        if blocked:
            store.block(task.id, f"{note}\n({parked or 'its rounds are spent'}: a person decides)")
        else:
            store.request_changes(task.id, note, by=mq.QUEUE_ACTOR)
        mq.mark_returned(entry.pk, note, rebase=rebase, blocked=blocked)

    try:
        storage.write(run, spent)
    except ClaimRequired:  # its agent is gone from the registry
        storage.write(run, True)
        spent = True
    if spent:
        report.blocked.append(task.id)
    else:
        handoff.note_requested_changes(task.id, note, by=mq.QUEUE_ACTOR)
        report.returned.append(task.id)


def _park(entry: QueuedLanding, report: DrainReport, reason: str) -> None:
    """Out of the line and blocked for a person, with ``reason``: one transaction."""

    def run() -> None:
        store.block(entry.task_id, f"{reason}: a person decides")
        mq.mark_returned(entry.pk, reason, rebase=False, blocked=True)

    storage.write(run)
    report.blocked.append(entry.task_id)


# --- recovery ----------------------------------------------------------------------------


def _recover(repo: Path, report: DrainReport) -> int:
    """Under the landing lock: settle each open batch of ``repo`` whose job is dead.
    Gating: abandoned (the base never moved; its tasks are still in line).
    Advancing: the base at the target → finish it; the base still at the tip the
    batch started on → move it (the gate decided) and finish; elsewhere → abandoned."""
    settled = 0
    for batch in mq.open_batches(str(repo)):
        if not mq.is_dead(batch, held_here=True):
            continue
        cleared = landing.clear_stale_locks(repo, batch.started_at.timestamp())
        if cleared:
            log.warning("cleared lock files a killed merge batch left in %s: %s", repo, cleared)
        _drop_scratch(repo)
        try:
            if batch.state == BatchState.GATING:
                mq.close_batch(batch.pk, BatchState.ABANDONED, mq.KILLED_WHILE_GATING)
            elif batch.target and landing.base_has(repo, batch.base_branch, batch.target):
                _advance_and_finish(repo, batch, report)
            else:
                if batch.target:
                    landing.undo_partial_fast_forward(
                        repo, batch.base_branch, batch.base_before, batch.target
                    )
                _advance_and_finish(repo, batch, report)
        except GitError:
            log.exception("could not settle merge batch %s", batch.pk)
            continue
        settled += 1
    return settled
