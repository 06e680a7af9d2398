"""Task-level worktree operations: what the REST views, the executor and the
management commands call.

Each function validates its input, does the git work through
:mod:`worktrees.checkouts` under the checkout's per-path lock, and records the
outcome through the board's data layer (``board.store``) while still holding that
lock, so a second caller that was waiting sees the finished row. Board rows are
never written here directly.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from board import store
from board.errors import NotFileMutating
from board.models import Task, Workspace, WorkspaceStatus
from board.transitions import is_locked
from core import repositories
from core.errors import Conflict, ValidationFailed
from core.models import Repository
from worktrees import checkouts, handoff, intake, landing, pull_requests
from worktrees import queue as merge_queue
from worktrees.checks import check_base_ref, check_base_sha, check_task_id
from worktrees.locks import path_lock
from worktrees.scaffold import TaskBrief, init_sh

log = logging.getLogger(__name__)


def _lands_by_pull_request(task: Any) -> bool:
    """Whether the task's repository lands approved work through its forge's pull
    requests (``landing_mode: pull_request`` with a forge named)."""
    return isinstance(task, Task) and pull_requests.forge_for(task) is not None


def workspace_as_dict(ws: Workspace) -> dict[str, Any]:
    """The workspace body of the API."""
    return {
        "id": ws.pk,
        "task_id": ws.task_id,
        "repo_path": ws.repo_path,
        "worktree_path": ws.worktree_path,
        "branch": ws.branch,
        "base_sha": ws.base_sha,
        "base_commit": ws.base_commit,
        "base_branch": ws.base_branch,
        "diffstat": ws.diffstat,
        "landing": ws.landing,
        "status": ws.status,
        "created_at": ws.created_at.isoformat(),
        "updated_at": ws.updated_at.isoformat(),
    }


def task_brief(task: Task) -> TaskBrief:
    """What a run is told about the task: the scaffold's TASK.md and init.sh slots in
    a local checkout, the prompt of a remote run (:func:`executor.prompts.run_prompt`)."""
    return TaskBrief(
        task_id=task.id,
        title=task.title,
        team=str(task.team_id),
        description=task.description,
        acceptance=task.goal,
        gotchas=task.context,
        install_cmd=_slot(task, "install_cmd"),
        verify_cmd=_slot(task, "verify_cmd"),
        start_cmd=_slot(task, "start_cmd"),
    )


def init_script(task: Task) -> str:
    """The text of ``task``'s ``init.sh`` as the server writes it (its install and
    verify commands: the task's metadata, else its repository's). The gate runs
    this, never the copy in the checkout, which the builder can rewrite."""
    return init_sh(task_brief(task))


def _slot(task: Task, key: str) -> str:
    """A task's ``metadata`` slot, else its repository's default (install, verify)."""
    value = (task.metadata or {}).get(key)
    if isinstance(value, str) and value:
        return value
    repo = _repository(task) if key in ("install_cmd", "verify_cmd", "base_branch") else None
    return getattr(repo, key, "") if repo is not None else ""


def registered_repo(task: Task, repo_path: str) -> Path:
    """The worktree wall: ``repo_path`` resolved (symlinks, ``..``) must be a
    registered repository of the task's team, checked again now (a registered
    directory swapped for a link elsewhere resolves elsewhere and is refused)."""
    repo = checkouts.resolve_repo(repo_path)
    if repositories.for_real_path(task.team_id, repo) is None:
        raise ValidationFailed(
            "repo_path", f"is not a registered repository of team {task.team_id!r}"
        )
    return repo


def _repository(task: Task) -> Repository | None:
    if task.repository_id is None:
        return None
    return Repository.objects.filter(pk=task.repository_id, team_id=task.team_id).first()


def landing_policy(task: Task, repo: Path) -> landing.Policy:
    """How ``task``'s work lands in ``repo``: the repository's git config, where the
    task's own team's registered row for that checkout (its ``landing``) wins. Two
    teams may register one checkout with different strategies: each lands its own
    way. A direct landing and the merge queue both ask here."""
    policy = landing.policy_for(repo)
    registered = repositories.for_real_path(task.team_id, repo)
    if registered is not None and registered.landing:
        return dataclasses.replace(policy, strategy=registered.landing)
    return policy


def _file_mutating_task(task_id: Any) -> Task:
    task = store.get_task(check_task_id(task_id))
    if not task.file_mutating:
        raise NotFileMutating(
            f"task {task.id!r} is not file-mutating: it runs in place, without a worktree",
            task_id=task.id,
        )
    return task


def _record(task_id: str, co: checkouts.Checkout, base_branch: str | None = None) -> Workspace:
    return store.record_workspace(
        task_id,
        repo_path=str(co.repo),
        worktree_path=str(co.path),
        branch=co.branch,
        base_sha=co.base_sha,
        base_commit=co.base_commit,
        base_branch=base_branch,
    )


def _base_branch(repo: Path, task: Task, wanted: str | None, base_ref: str | None) -> str:
    """Where the task's change will land: ``wanted``, else the task's
    ``metadata.base_branch``, else ``base_ref`` when it names a branch, else the
    branch the repository has checked out ("" for a detached repository: such a
    task can be worked and reviewed, and approving it asks for a branch)."""
    named = wanted or _slot(task, "base_branch") or None
    if named is None and base_ref is not None and checkouts.branch_tip(repo, base_ref):
        named = base_ref
    if named is not None:
        return landing.base_branch_of(repo, named)
    head = checkouts.head_ref(repo) or ""
    return head.removeprefix("refs/heads/") if head.startswith("refs/heads/") else ""


def checkout_for_run(task_id: str, repo_path: str) -> tuple[Workspace, str | None]:
    """:func:`provision_task_workspace` for the executor, which also wants the
    checkout's HEAD as its run starts: the scaffold commit of a fresh checkout
    (known without asking git again), None for one that was resumed or kept. The
    caller holds the task's claim, so a checkout another host sharing the
    repository made of it (a claim that lapsed there) is taken over
    (:func:`worktrees.checkouts.take_over_checkouts`)."""
    return _provision(task_id, repo_path, take_over=True)


def provision_task_workspace(
    task_id: str,
    repo_path: str,
    base_ref: str | None = None,
    base_sha: str | None = None,
    base_branch: str | None = None,
) -> Workspace:
    """Give a file-mutating task its checkout of ``repo_path`` and return the ``active`` row.

    Branch point: ``base_sha``, else ``base_ref``, else the tip of the task's base
    branch (the branch its change will land on when approved, see
    :func:`_base_branch`), resolved to a SHA before anything is created — so a task
    whose dependencies landed starts from a base that contains them. Idempotent
    under races: the whole call holds the checkout's lock, so a second concurrent
    caller (thread or process) waits and then finds the healthy checkout and the
    row the first one recorded. A task whose live workspace is stale (paused or
    reaped) is rebuilt from its branch instead, so committed work is never reset.

    Raises NotFileMutating (422), ValidationFailed for a bad id, ref, SHA or repo
    path (400), TaskNotFound, Conflict when the task already has a workspace in
    another repository, ProvisionFailed when git could not produce the checkout.
    """
    return _provision(task_id, repo_path, base_ref, base_sha, base_branch)[0]


def _provision(
    task_id: str,
    repo_path: str,
    base_ref: str | None = None,
    base_sha: str | None = None,
    base_branch: str | None = None,
    *,
    take_over: bool = False,
) -> tuple[Workspace, str | None]:
    task = _file_mutating_task(task_id)
    if base_ref is not None and base_sha is not None:
        raise ValidationFailed("base_ref", "give base_ref or base_sha, not both")
    ref = check_base_ref(base_ref) if base_ref is not None else None
    sha = check_base_sha(base_sha) if base_sha is not None else None
    repo = registered_repo(task, repo_path)
    path = checkouts.worktree_path_for(repo, task.id)
    with path_lock(path):
        ws = store.live_workspace(task.id)
        if ws is not None:
            if Path(ws.repo_path) != repo:
                raise Conflict(
                    f"task {task.id!r} already has a workspace in {ws.repo_path}",
                    task_id=task.id,
                )
            if ws.status == WorkspaceStatus.ACTIVE and checkouts.checkout_healthy(
                repo, path, ws.branch
            ):
                return ws, None
            resumed = checkouts.resume_worktree(repo, task.id, take_over=take_over)
            return _record(task.id, resumed), None
        target = _base_branch(repo, task, base_branch, ref)
        if sha is not None:
            point = checkouts.resolve_commit(repo, sha, "base_sha")
        else:
            spec = ref or (f"refs/heads/{target}" if target else "HEAD")
            point = checkouts.resolve_commit(repo, spec, "base_ref")
        co = checkouts.provision_worktree(repo, task_brief(task), point)
        return _record(task.id, co, target), co.base_commit


def workspace_state(task_id: str) -> dict[str, Any]:
    """The live workspace row plus ``present`` and ``resume_state`` (reconstructed
    from the checkout alone; None when the checkout is not on disk)."""
    ws = store.get_workspace(check_task_id(task_id))
    path = Path(ws.worktree_path)
    present = path.is_dir()
    state = handoff.reconstruct_state(path).as_dict() if present else None
    return {**workspace_as_dict(ws), "present": present, "resume_state": state}


def _live(task_id: str) -> tuple[Workspace, Path]:
    ws = store.get_workspace(check_task_id(task_id))
    return ws, Path(ws.repo_path)


def pause(task_id: str) -> Workspace:
    """Commit uncommitted work (``clawboo: pause task <id>``), drop the checkout,
    keep the branch; the row becomes ``stale`` until :func:`resume`."""
    ws, repo = _live(task_id)
    with path_lock(ws.worktree_path):
        checkouts.pause_worktree(repo, ws.task_id)
        return store.set_workspace_status(ws.task_id, WorkspaceStatus.STALE)


def resume(task_id: str, *, take_over: bool = False) -> Workspace:
    """Re-attach the task's branch at its tip (never ``-b``/``-B``) and recover the
    baseline from the scaffold commit; the row becomes ``active``. Also the rebuild
    step for a stale (reaped) workspace before a re-dispatch runs. A healthy
    checkout is returned as it is. ``take_over``: the caller holds the task (its
    landing), so another host's checkout of it is let go first."""
    ws, repo = _live(task_id)
    with path_lock(ws.worktree_path):
        resumed = checkouts.resume_worktree(repo, ws.task_id, take_over=take_over)
        return _record(ws.task_id, resumed)


