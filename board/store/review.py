"""The review decisions on the board: send a task back with feedback, or record
its approval (``in_review → done``). The git half of an approval (landing the
change on its base branch) is the worktrees app's: it writes the landing it is
about to make (:func:`begin_landing`) before git moves, and records the whole
board side of the approval in one transaction once it has
(:func:`finish_landing`); :func:`request_changes` when it no longer applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from board import checks, judgement
from board.errors import ClaimRequired, IllegalTransition
from board.models import Task, Workspace, WorkspaceStatus
from board.store._base import add_comment_row, commit_change, lock_task, now, set_fields
from board.store.moves import check_override, gate_refusal, move
from board.store.tasks import claim_for_agent, get_task, ticket_of
from board.store.workspaces import (
    LANDING_LANDED,
    LANDING_PENDING,
    LANDING_QUEUED,
    LANDING_ROLLED_BACK,
    live_workspace,
    refuse_while_landing,
)
from board.transitions import Status, allowed_transitions_from
from core import storage
from core.errors import NotFound

REVIEWER_MAX = 200


@dataclass(frozen=True)
class Reworked:
    """A task sent back to be worked: claimed again for ``task.assignee_agent_id``."""

    task: Task
    ticket: str


def _who(by: Any) -> str:
    return checks.check_text(by, "by", limit=REVIEWER_MAX, required=True)


def _in_review(task: Task, to: str) -> None:
    """Review's verbs run from ``in_review`` only (as a verb that owns one edge)."""
    if task.status != Status.IN_REVIEW:
        raise IllegalTransition(task.id, task.status, to, allowed_transitions_from(task.status))


def request_changes(
    task_id: str, feedback: Any, *, by: Any, agent_id: Any = None, comments: Any = None
) -> Reworked:
    """``in_review → in_progress``, claimed again for ``agent_id`` (default: the agent
    that did the work), with ``feedback`` kept as the task's ``feedback`` and a comment
    by ``by``. The task keeps its worktree and branch; the agent's executor picks the
    claim up (``start_assigned``) and its next run resumes that checkout with the
    feedback in ``TASK.md``. Line ``comments`` (``[{file, line, body}]``, as on a
    pull request) join the feedback, one ``file:line: text`` each.

    The table has no ``in_review → todo`` edge: this is its ``in_review →
    in_progress`` edge, and it always brings a claim. Raises :class:`ClaimRequired`
    when there is no agent to send it back to, ``IllegalTransition`` outside review.
    """
    lines = judgement.clean_line_comments(comments)
    note = checks.check_text(feedback, "feedback", required=not lines) or ""
    if lines:
        # Like a pull request's review: the agent reads each comment at its file:line.
        said = "Line comments:\n" + judgement.line_comments_text(lines)
        note = checks.check_text(f"{note}\n{said}".strip(), "feedback", required=True)
    reviewer = _who(by)
    named = None if agent_id is None else claim_for_agent(agent_id)

    def run() -> Reworked:
        task = lock_task(task_id)
        prev = task.status
        _in_review(task, Status.IN_PROGRESS)
        # move() asks it too; asked here first so it answers before "name an agent".
        refuse_while_landing(task)
        claim = named
        if claim is None:
            if not task.assignee_agent_id:
                raise ClaimRequired(
                    f"task {task.id!r} has no agent to send it back to: name one (agent_id)",
                    task_id=task.id,
                )
            claim = claim_for_agent(task.assignee_agent_id)
        at = now()
        fields = move(task, Status.IN_PROGRESS, at=at, claim=claim)
        fields |= set_fields(task, feedback=note)
        add_comment_row(task, reviewer, f"Changes requested: {note}", at)
        commit_change(
            task, "changes_requested", prev_status=prev, fields=fields, at=at, actor=reviewer
        )
        return Reworked(task, ticket_of(task))

    return storage.write(run)


def approve(
    task_id: str, *, by: Any, human_override: Any = None, landed: str | None = None
) -> Task:
    """``in_review → done`` through the verification gate, with a comment by ``by``
    naming what landed (``landed``: a sentence such as "commit abc123 on main")."""
    reviewer = _who(by)
    override = check_override(human_override)

    def run() -> Task:
        task = lock_task(task_id)
        prev = task.status
        _in_review(task, Status.DONE)
        at = now()
        fields = move(task, Status.DONE, at=at, override=override)
        text = f"Approved by {reviewer}" + (f"; landed {landed}" if landed else "")
        add_comment_row(task, reviewer, text, at)
        return commit_change(
            task, "completed", prev_status=prev, fields=fields, at=at, actor=reviewer
        )

    return storage.write(run)


def check_approvable(task_id: str, human_override: Any = None) -> Task:
    """The approval's refusals, asked before any git work: the task must be in review
    and pass the verification gate (``IllegalTransition``, ``VerificationRequired``).
    :func:`approve` asks again in its own transaction."""
    override = check_override(human_override)
    task = get_task(task_id)
    _in_review(task, Status.DONE)
    refusal = gate_refusal(task, override)
    if refusal is not None:
        raise refusal
    return task


def _live_workspace_of(task: Task) -> Workspace:
    ws = live_workspace(task.id)
    if ws is None:
        raise NotFound(f"task {task.id!r} has no workspace")
    return ws


