"""A task's live workspace and the state of its landing: the one rule that keeps a
task in review while an approval lands it (asked by every move, board.store.moves,
which board.store.workspaces builds on: so it stands apart from both)."""

from __future__ import annotations

from board.errors import LandingUnderway
from board.models import Task, Workspace, WorkspaceStatus


def live_workspace(task_id: str) -> Workspace | None:
    """The task's active or stale workspace, if any."""
    return (
        Workspace.objects.filter(task_id=task_id)
        .exclude(status=WorkspaceStatus.ARCHIVED)
        .order_by("-updated_at")
        .first()
    )


# The states of a workspace's ``landing`` record (an approval's git half).
LANDING_PENDING = "pending"  # written before git moves; recovery settles it
LANDING_LANDED = "landed"
LANDING_ROLLED_BACK = "rolled_back"  # git never moved: the task stays in review
# In a merge-queue batch whose gate decided it lands: the batch lands it, or is
# abandoned and lets it go (board.store.review.hold_for_batch, release_batch).
LANDING_QUEUED = "queued"
UNDERWAY = (LANDING_PENDING, LANDING_QUEUED)


def refuse_while_landing(task: Task) -> None:
    """Any move sending a task in review elsewhere (request changes, a transition,
    cancel, block: :func:`board.store.moves.move` asks every one) waits while its
    approval lands (call it holding the task's lock):
    the landing began under that lock with the task in review and finishes it
    ``done``, so a task sent back now would be redone over a change already on its
    base, and land again. The landing settles in seconds, or its recovery does."""
    ws = live_workspace(task.id)
    landing = (ws.landing if ws is not None else None) or {}
    if landing.get("state") in UNDERWAY:
        raise LandingUnderway(
            f"task {task.id!r} is being landed on {landing.get('base_branch') or 'its base'}"
            " by an approval or its merge-queue batch: ask again once it is done or back in"
            " review",
            task_id=task.id,
        )