# The executor's name for the same step (seed 004: resumeTaskWorkspace).
resume_task_workspace = resume


def discard(task_id: str) -> None:
    """Drop the task's checkout and its branch and archive its workspace row, so
    that its next provisioning starts afresh from the tip of its base. Only for a
    checkout that holds nothing of its own: the server's copy of a remote worker's
    work, whose pushed branch carries it. A task with no live workspace: nothing."""
    ws = store.live_workspace(check_task_id(task_id))
    if ws is None:
        return
    checkouts.remove_worktree_and_branch(Path(ws.repo_path), ws.task_id)
    store.set_workspace_status(ws.task_id, WorkspaceStatus.ARCHIVED, keep_branch=False)


def _present_checkout(ws: Workspace) -> Path:
    path = Path(ws.worktree_path)
    if ws.status != WorkspaceStatus.ACTIVE or not path.is_dir():
        raise Conflict(
            f"task {ws.task_id!r}'s checkout is not on disk (status {ws.status}); resume it first",
            task_id=ws.task_id,
        )
    return path


def complete(task_id: str, *, checkpoint: bool = False) -> dict[str, Any]:
    """Decide clean-vs-retain by the work diff against the baseline (SoR files left
    out; committed, uncommitted and untracked changes counted).

    Empty: the task lands ``done`` (the verification gate's one named exception,
    ``EMPTY_DIFF``: no deliverable), then
    the checkout and branch are removed and the row ``archived``. Non-empty: the
    checkout is kept and the task moves to ``in_review``. Returns
    ``{"result": "cleaned"|"retained", "diffstat": {...}}``. The board move comes
    first, so an illegal move (IllegalTransition) leaves the checkout untouched;
    repeating a completion whose clean-up failed finishes it.

    With ``checkpoint`` (the executor finishing a run), retained work is committed
    first (``clawboo: checkpoint task <id>``), so the branch carries it into review,
    and the result also names the checkout's ``head`` commit. Work that is cleaned
    up has nothing worth a commit: its branch is about to go.
    """
    ws, repo = _live(task_id)
    with path_lock(ws.worktree_path):
        path = _present_checkout(ws)
        diff = checkouts.work_diff(path, ws.base_commit)
        stat = diff.as_dict()
        if diff.empty:
            head = diff.head
            store.settle_from_worktree(ws.task_id, empty=True, diffstat=stat)
            checkouts.remove_worktree_and_branch(repo, ws.task_id)
            store.set_workspace_status(ws.task_id, WorkspaceStatus.ARCHIVED, keep_branch=False)
            cleaned: dict[str, Any] = {"result": "cleaned", "diffstat": stat}
            return {**cleaned, "head": head} if checkpoint else cleaned
        retained: dict[str, Any] = {"result": "retained", "diffstat": stat}
        if checkpoint:
            retained["head"] = checkouts.commit_worktree_work(path, ws.task_id)
        moved = store.settle_from_worktree(ws.task_id, empty=False, diffstat=stat)
        # A task the merge queue sent back waits in review for a person's approval
        # of the work its round handed back (worktrees.queue.settle_returned).
        merge_queue.settle_returned(task_id=ws.task_id)
    if getattr(moved, "status", None) == "in_review" and _lands_by_pull_request(moved):
        # Review opens (or updates) the task's pull request on its forge.
        pull_requests.publish_quietly(ws.task_id)
    return retained


