"""Workspace rows and the task pointers to them (the worktrees app owns the checkout)."""

from __future__ import annotations

from typing import Any

from board.models import Task, Workspace, WorkspaceStatus
from board.scope import scope_of_changes
from board.store._base import commit_change, lock_task, now
from board.store.intake import end_intake, is_pending
from board.store.landings import (  # noqa: F401 - re-exported: callers read them here
    LANDING_LANDED,
    LANDING_PENDING,
    LANDING_QUEUED,
    LANDING_ROLLED_BACK,
    UNDERWAY,
    live_workspace,
    refuse_while_landing,
)
from board.store.moves import EMPTY_DIFF, move
from board.transitions import Status
from core import storage
from core.errors import NotFound


def get_workspace(task_id: str) -> Workspace:
    ws = live_workspace(task_id)
    if ws is None:
        raise NotFound(f"task {task_id!r} has no workspace")
    return ws


def record_workspace(
    task_id: str,
    *,
    repo_path: str,
    worktree_path: str,
    branch: str,
    base_sha: str,
    base_commit: str,
    base_branch: str | None = None,
) -> Workspace:
    """Create or refresh the task's live workspace row (``active``) and its pointers.
    ``base_branch`` None keeps the branch the row already names."""

    def run() -> Workspace:
        task = lock_task(task_id)
        at = now()
        ws = live_workspace(task_id)
        if ws is None:
            ws = Workspace(task=task, created_at=at)
        ws.repo_path, ws.worktree_path, ws.branch = repo_path, worktree_path, branch
        ws.base_sha, ws.base_commit = base_sha, base_commit
        if base_branch is not None:
            ws.base_branch = base_branch
        ws.status, ws.updated_at = WorkspaceStatus.ACTIVE, at
        ws.save()
        _point(task, worktree_path, branch)
        return ws

    return storage.write(run)


def _point(task: Task, worktree_ref: str | None, branch_ref: str | None) -> None:
    if task.worktree_ref == worktree_ref and task.branch_ref == branch_ref:
        return
    task.worktree_ref, task.branch_ref = worktree_ref, branch_ref
    commit_change(
        task, "metadata_changed", prev_status=task.status, fields={"worktree_ref", "branch_ref"}
    )


def set_workspace_status(task_id: str, status: str, *, keep_branch: bool = True) -> Workspace:
    """Mark the live workspace ``stale`` (reaped, branch kept) or ``archived`` (cleaned up)."""
    if status not in WorkspaceStatus.values:
        raise ValueError(f"unknown workspace status {status!r}")

    def run() -> Workspace:
        task = lock_task(task_id)
        ws = live_workspace(task_id)
        if ws is None:
            raise NotFound(f"task {task_id!r} has no workspace")
        ws.status, ws.updated_at = status, now()
        ws.save(update_fields=["status", "updated_at"])
        if status == WorkspaceStatus.ARCHIVED:
            _point(task, None, task.branch_ref if keep_branch else None)
        return ws

    return storage.write(run)


def settle_from_worktree(
    task_id: str, *, empty: bool, diffstat: dict[str, Any] | None = None
) -> Task:
    """Settle a task after its worktree completed (seed 004), keeping ``diffstat``
    on the live workspace row.

    Non-empty: ``in_review``, where the verification gate waits for the approval.
    Empty: ``done`` under the gate's one named exception, :data:`~board.store.moves.
    EMPTY_DIFF` (no deliverable, nothing a verdict could be about); the verdict
    stays on the task as it was.

    An approval's conflict kept on the row (:func:`record_landing`) is dropped: it
    was about the work before this round, not the work now in review.

    A task without ``touches`` takes the paths this attempt changed as its scope
    (:func:`board.scope.scope_of_changes`), so its retry or fix round waits for
    overlapping work of its repository to land before it starts again.
    """

    def run() -> Task:
        task = lock_task(task_id)
        prev = task.status
        target = Status.DONE if empty else Status.IN_REVIEW
        at = now()
        ws = live_workspace(task_id)
        if ws is not None and diffstat is not None and ws.diffstat != diffstat:
            ws.diffstat, ws.updated_at = diffstat, at
            ws.save(update_fields=["diffstat", "updated_at"])
        # A remote worker's submission this landing takes in ends with the move, in
        # its transaction: killed after it, the intake is not run again (re-landing
        # the old work onto a task its agent may have resumed since).
        taken_in = is_pending(task)
        fields = move(task, target, at=at, waiver=EMPTY_DIFF if empty else None)
        if not fields:
            return task
        if taken_in:
            fields |= end_intake(task, "review", at)
        if ws is not None and (ws.landing or {}).get("result") == "conflict":
            # The approval that conflicted was about the work before this round (a
            # rebase round resolved it, say): the review is of new work, unmarked.
            ws.landing, ws.updated_at = None, at
            ws.save(update_fields=["landing", "updated_at"])
        if not empty and not task.touches and diffstat is not None:
            changed = scope_of_changes(f["path"] for f in diffstat.get("files") or ())
            if changed is not None and changed != task.scope:
                task.scope = changed
                fields.add("scope")
        kind = "completed" if empty else "review_requested"
        return commit_change(task, kind, prev_status=prev, fields=fields, at=at)

    return storage.write(run)


def record_landing(task_id: str, landing: dict[str, Any]) -> Workspace:
    """Keep an approval's outcome (landed commit, or the conflicting paths) on the
    task's live workspace row."""

    def run() -> Workspace:
        lock_task(task_id)
        ws = live_workspace(task_id)
        if ws is None:
            raise NotFound(f"task {task_id!r} has no workspace")
        ws.landing, ws.updated_at = landing, now()
        ws.save(update_fields=["landing", "updated_at"])
        return ws

    return storage.write(run)


def last_workspace(task_id: str) -> Workspace | None:
    """The task's newest workspace row, live or archived (a landed task's is archived)."""
    return Workspace.objects.filter(task_id=task_id).order_by("-updated_at", "-id").first()
