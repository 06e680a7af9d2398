"""Approval before work (GOVERNANCE §5): which tasks wait for a person, the
person's decision, an edit that voids it, and the expiry of unanswered ones.

A task needs approval when an agent created it (delegation), when it carries the
label ``risk``, or when its team or routine says so; a task a person filed
without ``risk`` and no such rule has none (``approval_state`` null). The claim
statement (:mod:`board.store.claims`) admits only a null or ``approved`` state, so
this module only writes the state; it never has to stop a claim itself.

What a decision means:

- ``approve`` names the revision the person saw; any later edit of what would run
  or where (:data:`VOIDING_FIELDS`: title, description, goal, context, labels,
  metadata, route, repository, ``max_run_cents``, dependencies) sends it back to
  ``required``, and so does the agent side's comment or subtask on it
  (:func:`agent_side_added`): a run reads its task's comments and its subtasks.
- ``deny`` keeps the task where it is and out of dispatch for good: no claim
  takes it, its card carries the denial and its reason, and a person may still
  approve it later or cancel it. Denial never cascades to dependents.
- Unanswered past ``CLAWBOO_APPROVAL_TTL_MS``: ``expired`` (:func:`expire_unanswered`),
  still out of dispatch and still in the "Needs approval" column; a person can
  approve it late, or an edit asks again.

Decisions are only taken before the work starts: once a claim holds the task
(in progress, in review) or it is settled, a decision is refused (409).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q, QuerySet

from board import checks
from board.models import AWAITING_APPROVAL, ApprovalState, Task
from board.store._base import commit_change, lock_task, now, record_event
from board.transitions import LOCKED, TERMINAL, Status
from core import storage
from core.errors import Conflict

APPROVAL_LABEL = "risk"
DECISIONS = ("approve", "deny")
REASON_LIMIT = 2_000
# The one list of what voids an approval (GOVERNANCE §5): a change to what would run
# or where. Names are the task's columns as the edits report them; ``depends_on`` is
# the dependency writes (link, unlink). Every door (REST, MCP, admin, board) edits
# through the store, which asks :func:`ask_again_after_edit` with what it changed.
VOIDING_FIELDS = frozenset(
    {
        "title",
        "description",
        "goal",
        "context",
        "labels",
        "metadata",  # verify / install commands, repo_path, ...
        "route_agent_id",
        "route_runtime",
        "route_labels",
        "repository_id",
        "max_run_cents",
        "depends_on",
    }
)
# Where an approval still matters: before any claim holds the task.
_OPEN = frozenset({Status.BACKLOG, Status.TODO, Status.BLOCKED})


def needs_approval(
    *,
    created_by_agent_id: str | None,
    labels: list[str],
    team_requires: bool = False,
    routine_requires: bool = False,
) -> bool:
    """Whether a new task waits for a person (the rule, stated once)."""
    return (
        created_by_agent_id is not None
        or APPROVAL_LABEL in labels
        or team_requires
        or routine_requires
    )


NEEDS_APPROVAL = "needs_approval"  # the board's column of tasks waiting for a person


def awaiting_filter() -> Q:
    """Tasks a person still has to answer, before any claim: the board's "Needs
    approval" column (served by the partial index ``tasks_awaiting_approval_idx``)."""
    return Q(approval_state__in=list(AWAITING_APPROVAL), status__in=list(_OPEN))


def awaits(task: Task) -> bool:
    """:func:`awaiting_filter` for one task in hand."""
    return task.approval_state in AWAITING_APPROVAL and task.status in _OPEN


def count_awaiting(qs: QuerySet[Task]) -> dict[str, int]:
    """How many of ``qs`` wait for approval, by status: the board takes them out of
    their status columns into "Needs approval". One GROUP BY over the few waiting."""
    rows = qs.filter(awaiting_filter()).order_by().values_list("status").annotate(n=Count("pk"))
    return dict(rows)


def waits_sentence(task_id: str) -> str:
    """Why a claim of a waiting task is refused, and who may end the wait, where."""
    return (
        f"task {task_id!r} waits for a person's approval before any claim: a member of its"
        " team approves it in the board's Needs approval column, with `clawboo task approve"
        f" {task_id}`, or with POST /api/board/tasks/{task_id}/approval"
    )


def blocks_claim(state: str | None) -> bool:
    """The claim statement's rule, for diagnosing a refused claim (the statement
    itself says it in SQL: null or approved)."""
    return state is not None and state != ApprovalState.APPROVED


def require(task: Task, at: dt.datetime, *, reason: str | None = None) -> set[str]:
    """Put ``task`` (locked, in the caller's write) back to ``required``; the
    changed field names."""
    task.approval_state = ApprovalState.REQUIRED
    task.approval_revision = None
    task.approval_by = None
    task.approval_at = at
    task.approval_reason = reason
    return {"approval_state", "approval_revision", "approval_by", "approval_at", "approval_reason"}