def review(task_id: str) -> dict[str, Any]:
    """Checkpoint the task's work (``clawboo: checkpoint task <id>``) and open a
    detached, read-only review checkout at that commit for a reviewer.
    Returns ``{"path", "sha", "branch"}`` (``branch`` is the task's, for reference;
    the review checkout itself has none)."""
    ws, repo = _live(task_id)
    with path_lock(ws.worktree_path):
        path = _present_checkout(ws)
        sha = checkouts.commit_worktree_work(path, ws.task_id)
        review_path = checkouts.provision_review_worktree(repo, sha)
    return {"path": str(review_path), "sha": sha, "branch": ws.branch}


def approve(task_id: str, *, by: str, human_override: Any = None) -> dict[str, Any]:
    """Approve a task in review: land its change on its base branch, then ``done``.

    Refusals come first and change nothing: not in review (IllegalTransition), a
    verdict that needs an override (VerificationRequired). A task without a live
    workspace (not file-mutating, or nothing retained) is simply approved. Otherwise,
    holding the repository's landing lock (:func:`worktrees.landing.land_lock`) and
    the checkout's lock, a landing of this repository that a killed process left
    half-way is settled first (:func:`recover_landings`); then the work lands per
    the repository's policy, crash-safe: the landing (base branch, its tip before,
    the commit it will point at) is recorded before git moves; the checkout and
    branch are removed; and the board's whole side — the task ``done`` with a
    comment naming the commit, the workspace ``archived`` — is one transaction.

    A change that no longer applies is not forced: nothing lands, the conflicting
    paths are kept on the workspace (``landing``) and named in the task's feedback,
    and the task goes back to its agent (``request_changes``) — or to ``blocked``
    with that reason when the repository's ``clawboo.onConflict`` is ``block`` or
    there is no agent. Returns ``{"result": "landed"|"nothing"|"approved"|"conflict",
    ...}``. LandingFailed (409) when the base branch could not be moved.

    A repository whose ``landing_mode`` is ``queue`` lands through its merge queue
    instead: the approval is put in line (``{"result": "queued", "position"}``) and
    the task stays in review until the queue's job lands it (:func:`landing_mode_of`
    picks the path).
    """
    task = store.check_approvable(task_id, human_override)
    if _lands_by_pull_request(task):
        # landing_mode pull_request: the forge merges; the task is done when it says so.
        return pull_requests.approve(task.id, by=by, human_override=human_override)
    ws = store.live_workspace(task.id)
    if ws is None:
        done = store.approve(task.id, by=by, human_override=human_override)
        return {"result": "approved", "task": done}
    if landing_mode_of(task, ws) == "queue":
        return _enqueue(task, ws, by=by, human_override=human_override)
    return _land_directly(task, ws, by=by, human_override=human_override)