def begin_landing(task_id: str, record: dict[str, Any]) -> Workspace:
    """Keep the landing about to be made (base branch, its tip before, the commit it
    will point at) on the task's live workspace, committed before git moves, so a
    process killed mid-landing leaves something to complete or roll back. Refused
    (IllegalTransition, nothing written, git not moved) when the task left review
    since the approval checked it: a reviewer sent it back meanwhile, and that
    decision holds. From here until the landing settles, the task stays in review
    (:func:`board.store.workspaces.refuse_while_landing`)."""

    def run() -> Workspace:
        task = lock_task(task_id)
        _in_review(task, Status.DONE)
        ws = _live_workspace_of(task)
        ws.landing, ws.updated_at = {**record, "state": LANDING_PENDING}, now()
        ws.save(update_fields=["landing", "updated_at"])
        return ws

    return storage.write(run)


def hold_for_batch(task_ids: list[str], batch_id: int, base_branch: str) -> list[str]:
    """The merge queue's decision that ``task_ids`` land with batch ``batch_id``,
    taken before the base moves (in the queue's transaction): each task, locked,
    must still be in review with its workspace; each workspace then carries the
    landing (``queued``), so a person's move out of review waits until the batch
    lands the task (:func:`finish_landing`) or is abandoned (:func:`release_batch`).
    Returns the tasks that left review since they were stacked (a reviewer sent one
    back while the gate ran): then nothing is held, and the batch must not land."""

    def run() -> list[str]:
        held, left = [], []
        for task_id in sorted(set(task_ids)):  # one lock order for every holder
            task = lock_task(task_id)
            ws = live_workspace(task_id)
            if task.status != Status.IN_REVIEW or ws is None:
                left.append(task_id)
            else:
                held.append(ws)
        if left:
            return left
        at = now()
        for ws in held:
            ws.landing = {
                "state": LANDING_QUEUED,
                "queue_batch": batch_id,
                "base_branch": base_branch,
                "before": ws.landing,  # what it said before; a release puts it back
            }
            ws.updated_at = at
            ws.save(update_fields=["landing", "updated_at"])
        return []

    return storage.write(run)


def release_batch(batch_id: int) -> int:
    """The merge-queue batch ``batch_id`` was abandoned before it landed: the tasks it
    held stay in review, free to be sent back again. Returns how many it let go."""

    def run() -> int:
        released = 0
        held = Workspace.objects.select_for_update().filter(
            landing__state=LANDING_QUEUED, landing__queue_batch=batch_id
        )
        for ws in held:
            ws.landing = (ws.landing or {}).get("before")
            ws.updated_at = now()
            ws.save(update_fields=["landing", "updated_at"])
            released += 1
        return released

    return storage.write(run)


def pending_landings(repo_path: str) -> list[Workspace]:
    """Live workspaces of ``repo_path`` whose landing was begun and never settled."""
    return list(
        Workspace.objects.filter(repo_path=repo_path, landing__state=LANDING_PENDING)
        .exclude(status=WorkspaceStatus.ARCHIVED)
        .order_by("updated_at", "id")
    )


def repos_with_pending_landings() -> list[str]:
    return sorted(
        set(
            Workspace.objects.filter(landing__state=LANDING_PENDING)
            .exclude(status=WorkspaceStatus.ARCHIVED)
            .values_list("repo_path", flat=True)
        )
    )


def roll_back_landing(task_id: str, reason: str) -> Workspace:
    """The base branch never moved: the landing is void and the task stays as it is."""

    def run() -> Workspace:
        task = lock_task(task_id)
        ws = _live_workspace_of(task)
        record = dict(ws.landing or {})
        if record.get("state") != LANDING_PENDING:
            return ws
        record.update(state=LANDING_ROLLED_BACK, reason=reason)
        ws.landing, ws.updated_at = record, now()
        ws.save(update_fields=["landing", "updated_at"])
        return ws

    return storage.write(run)


def finish_landing(
    task_id: str,
    landing: dict[str, Any],
    *,
    by: Any,
    human_override: Any = None,
    landed: str | None = None,
) -> Task:
    """The board's whole side of an approval that landed, in one transaction and
    one event: the landing kept on the workspace, the workspace ``archived`` and the
    task's pointers to it cleared, and ``in_review → done`` through the gate with a
    comment by ``by`` naming what landed. A task that left review meanwhile (the
    change is on its base all the same) keeps its status; the rest is recorded."""
    reviewer = _who(by)
    override = check_override(human_override)

    def run() -> Task:
        task = lock_task(task_id)
        prev = task.status
        at = now()
        ws = live_workspace(task_id)
        if ws is not None:
            ws.landing = {**landing, "state": LANDING_LANDED}
            ws.status, ws.updated_at = WorkspaceStatus.ARCHIVED, at
            ws.save(update_fields=["landing", "status", "updated_at"])
        fields = set_fields(task, worktree_ref=None, branch_ref=None)
        kind = "metadata_changed"
        if task.status == Status.IN_REVIEW:
            fields |= move(task, Status.DONE, at=at, override=override)
            kind = "completed"
        text = f"Approved by {reviewer}" + (f"; landed {landed}" if landed else "")
        add_comment_row(task, reviewer, text, at)
        return commit_change(task, kind, prev_status=prev, fields=fields, at=at, actor=reviewer)

    return storage.write(run)
