"""Tasks: create, read, transition, field writes, lifecycle verbs with verdicts,
verification, comments. Every write runs in :func:`clawboo.storage.write`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from board import checks
from board.errors import (
    DepthExceeded,
    IllegalTransition,
    RootRateLimited,
    TaskIdTaken,
    TaskNotFound,
    TooManyChildren,
    VerificationRequired,
)
from board.models import PROMOTABLE_VERDICTS, Task, TaskComment, TaskDep, Verdict
from board.store._base import commit_change, lock_task, now, record_event
from board.store.tickets import Ticket, WriteOutcome, WriteToken, declined, recorded, unchanged
from board.transitions import (
    HELD_BY_CLAIM,
    Status,
    allowed_transitions_from,
    is_locked,
    is_terminal,
    is_transition_allowed,
)
from clawboo import storage
from clawboo.errors import Conflict, ValidationFailed
from clawboo.models import Team

# SPEC §10 ceilings (the agent create path; see create_task).
MAX_DEPTH = 2
MAX_LIVE_CHILDREN = 24
ROOT_RATE_LIMIT = 30
ROOT_RATE_WINDOW = dt.timedelta(milliseconds=300_000)
EVIDENCE_TAIL = 4_000
DEFAULT_TEAM = "default"


# --- reads -------------------------------------------------------------------


def get_task(task_id: str) -> Task:
    try:
        return Task.objects.get(pk=task_id)
    except Task.DoesNotExist:
        raise TaskNotFound(task_id) from None


def find_task(task_id: str) -> Task | None:
    return Task.objects.filter(pk=task_id).first()


def unmet_dependency() -> Exists:
    """True for a task with at least one dependency that is not done: the definition
    ``Task.unmet_deps`` counts, kept for checking the counter against the graph."""
    return Exists(
        TaskDep.objects.filter(task_id=OuterRef("pk")).exclude(depends_on__status=Status.DONE)
    )


def ready_filter() -> Q:
    """The ready predicate, declared once: todo, not dropped, every dependency done.

    "Every dependency done" is the counter ``unmet_deps == 0``, which the data layer
    keeps in the same transactions that change the graph or finish a task. The claim
    SQL embeds the queryset built from this, so listing and claiming agree.
    """
    return Q(status=Status.TODO, dropped=False, unmet_deps=0)


_DEPENDENTS_DONE_SQL = (
    f"UPDATE {Task._meta.db_table} SET unmet_deps = unmet_deps - 1 "  # noqa: S608
    f"WHERE id IN (SELECT task_id FROM {TaskDep._meta.db_table} WHERE depends_on_task_id = %s)"
)


def _dependency_done(task_id: str) -> None:
    """A task reached done (terminal): each direct dependent waits on one fewer."""
    with connection.cursor() as cursor:
        cursor.execute(_DEPENDENTS_DONE_SQL, [task_id])


def with_label(qs: QuerySet[Task], label: str) -> QuerySet[Task]:
    table = Task._meta.db_table
    if connection.vendor == "postgresql":
        sql = f'"{table}"."labels" @> %s::jsonb'  # noqa: S608 - table name only
        param: Any = json.dumps([label])
    else:
        sql = f'EXISTS (SELECT 1 FROM json_each("{table}"."labels") WHERE value = %s)'  # noqa: S608
        param = label
    return qs.annotate(
        _has_label=RawSQL(  # noqa: S611 - label is a bound parameter
            sql, [param], output_field=BooleanField()
        )
    ).filter(_has_label=True)


def list_tasks(
    *,
    team: str | list[str] | None = None,
    status: str | None = None,
    assignee: str | None = None,
    label: str | None = None,
    parent: str | None = None,
    ready: bool = False,
) -> QuerySet[Task]:
    """Tasks by filter; ready ones ordered priority desc, then newest first."""
    qs = Task.objects.all()
    if team is not None:
        qs = qs.filter(team_id__in=team) if isinstance(team, list) else qs.filter(team_id=team)
    if status is not None:
        qs = qs.filter(status=checks.check_status(status, "status"))
    if assignee is not None:
        qs = qs.filter(assignee_agent_id=assignee)
    if parent is not None:
        qs = qs.filter(parent_task_id=parent)
    if label is not None:
        qs = with_label(qs, label)
    if ready:
        qs = qs.filter(ready_filter())
    return qs.order_by("-priority", "-created_at", "id")


def ready_tasks(team: str | None = None) -> QuerySet[Task]:
    return list_tasks(team=team, ready=True)


def depends_on_map(task_ids: list[str]) -> dict[str, list[str]]:
    deps: dict[str, list[str]] = {tid: [] for tid in task_ids}
    for task_id, dep in TaskDep.objects.filter(task_id__in=task_ids).values_list(
        "task_id", "depends_on_id"
    ):
        deps[task_id].append(dep)
    return deps


# --- create ------------------------------------------------------------------


@dataclass(frozen=True)
class Created:
    task: Task
    created: bool  # False: an identical create with this client id already existed


def _fingerprint(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


def create_task(
    *,
    title: Any,
    team: Any = DEFAULT_TEAM,
    description: Any = "",
    goal: Any = "",
    context: Any = "",
    status: Any = None,
    priority: Any = 0,
    labels: Any = None,
    metadata: Any = None,
    input: Any = None,  # noqa: A002 - the seed's field name
    parent_task_id: Any = None,
    file_mutating: Any = True,
    max_attempts: Any = None,
    id: Any = None,  # noqa: A002 - the API's field name
    depends_on: Any = None,
    created_by_agent_id: Any = None,
    scheduled_by: Any = "manual",
) -> Created:
    """Create a task (``todo`` by default, or ``backlog``).

    Ceilings (checked inside the write transaction, so concurrent creates cannot
    overrun them): with a parent, the parent's depth must be < 2 and it may have at
    most 24 live children; a root create naming ``created_by_agent_id`` is limited
    to 30 per team per rolling 5 minutes. Operators creating roots by hand are not.
    """
    clean: dict[str, Any] = {
        "title": checks.check_title(title),
        "team": checks.check_id(team if team is not None else DEFAULT_TEAM, "team"),
        "description": checks.check_text(description, "description"),
        "goal": checks.check_text(goal, "goal"),
        "context": checks.check_text(context, "context"),
        "status": checks.check_create_status(status),
        "priority": checks.check_priority(0 if priority is None else priority),
        "labels": checks.check_labels(labels),
        "metadata": checks.check_object(metadata, "metadata"),
        "input": input,
        "parent_task_id": None
        if parent_task_id is None
        else checks.check_id(parent_task_id, "parent_task_id"),
        "file_mutating": _check_bool(file_mutating, "file_mutating"),
        "max_attempts": checks.check_max_attempts(max_attempts),
        "depends_on": checks.check_id_list(depends_on, "depends_on"),
        "created_by_agent_id": None
        if created_by_agent_id is None
        else checks.check_agent_id(created_by_agent_id, "created_by_agent_id"),
        "scheduled_by": checks.check_text(scheduled_by or "manual", "scheduled_by", limit=32),
    }
    task_id = checks.check_id(id) if id is not None else None
    fingerprint = _fingerprint(clean)
    return storage.write(_create, task_id, clean, fingerprint)


def _check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed(field, "must be true or false")
    return value


def _create(task_id: str | None, clean: dict[str, Any], fingerprint: str) -> Created:
    if task_id is not None:
        existing = Task.objects.filter(pk=task_id).first()
        if existing is not None:
            if existing.create_fingerprint == fingerprint:
                return Created(existing, created=False)
            raise TaskIdTaken(task_id)
    if not Team.objects.filter(pk=clean["team"]).exists():
        raise ValidationFailed("team", f"no team {clean['team']!r}")
    at = now()
    parent_id = clean["parent_task_id"]
    if parent_id is not None:
        _check_parent_ceilings(parent_id)
    elif clean["created_by_agent_id"] is not None:
        _check_root_rate(clean["team"], at)
    deps = clean["depends_on"]
    unmet = 0
    if deps:
        found = dict(Task.objects.filter(pk__in=deps).values_list("id", "status"))
        missing = [d for d in deps if d not in found]
        if missing:
            raise ValidationFailed("depends_on", f"no task {missing[0]!r}")
        unmet = sum(1 for d in deps if found[d] != Status.DONE)
    task = Task.objects.create(
        id=task_id or secrets.token_hex(10),
        team_id=clean["team"],
        title=clean["title"],
        description=clean["description"],
        goal=clean["goal"],
        context=clean["context"],
        status=clean["status"],
        priority=clean["priority"],
        labels=clean["labels"],
        metadata=clean["metadata"],
        input=clean["input"],
        parent_task_id=parent_id,
        file_mutating=clean["file_mutating"],
        max_attempts=clean["max_attempts"],
        created_by_agent_id=clean["created_by_agent_id"],
        scheduled_by=clean["scheduled_by"],
        incarnation_id=secrets.token_hex(8),
        unmet_deps=unmet,
        create_fingerprint=fingerprint,
        revision=1,
        created_at=at,
        updated_at=at,
    )
    if deps:
        TaskDep.objects.bulk_create(
            [TaskDep(task_id=task.id, depends_on_id=d, created_at=at) for d in deps]
        )
    record_event(task, "added", prev_status=None)
    return Created(task, created=True)


def ancestors(task_id: str) -> list[str]:
    """The parent chain of a task, nearest first (recursive query, validated)."""
    from board.store.deps import ancestor_ids

    return ancestor_ids(task_id)


def _check_parent_ceilings(parent_id: str) -> None:
    try:
        lock_task(parent_id)  # serialises concurrent creates under one parent
    except TaskNotFound:
        raise ValidationFailed("parent_task_id", f"no task {parent_id!r}") from None
    depth = len(ancestors(parent_id))
    if depth >= MAX_DEPTH:
        raise DepthExceeded(
            f"parent {parent_id!r} is at depth {depth}; tasks nest at most {MAX_DEPTH} deep",
            depth=depth,
            max_depth=MAX_DEPTH,
        )
    live = (
        Task.objects.filter(parent_task_id=parent_id, dropped=False)
        .exclude(status__in=(Status.DONE, Status.CANCELLED))
        .count()
    )
    if live >= MAX_LIVE_CHILDREN:
        raise TooManyChildren(
            f"parent {parent_id!r} already has {live} live children (max {MAX_LIVE_CHILDREN})",
            limit=MAX_LIVE_CHILDREN,
        )


def _check_root_rate(team_id: str, at: dt.datetime) -> None:
    if connection.features.has_select_for_update:
        # Serialise agent root creates per team so two racers cannot both see 29.
        list(Team.objects.select_for_update().filter(pk=team_id).values_list("pk"))
    recent = Task.objects.filter(
        team_id=team_id,
        parent_task__isnull=True,
        created_by_agent_id__isnull=False,
        created_at__gt=at - ROOT_RATE_WINDOW,
    ).count()
    if recent >= ROOT_RATE_LIMIT:
        raise RootRateLimited(
            f"team {team_id!r} had {recent} agent-created root tasks in the last 5 minutes "
            f"(max {ROOT_RATE_LIMIT})",
            limit=ROOT_RATE_LIMIT,
        )


# --- transitions -------------------------------------------------------------

_KIND_BY_TARGET: dict[str, str] = {
    Status.DONE: "completed",
    Status.CANCELLED: "cancelled",
    Status.BLOCKED: "blocked",
    Status.IN_REVIEW: "review_requested",
    Status.BACKLOG: "status_changed",
}


def _transition_kind(prev: str, to: str) -> str:
    if to == Status.TODO:
        back_to_todo: dict[str, str] = {Status.IN_PROGRESS: "released", Status.BLOCKED: "unblocked"}
        return back_to_todo.get(prev, "status_changed")
    if to == Status.IN_PROGRESS:
        return "resumed" if prev in (Status.IN_REVIEW, Status.BLOCKED) else "status_changed"
    return _KIND_BY_TARGET.get(to, "status_changed")


def _check_override(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationFailed("human_override", "must be an object {by, reason}")
    by, reason = value.get("by"), value.get("reason")
    if not isinstance(by, str) or not by.strip() or len(by) > 200:
        raise ValidationFailed("human_override", "names who overrides in 'by'")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > checks.TEXT_MAX:
        raise ValidationFailed("human_override", "gives a 'reason'")
    return {"by": by.strip(), "reason": reason.strip()}


def _apply_move(
    task: Task, to: str, *, override: dict[str, str] | None, at: dt.datetime
) -> set[str]:
    """Apply the side rules of a legal move; return the fields changed.

    The verification gate lives here, so every path to ``done`` passes it.
    """
    prev = task.status
    fields = {"status"}
    if to == Status.DONE:
        if task.verdict is not None and task.verdict not in PROMOTABLE_VERDICTS:
            if override is None:
                raise VerificationRequired(
                    f"task {task.id!r} carries a {task.verdict!r} verdict; a human override "
                    "is needed to mark it done",
                    verdict=task.verdict,
                )
            task.human_override = {**override, "at": at.isoformat(), "verdict": task.verdict}
            fields.add("human_override")
            _add_comment_row(
                task,
                override["by"],
                f"Human override of a {task.verdict!r} verification verdict: {override['reason']}",
                at,
            )
            record_event(task, "verification_overridden", prev_status=prev)
        task.completed_at = at
        fields.add("completed_at")
        if prev != Status.DONE:
            _dependency_done(task.id)
    if prev == Status.IN_PROGRESS and to == Status.TODO:
        # Release: a cross-runtime rebind boundary (seed 000).
        _clear_claim(task)
        _clear_verdict(task)
        fields |= _CLAIM_FIELDS | _VERDICT_FIELDS
    if to in (Status.DONE, Status.CANCELLED, Status.BLOCKED, Status.IN_REVIEW, Status.TODO):
        task.lease_until = None
        fields.add("lease_until")
    if prev == Status.BLOCKED and to in (Status.TODO, Status.IN_PROGRESS):
        task.error = None
        fields.add("error")
    task.status = to
    return fields


_CLAIM_FIELDS = {"assignee_agent_id", "assignee_runtime", "lease_until"}
_VERDICT_FIELDS = {"verdict", "verdict_evidence", "verdict_at", "human_override"}


def _clear_claim(task: Task) -> None:
    task.assignee_agent_id = None
    task.assignee_runtime = None
    task.lease_until = None


def _clear_verdict(task: Task) -> None:
    task.verdict = None
    task.verdict_evidence = None
    task.verdict_at = None
    task.human_override = None


def transition(task_id: str, to: Any, *, human_override: Any = None) -> Task:
    """Move a task to ``to``, checked against the freshly read row in the write
    transaction. Same-status is a no-op; illegal raises :class:`IllegalTransition`."""
    target = checks.check_status(to)
    override = _check_override(human_override)

    def run() -> Task:
        task = lock_task(task_id)
        prev = task.status
        if prev == target:
            return task
        if not is_transition_allowed(prev, target):
            raise IllegalTransition(task.id, prev, target, allowed_transitions_from(prev))
        at = now()
        fields = _apply_move(task, target, override=override, at=at)
        if prev == Status.IN_PROGRESS and target in (Status.TODO, Status.CANCELLED):
            from board.store.executions import close_running

            close_running(task, "cancelled", error=f"moved to {target}", at=at)
        return commit_change(
            task, _transition_kind(prev, target), prev_status=prev, fields=fields, at=at
        )

    return storage.write(run)


# --- lifecycle verbs with verdicts (seed 001) ----------------------------------


@dataclass(frozen=True)
class Guards:
    ticket: Ticket | None = None
    if_allowed: bool = False
    refuse_when_parked: bool = False


def _guards(ticket: Any, if_allowed: Any, refuse_when_parked: Any) -> Guards:
    return Guards(
        ticket=None if ticket is None else Ticket.decode(ticket),
        if_allowed=_check_bool(if_allowed, "if_allowed"),
        refuse_when_parked=_check_bool(refuse_when_parked, "refuse_when_parked"),
    )


def decline_reason(
    task: Task,
    *,
    target: str,
    sources: frozenset[str] | None,
    guards: Guards,
    at: dt.datetime,
    always_terminal: bool = False,
) -> str | None:
    """The first decline reason that holds, in the contract's precedence order.

    ``sources`` narrows a verb that owns one edge (``unblock`` only from blocked);
    None means "whatever the transition table allows".
    """
    status = task.status
    if (guards.if_allowed or always_terminal) and is_terminal(status):
        # Also for a repeat of the same settlement: it may not clobber the first.
        return "terminal"
    ticket = guards.ticket
    if ticket is not None and (
        ticket.task_id != task.id or ticket.incarnation_id != task.incarnation_id
    ):
        return "not-my-task"
    if guards.if_allowed and not _verb_allowed(status, target, sources):
        return "disallowed"
    if guards.refuse_when_parked and status == Status.IN_REVIEW:
        return "parked"
    if ticket is not None and (
        ticket.attempt != task.attempts
        or status not in HELD_BY_CLAIM
        or (status == Status.IN_PROGRESS and task.lease_until is not None and task.lease_until < at)
    ):
        return "lost-claim"
    return None


def _verb_allowed(status: str, target: str, sources: frozenset[str] | None) -> bool:
    if sources is not None and status not in sources:
        return False
    return is_transition_allowed(status, target)


def _lifecycle(
    task_id: str,
    *,
    target: str | Callable[[Task], str],
    sources: frozenset[str] | None,
    guards: Guards,
    kind: str | Callable[[Task, str], str],
    mutate: Callable[[Task, dt.datetime], set[str]] | None = None,
    write: WriteToken | None = None,
    override: dict[str, str] | None = None,
    always_terminal: bool = False,
    after: Callable[[Task, str, dt.datetime], None] | None = None,
) -> WriteOutcome:
    def run() -> WriteOutcome:
        task = lock_task(task_id)
        at = now()
        to = target(task) if callable(target) else target
        reason = decline_reason(
            task, target=to, sources=sources, guards=guards, at=at, always_terminal=always_terminal
        )
        if reason is not None:
            return declined(task, reason)
        prev = task.status
        # A verb that owns one edge runs only from that edge's source (seed 001),
        # even when the target equals the current status: unblock on a todo task or
        # resume_from_review on an in_progress one is refused, not a silent no-op
        # (the latter used to push the lease out as if it were a renewal).
        if not _verb_allowed(prev, to, sources):
            raise IllegalTransition(task.id, prev, to, allowed_transitions_from(prev))
        fields: set[str] = set()
        if prev != to:
            fields |= _apply_move(task, to, override=override, at=at)
        if mutate is not None:
            fields |= mutate(task, at)
        if not fields:
            return unchanged(task)
        if after is not None:
            after(task, prev, at)
        token = {"id": write.id} if write is not None else None
        event_kind = kind(task, prev) if callable(kind) else kind
        commit_change(task, event_kind, prev_status=prev, fields=fields, write_token=token, at=at)
        return recorded(task)

    return storage.write(run)


def _set(task: Task, **values: Any) -> set[str]:
    changed = set()
    for name, value in values.items():
        if getattr(task, name) != value:
            setattr(task, name, value)
            changed.add(name)
    return changed


def complete(
    task_id: str,
    output: Any = None,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    human_override: Any = None,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """Settle a task ``done`` with ``output`` (passes the verification gate)."""
    guards = _guards(ticket, if_allowed, refuse_when_parked)
    override = _check_override(human_override)

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        return _set(task, output=output, lease_until=None)

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "succeeded", None, at)

    return _lifecycle(
        task_id,
        target=Status.DONE,
        sources=frozenset({Status.IN_PROGRESS, Status.IN_REVIEW, Status.DONE}),
        guards=guards,
        kind="completed",
        mutate=mutate,
        write=write,
        override=override,
        after=after,
    )


def _close_run(task: Task, prev: str, outcome: str, error: str | None, at: dt.datetime) -> None:
    if prev == Status.IN_PROGRESS:
        from board.store.executions import close_running

        close_running(task, outcome, error=error, at=at)


def fail(
    task_id: str,
    error: Any,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """Soft fail (``attempts < max_attempts``, from in_progress) → ``todo`` with the
    error as feedback; otherwise hard fail → ``blocked`` with ``error`` set and the
    pending transitive dependents cancelled."""
    message = checks.check_text(error, "error", required=True)
    guards = _guards(ticket, if_allowed, refuse_when_parked)

    def soft(task: Task) -> bool:
        return (
            task.status == Status.IN_PROGRESS
            and task.max_attempts is not None
            and task.attempts < task.max_attempts
        )

    def target(task: Task) -> str:
        return Status.TODO if soft(task) else Status.BLOCKED

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        if task.status == Status.TODO:
            return _set(task, feedback=message)
        return _set(task, error=message)

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "failed", message, at)
        if task.status == Status.BLOCKED:
            from board.store.deps import cascade_cancel

            cascade_cancel(task.id, at=at)

    return _lifecycle(
        task_id,
        target=target,
        sources=frozenset({Status.IN_PROGRESS, Status.IN_REVIEW}),
        guards=guards,
        kind=lambda task, prev: "retried" if task.status == Status.TODO else "errored",
        mutate=mutate,
        write=write,
        after=after,
    )


def block(
    task_id: str,
    reason: Any = None,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    note = checks.check_text(reason, "reason") or None

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        return _set(task, feedback=note) if note else set()

    return _lifecycle(
        task_id,
        target=Status.BLOCKED,
        sources=None,
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="blocked",
        mutate=mutate,
        write=write,
    )


def unblock(
    task_id: str,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """blocked → todo; refuses every other status (raises, or declines ``disallowed``)."""
    return _lifecycle(
        task_id,
        target=Status.TODO,
        sources=frozenset({Status.BLOCKED}),
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="unblocked",
        write=write,
    )


def await_review(
    task_id: str,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """in_progress → in_review: park the task for a person; its lease stops mattering."""
    return _lifecycle(
        task_id,
        target=Status.IN_REVIEW,
        sources=frozenset({Status.IN_PROGRESS}),
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="review_requested",
        write=write,
    )


def resume_from_review(
    task_id: str,
    feedback: Any = None,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """in_review → in_progress with optional feedback, on a fresh lease of the
    span its claim was granted."""
    note = checks.check_text(feedback, "feedback") or None

    def mutate(task: Task, at: dt.datetime) -> set[str]:
        span = task.lease_duration_ms or checks.DEFAULT_LEASE_MS
        changed = _set(task, lease_until=at + dt.timedelta(milliseconds=span))
        if note:
            changed |= _set(task, feedback=note)
        return changed

    return _lifecycle(
        task_id,
        target=Status.IN_PROGRESS,
        sources=frozenset({Status.IN_REVIEW}),
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="resumed",
        mutate=mutate,
        write=write,
    )


def cancel(
    task_id: str,
    *,
    ticket: Any = None,
    if_allowed: Any = False,
    refuse_when_parked: Any = False,
    write: WriteToken | None = None,
) -> WriteOutcome:
    """Cancel; always advisory on a settled task (declines ``terminal``)."""

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "cancelled", "cancelled", at)

    return _lifecycle(
        task_id,
        target=Status.CANCELLED,
        sources=None,
        guards=_guards(ticket, if_allowed, refuse_when_parked),
        kind="cancelled",
        write=write,
        always_terminal=True,
        after=after,
    )


def release(task_id: str, *, ticket: Any = None, write: WriteToken | None = None) -> WriteOutcome:
    """in_progress → todo: clears assignee, runtime, lease and verdict for a re-claim."""

    def after(task: Task, prev: str, at: dt.datetime) -> None:
        _close_run(task, prev, "cancelled", "released", at)

    return _lifecycle(
        task_id,
        target=Status.TODO,
        sources=frozenset({Status.IN_PROGRESS}),
        guards=_guards(ticket, False, False),
        kind="released",
        write=write,
        after=after,
    )


# --- field writes ------------------------------------------------------------


def _field_write(
    task_id: str,
    kind: str,
    mutate: Callable[[Task], set[str]],
    refuse: Callable[[Task], str | None] | None = None,
) -> WriteOutcome:
    def run() -> WriteOutcome:
        task = lock_task(task_id)
        if refuse is not None:
            reason = refuse(task)
            if reason is not None:
                return declined(task, reason)
        fields = mutate(task)
        if not fields:
            return unchanged(task)
        commit_change(task, kind, prev_status=task.status, fields=fields)
        return recorded(task)

    return storage.write(run)


def set_scheduled_by(task_id: str, owner: str, *, expect: str | None = None) -> Task:
    """Stamp the task's firing owner (``tasks.scheduled_by``): ``manual``, ``clawboo``, …

    Locks the row (:func:`lock_task`); with ``expect``, refuses with
    :class:`Conflict` when the current owner differs, so a caller that checked the
    owner earlier cannot overwrite a concurrent registration. Safe inside an outer
    write (``storage.write`` nests as a savepoint), which is how a routine
    registration stamps its bound task in its own transaction. A same-owner write
    changes nothing (no revision bump, no event).
    """
    owner = checks.check_id(owner, "scheduled_by")

    def run() -> Task:
        task = lock_task(task_id)
        if expect is not None and task.scheduled_by != expect:
            raise Conflict(
                f"task {task_id!r} is scheduled by {task.scheduled_by!r}, not {expect!r}",
                task_id=task_id,
                owner=task.scheduled_by,
            )
        if task.scheduled_by == owner:
            return task
        task.scheduled_by = owner
        return commit_change(
            task, "metadata_changed", prev_status=task.status, fields={"scheduled_by"}
        )

    return storage.write(run)


def _assignee_refusal(task: Task) -> str | None:
    if is_locked(task.status):
        return "immutable-assignee"
    if is_terminal(task.status):
        return "terminal"
    return None


def set_assignee(task_id: str, agent_id: Any) -> WriteOutcome:
    """Declines ``immutable-assignee`` on a locked task and ``terminal`` on a settled one."""
    value = None if agent_id is None else checks.check_agent_id(agent_id, "assignee_agent_id")
    return _field_write(
        task_id,
        "assignee_changed",
        lambda t: _set(t, assignee_agent_id=value),
        refuse=_assignee_refusal,
    )


def set_priority(task_id: str, priority: Any) -> WriteOutcome:
    value = checks.check_priority(priority)
    return _field_write(task_id, "priority_changed", lambda t: _set(t, priority=value))


def set_labels(task_id: str, labels: Any) -> WriteOutcome:
    value = checks.check_labels(labels)
    return _field_write(task_id, "label_changed", lambda t: _set(t, labels=value))


def add_label(task_id: str, label: Any) -> WriteOutcome:
    value = checks.check_label(label)
    return _field_write(
        task_id,
        "label_changed",
        lambda t: set() if value in t.labels else _set(t, labels=[*t.labels, value]),
    )


def remove_label(task_id: str, label: Any) -> WriteOutcome:
    value = checks.check_label(label)
    return _field_write(
        task_id,
        "label_changed",
        lambda t: (
            _set(t, labels=[x for x in t.labels if x != value]) if value in t.labels else set()
        ),
    )


def patch_metadata(task_id: str, patch: Any) -> WriteOutcome:
    """Merges ``patch`` (keys set to null are removed); always ``recorded``, as seed 001 says."""
    value = checks.check_object(patch, "metadata")

    def mutate(task: Task) -> set[str]:
        merged = dict(task.metadata or {})
        for key, item in value.items():
            if item is None:
                merged.pop(key, None)
            else:
                merged[key] = item
        task.metadata = merged
        return {"metadata"}

    return _field_write(task_id, "metadata_changed", mutate)


_EDITABLE = ("title", "description", "priority", "labels", "metadata", "assignee_agent_id")


def update_task(task_id: str, changes: dict[str, Any]) -> Task:
    """The API's PATCH: several field writes in one transaction.

    Unlike the advisory field writes, a refused assignee change raises
    :class:`Conflict` (the caller asked for exactly this change).
    """
    checks.unknown_keys(changes, _EDITABLE, "a task update")
    clean: dict[str, Any] = {}
    if "title" in changes:
        clean["title"] = checks.check_title(changes["title"])
    if "description" in changes:
        clean["description"] = checks.check_text(changes["description"], "description")
    if "priority" in changes:
        clean["priority"] = checks.check_priority(changes["priority"])
    if "labels" in changes:
        clean["labels"] = checks.check_labels(changes["labels"])
    if "metadata" in changes:
        clean["metadata"] = checks.check_object(changes["metadata"], "metadata")
    if "assignee_agent_id" in changes:
        value = changes["assignee_agent_id"]
        clean["assignee_agent_id"] = (
            None if value is None else checks.check_agent_id(value, "assignee_agent_id")
        )

    def run() -> Task:
        task = lock_task(task_id)
        if "assignee_agent_id" in clean and clean["assignee_agent_id"] != task.assignee_agent_id:
            reason = _assignee_refusal(task)
            if reason is not None:
                raise Conflict(
                    f"the assignee of a {task.status} task cannot change",
                    reason=reason,
                    status=task.status,
                )
        kinds = []
        fields: set[str] = set()
        for name, value in clean.items():
            if getattr(task, name) != value:
                setattr(task, name, value)
                fields.add(name)
                kinds.append(_FIELD_KIND[name])
        if not fields:
            return task
        kind = kinds[0] if len(set(kinds)) == 1 else "updated"
        return commit_change(task, kind, prev_status=task.status, fields=fields)

    return storage.write(run)


_FIELD_KIND = {
    "title": "updated",
    "description": "updated",
    "priority": "priority_changed",
    "labels": "label_changed",
    "metadata": "metadata_changed",
    "assignee_agent_id": "assignee_changed",
}


# --- verification ------------------------------------------------------------


def set_verdict(task_id: str, verdict: Any, evidence: Any = None) -> Task:
    """Store a verification verdict with its evidence (the last 4,000 characters)."""
    if verdict not in Verdict.values:
        raise ValidationFailed("verdict", f"must be one of {', '.join(Verdict.values)}")
    if evidence is not None and not isinstance(evidence, str):
        raise ValidationFailed("evidence", "must be a string")
    tail = (evidence or "")[-EVIDENCE_TAIL:]

    def run() -> Task:
        task = lock_task(task_id)
        if is_terminal(task.status):
            raise Conflict(
                f"task {task_id!r} is {task.status}; its verdict is final", status=task.status
            )
        at = now()
        task.verdict, task.verdict_evidence, task.verdict_at = str(verdict), tail, at
        return commit_change(
            task,
            "verification_recorded",
            prev_status=task.status,
            fields={"verdict", "verdict_evidence", "verdict_at"},
            at=at,
        )

    return storage.write(run)


# --- comments ----------------------------------------------------------------


def _add_comment_row(task: Task, author: str, body: str, at: dt.datetime) -> TaskComment:
    return TaskComment.objects.create(task=task, author=author, body=body, created_at=at)


def add_comment(task_id: str, body: Any, author: Any) -> TaskComment:
    text = checks.check_text(body, "body", required=True)
    who = checks.check_text(author, "author", limit=200, required=True)

    def run() -> TaskComment:
        task = lock_task(task_id)
        comment = _add_comment_row(task, who, text, now())
        record_event(task, "commented", prev_status=task.status)
        return comment

    return storage.write(run)


def list_comments(task_id: str) -> QuerySet[TaskComment]:
    get_task(task_id)
    return TaskComment.objects.filter(task_id=task_id).order_by("created_at", "id")


def set_worktree_refs(task_id: str, worktree_ref: str | None, branch_ref: str | None) -> Task:
    """Point the task at its checkout (called by the worktrees app)."""

    def run() -> Task:
        task = lock_task(task_id)
        fields = _set(task, worktree_ref=worktree_ref, branch_ref=branch_ref)
        if not fields:
            return task
        return commit_change(task, "metadata_changed", prev_status=task.status, fields=fields)

    return storage.write(run)


def drop_task(task_id: str) -> Task:
    """Soft-delete: a dropped task is never ready or claimable."""

    def run() -> Task:
        task = lock_task(task_id)
        if task.dropped:
            return task
        task.dropped = True
        return commit_change(task, "metadata_changed", prev_status=task.status, fields={"dropped"})

    return storage.write(run)


def is_assigned_to(task: Task, agent_id: str) -> bool:
    return task.assignee_agent_id == agent_id