def landing_mode_of(task: Task, ws: Workspace) -> str:
    """How this approval reaches the base: the ``landing_mode`` of the registered
    repository the task's workspace is in (``direct`` when none is registered).
    The one place an approval picks its landing path."""
    registered = repositories.for_real_path(task.team_id, Path(ws.repo_path))
    return registered.landing_mode if registered is not None else "direct"


def _enqueue(task: Task, ws: Workspace, *, by: str, human_override: Any) -> dict[str, Any]:
    """Put the approval in the repository's merge queue (:mod:`worktrees.queue`):
    the task stays in review, waiting to land, until a batch lands it."""
    repo = Path(ws.repo_path)
    branch = ws.base_branch or landing.base_branch_of(repo)
    queued = merge_queue.enqueue(
        task.id, repo_path=str(repo), base_branch=branch, by=by, human_override=human_override
    )
    return {"result": "queued", "position": queued.position, "task": store.get_task(task.id)}


def _land_directly(task: Task, ws: Workspace, *, by: str, human_override: Any) -> dict[str, Any]:
    task_id = task.id
    repo = Path(ws.repo_path)
    # The landing lock first, then the checkout's: recovery takes other tasks'
    # checkout locks while it holds the landing lock, so every approval must too.
    with landing.land_lock(repo):
        # Only landings this lock proves dead: another host's (or state dir's) may be
        # running now, under a lock of its own.
        settled = {entry["task_id"]: entry for entry in _recover_repo(repo, settled_here_now)}
        if settled.get(task.id, {}).get("result") == "completed":
            # This task's own landing, killed after its base branch moved: done now.
            record = settled[task.id]["landing"]
            shown = {k: record.get(k) for k in landing.Landing.__dataclass_fields__}
            return _pushed(task.id, repo, {**shown, "task": store.get_task(task.id)})
        task = store.check_approvable(task_id, human_override)
        ws = store.get_workspace(task.id)
        with path_lock(ws.worktree_path):
            return _land_approved(task, ws, repo, by=by, human_override=human_override)