def ask_again_after_edit(task: Task, changed: set[str], at: dt.datetime) -> set[str]:
    """Called by the edits, on the locked row with its new values: an edit of a
    :data:`VOIDING_FIELDS` field voids a decision (approved, denied, expired) — the
    person decided on other work; adding the label ``risk`` makes a task that needed
    none wait. The changed field names (empty: the approval is as it was)."""
    if not (changed & VOIDING_FIELDS) or task.status not in _OPEN:
        return set()
    if task.approval_state is None:
        if APPROVAL_LABEL in (task.labels or []):
            return require(task, at, reason=f"labelled {APPROVAL_LABEL}")
        return set()
    if task.approval_state == ApprovalState.REQUIRED:
        return set()
    return require(task, at, reason=f"edited after it was {task.approval_state}")


def has_open_approval(task: Task) -> bool:
    """Whether ``task`` has an approval (waiting or decided) that still matters: not
    yet claimed."""
    return task.approval_state is not None and task.status in _OPEN


def ask_again_after_agent_side(task: Task, by: str, at: dt.datetime, did: str) -> set[str]:
    """An approval is sent back to ``required`` as an edit sends it; a denial or an
    expiry stays (nothing the agent side adds undoes a person's no). The changed
    field names. ``did``: what was done to it, for the reason (``commented on``)."""
    if task.status not in _OPEN or task.approval_state != ApprovalState.APPROVED:
        return set()
    return require(task, at, reason=f"{did} by {by} after it was approved")


def agent_side_added(task: Task, by: str, at: dt.datetime, did: str) -> None:
    """The one rule for what the agent side adds to a task a run of it would be told
    of: a comment on it (``GET …/comments``, MCP ``get_task``) or a subtask under it
    (MCP ``get_task`` lists its subtasks' titles). Called on the locked row, in the
    caller's write. On a task not yet claimed that has an approval (waiting or
    decided) it counts as an edit does: the task's revision moves (a person's decision
    on the revision before it is refused) and an approval is asked again
    (:func:`ask_again_after_agent_side`). Otherwise: nothing."""
    if not has_open_approval(task):
        return
    asked = ask_again_after_agent_side(task, by, at, did)
    task.revision += 1
    task.updated_at = at
    task.save(update_fields=sorted(asked | {"revision", "updated_at"}))
    if asked:
        record_required(task)


def decide(
    task_id: str,
    decision: Any,
    *,
    by: str,
    reason: Any = None,
    revision: Any = None,
) -> Task:
    """A person's decision on a task's approval: ``approve`` or ``deny``.

    ``by`` is the authenticated user (the views check that it is a person of the
    task's team, never an agent's credential). ``revision``, when given, is the
    revision the person saw: a task changed since is refused (409), so nobody
    approves work they did not read. Recorded on the task and as one
    ``approval_decided`` event with the actor, in one write.
    """
    checks.check_choice(decision, "decision", DECISIONS)
    note = None if reason is None else checks.check_text(reason, "reason", limit=REASON_LIMIT)
    seen = None if revision is None else checks.check_int(revision, "revision", low=0, high=2**62)

    def run() -> Task:
        task = lock_task(task_id)
        if task.approval_state is None:
            raise Conflict(f"task {task_id!r} needs no approval", approval=None)
        if task.status in LOCKED or task.status in TERMINAL:
            raise Conflict(
                f"task {task_id!r} is {task.status}: an approval is decided before work starts",
                status=task.status,
            )
        if seen is not None and seen != task.revision:
            raise Conflict(
                f"task {task_id!r} changed since you saw it (revision {seen}, now "
                f"{task.revision}): read it again before deciding",
                revision=task.revision,
            )
        at = now()
        task.approval_state = (
            ApprovalState.APPROVED if decision == "approve" else ApprovalState.DENIED
        )
        task.approval_revision = task.revision
        task.approval_by = by
        task.approval_at = at
        task.approval_reason = note or None
        fields = {
            "approval_state",
            "approval_revision",
            "approval_by",
            "approval_at",
            "approval_reason",
        }
        return commit_change(
            task, "approval_decided", prev_status=task.status, fields=fields, at=at, actor=by
        )

    return storage.write(run)


def ttl() -> dt.timedelta:
    return dt.timedelta(milliseconds=settings.CLAWBOO_APPROVAL_TTL_MS)


def expire_unanswered(at: dt.datetime | None = None) -> list[str]:
    """Mark ``expired`` every approval still ``required`` past the TTL: one write,
    an ``approval_expired`` event per task. The periodic job
    (``clawboo.approval-expiry``, ``reconcile --approvals``); idempotent, safe in
    several processes (each row is locked and re-read before it changes)."""
    at = at or now()
    cutoff = at - ttl()

    def run() -> list[str]:
        qs = Task.objects.filter(
            approval_state=ApprovalState.REQUIRED, approval_at__lt=cutoff
        ).order_by("approval_at", "id")
        if connection.features.has_select_for_update:
            qs = qs.select_for_update(skip_locked=True)
        expired = []
        for task in qs[:500]:
            task.approval_state = ApprovalState.EXPIRED
            task.approval_reason = "nobody answered in time"
            task.approval_at = at
            commit_change(
                task,
                "approval_expired",
                prev_status=task.status,
                fields={"approval_state", "approval_reason", "approval_at"},
                at=at,
            )
            expired.append(task.id)
        return expired

    return storage.write(run)


def record_required(task: Task) -> None:
    """The ``approval_required`` event of a task an edit sent back (in the caller's
    write): what the notifications listen to."""
    record_event(task, "approval_required", prev_status=task.status)