def _pushed(task_id: str, repo: Path, result: dict[str, Any]) -> dict[str, Any]:
    """A landing recovery completed: its base branch goes to the remote now (see
    :func:`_reported_push`)."""
    if result.get("result") != "landed":
        return result
    return _reported_push(
        task_id, result, intake.push_base(repo, str(result.get("base_branch") or ""))
    )


def _reported_push(
    task_id: str, result: dict[str, Any], pushed: dict[str, Any] | None
) -> dict[str, Any]:
    """A landing's push of its base branch to the repository's ``remote`` (when it
    has one), so a remote worker's next clone starts from landed work: ``push`` in
    the result; a failed push is also a comment on the task (the landing stands;
    the next landing pushes it along)."""
    if pushed is None:
        return result
    if not pushed["pushed"]:
        store.add_comment(
            task_id,
            f"landed, but the push of {pushed['branch']} to {pushed['remote']} failed: "
            f"{pushed.get('error')}",
            "clawboo",
        )
    return {**result, "push": pushed}


def _land_approved(
    task: Task, ws: Workspace, repo: Path, *, by: str, human_override: Any
) -> dict[str, Any]:
    if not Path(ws.worktree_path).is_dir() or ws.status != WorkspaceStatus.ACTIVE:
        # Reaped, or made by another host whose state dir is not visible here.
        ws = _record(task.id, checkouts.resume_worktree(repo, task.id, take_over=True))
    path = _present_checkout(ws)
    policy = landing_policy(task, repo)
    branch = ws.base_branch or landing.base_branch_of(repo)
    outcome = landing.prepare(
        repo,
        path,
        task_id=task.id,
        title=task.title,
        base_branch=branch,
        strategy=policy.strategy,
    )
    if outcome.result == "conflict":
        return _send_back(task, outcome, policy, by)
    record: dict[str, Any] = {
        **outcome.as_dict(),
        "by": by,
        "started_at": time.time(),
        "host": socket.gethostname(),
        # The landing lock is a file in this state dir: whoever shares it can see
        # whether this landing still runs (two state dirs on one host cannot).
        "state_dir": str(checkouts.state_dir()),
        "pid": os.getpid(),
    }
    if human_override is not None:
        record["human_override"] = human_override
    store.begin_landing(task.id, record)
    pushed = None
    if outcome.result == "landed":
        try:
            landing.advance(repo, outcome)
        except landing.LandingFailed as exc:
            store.roll_back_landing(task.id, exc.detail)
            raise
        # The remote before the board, under the landing lock (pushes leave in the
        # order the landings made): once this task is done its dependents are
        # ready, and a remote worker taking one clones the remote, which must
        # already hold this landing -- else it builds on a base without it, and
        # its work does not merge at its intake.
        pushed = intake.push_base(repo, branch)
    done = _finish_landing(repo, task.id, record)
    return _reported_push(task.id, {**outcome.as_dict(), "task": done}, pushed)


def _finish_landing(repo: Path, task_id: str, record: dict[str, Any]) -> Task:
    """The change is on its base (or there was nothing to land): the checkout and
    branch go, then the board records the approval in one transaction."""
    checkouts.remove_worktree_and_branch(repo, task_id)
    commit, branch = record.get("commit"), record.get("base_branch")
    return store.finish_landing(
        task_id,
        {k: v for k, v in record.items() if k not in ("human_override", "state")},
        by=record.get("by") or "clawboo",
        human_override=record.get("human_override"),
        landed=f"commit {commit} on {branch}" if commit else None,
    )


# A landing recorded by another host is judged dead only this long after it began:
# that host's landing lock is not this host's to see (each host locks under its own
# state directory), and a landing's git steps end well within it.
FOREIGN_LANDING_S = 300.0


def settled_here_now(record: dict[str, Any]) -> bool:
    """Whether a recovery may settle this pending landing now: one begun under this
    host's state dir (its landing lock, held now by the recovery, proves it is not
    running), or another host's (or another state dir's on this host) once
    FOREIGN_LANDING_S old. The periodic recovery and an approval's own both ask."""
    host, state = record.get("host"), record.get("state_dir")
    if host in (None, socket.gethostname()) and state in (None, str(checkouts.state_dir())):
        return True
    return time.time() - float(record.get("started_at") or 0) >= FOREIGN_LANDING_S


def recover_landings(
    settle_if: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """The boot pass: settle every landing a killed process left half-way, in each
    repository that has one (see :func:`_recover_repo`); with ``settle_if``, only
    the landings whose record it accepts (the periodic job's
    :func:`settled_here_now`)."""
    settled: list[dict[str, Any]] = []
    for repo_path in store.repos_with_pending_landings():
        repo = Path(repo_path)
        try:
            with landing.land_lock(repo):
                done = _recover_repo(repo, settle_if)
                # A landing killed before its push: the base goes to the remote now.
                for branch in {
                    str(entry["landing"].get("base_branch") or "")
                    for entry in done
                    if entry["result"] == "completed" and entry["landing"].get("commit")
                }:
                    intake.push_base(repo, branch)
                settled += done
        except Exception:  # one broken repository must not stop the others
            log.exception("could not recover the landings of %s", repo_path)
    return settled


def _recover_repo(
    repo: Path, settle_if: Callable[[dict[str, Any]], bool] | None = None
) -> list[dict[str, Any]]:
    """Under the repository's landing lock (so no landing of it is running), settle
    each landing recorded but never finished: its commit is on the base branch →
    complete it (checkout and branch removed, the board's side recorded); it is not
    → roll it back (the files a killed fast-forward wrote put back; the task stays
    in review). Lock files the killed git left are cleared first."""
    pending = store.pending_landings(str(repo))
    if settle_if is not None:
        pending = [ws for ws in pending if settle_if(dict(ws.landing or {}))]
    if not pending:
        return []
    since = min(float((ws.landing or {}).get("started_at") or 0) for ws in pending)
    cleared = landing.clear_stale_locks(repo, since)
    if cleared:
        log.warning("cleared lock files a killed landing left in %s: %s", repo, cleared)
    settled: list[dict[str, Any]] = []
    for ws in pending:
        record = dict(ws.landing or {})
        commit, branch = record.get("commit"), str(record.get("base_branch") or "")
        try:
            if commit is None or landing.base_has(repo, branch, commit):
                _finish_landing(repo, ws.task_id, record)
                result = "completed"
            else:
                landing.undo_partial_fast_forward(
                    repo, branch, str(record.get("previous_tip")), commit
                )
                store.roll_back_landing(
                    ws.task_id, "interrupted before the base branch moved; approve again"
                )
                result = "rolled_back"
        except Exception:
            log.exception("could not settle the landing of task %s", ws.task_id)
            continue
        log.warning("landing of task %s interrupted earlier: %s", ws.task_id, result)
        settled.append({"task_id": ws.task_id, "result": result, "landing": record})
    return settled


def _send_back(
    task: Task, outcome: landing.Landing, policy: landing.Policy, by: str
) -> dict[str, Any]:
    paths = outcome.conflicts
    tip = (outcome.previous_tip or "")[:12]
    note = (
        f"conflict: the change no longer applies to {outcome.base_branch} (now at {tip}); "
        f"conflicting files: {', '.join(paths)}. Bring the branch up to date "
        f"(git merge {outcome.base_branch}), resolve them, verify, and finish again."
    )
    store.record_landing(task.id, {**outcome.as_dict(), "by": by})
    if policy.on_conflict == landing.BLOCK or not task.assignee_agent_id:
        moved = store.block(task.id, note).task
        sent = "blocked"
    else:
        moved = store.request_changes(task.id, note, by=by).task
        sent = "rework"
    return {**outcome.as_dict(), "sent": sent, "feedback": note, "task": moved}


def write_handoff(task_id: str, data: Any) -> dict[str, Any]:
    """Validate and write ``AGENT_HANDOFF.json`` into the task's checkout; returns
    the stored document. Invalid data raises ValidationFailed and writes nothing."""
    ws, _repo = _live(task_id)
    doc = handoff.validate_handoff(data)
    with path_lock(ws.worktree_path):
        return handoff.write_handoff(_present_checkout(ws), doc)


def show_handoff(task_id: str) -> dict[str, Any] | None:
    ws, _repo = _live(task_id)
    return handoff.read_handoff(Path(ws.worktree_path))


def _is_active(task_id: str) -> bool:
    task = store.find_task(task_id)
    return task is not None and is_locked(task.status)


def _mark_reaped(task_id: str, path: Path) -> None:
    ws = store.live_workspace(task_id)
    if ws is not None and Path(ws.worktree_path) == path:
        store.set_workspace_status(task_id, WorkspaceStatus.STALE)


def gc(
    max_age_hours: float = checkouts.GC_MAX_AGE_HOURS,
    keep: int = checkouts.GC_KEEP,
    *,
    now: float | None = None,
) -> dict[str, Any]:
    """Reap old checkouts (age and count), commit-before-drop, branches kept;
    tasks ``in_progress``/``in_review`` are skipped (re-checked inside the lock).
    Reaped workspace rows become ``stale``. Old review checkouts go too (entries
    with ``review`` instead of ``task_id``). Returns ``{reaped, skipped, failures}``."""
    if isinstance(max_age_hours, bool) or not isinstance(max_age_hours, int | float):
        raise ValidationFailed("max_age_hours", "must be a number")
    if not 0 <= max_age_hours <= 24 * 365 * 10:
        raise ValidationFailed("max_age_hours", "must be between 0 and 87600")
    if isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= 100_000:
        raise ValidationFailed("keep", "must be an integer between 0 and 100000")
    report = checkouts.gc_worktrees(
        _is_active, max_age_hours=max_age_hours, keep=keep, now=now, on_reaped=_mark_reaped
    )
    return report.as_dict()


def gc_at_startup() -> threading.Thread:
    """Best-effort GC on server start, in a daemon thread so boot never waits on git."""

    def run() -> None:
        try:
            result = gc()
            log.info(
                "worktrees gc: %d reaped, %d skipped, %d failures",
                len(result["reaped"]),
                len(result["skipped"]),
                len(result["failures"]),
            )
        except Exception:  # noqa: BLE001 - never let a sweep take the server down
            log.exception("worktrees gc at startup failed")

    thread = threading.Thread(target=run, name="worktrees-gc", daemon=True)
    thread.start()
    return thread


__all__ = [
    "approve",
    "complete",
    "discard",
    "gc",
    "gc_at_startup",
    "pause",
    "provision_task_workspace",
    "resume",
    "resume_task_workspace",
    "review",
    "show_handoff",
    "workspace_as_dict",
    "workspace_state",
    "write_handoff",
]
