"""Tasks: create, read, transition, field writes, lifecycle verbs with verdicts,
verification, comments. Every write runs in :func:`core.storage.write`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Count, Q, QuerySet

from board import ceilings, checks, judgement
from board.errors import (
    ApprovalRequired,
    DepthExceeded,
    RootRateLimited,
    TaskIdTaken,
    TaskNotFound,
    TooManyChildren,
)
from board.models import ApprovalState, Task, TaskDep, Verdict
from board.scope import check_touches
from board.store import approvals, claims
from board.store._base import commit_change, lock_task, now, record_event
from board.store.deps import ancestor_ids
from board.store.moves import (  # noqa: F401 - check_override is imported from here
    ClaimFor,
    check_override,
    clear_claim,
    clear_verdict,
    kind_of,
    move,
)
from board.store.ready import (  # noqa: F401 - ready_filter is re-exported
    dropped_filter,
    ready_filter,
    status_filter,
    with_label,
)
from board.store.tickets import Ticket
from board.transitions import Status
from core import registry, repositories, storage
from core.errors import ValidationFailed
from core.models import Agent, Runtime, Team

# SPEC §10 ceilings (the agent create path; see create_task).
EVIDENCE_TAIL = checks.field_limit("evidence")
DEFAULT_TEAM = "default"


# --- reads -------------------------------------------------------------------


def get_task(task_id: str) -> Task:
    try:
        return Task.objects.get(pk=task_id)
    except Task.DoesNotExist:
        raise TaskNotFound(task_id) from None


def find_task(task_id: str) -> Task | None:
    return Task.objects.filter(pk=task_id).first()


def find_tasks(task_ids: list[str]) -> dict[str, Task]:
    """The tasks of ``task_ids`` that exist, by id, in one query."""
    return {task.id: task for task in Task.objects.filter(pk__in=task_ids)}


# The verdict filter's word for "no verdict stored" (unverified).
UNVERIFIED = "none"
# Its word for ``fail (none configured)``: nothing was set up to verify the work, which
# its builder cannot fix. The card says "no verify command", not "verify failed", and
# ``fail`` leaves these out, so "Failed" lists only work a verify command turned down.
UNCONFIGURED = "unconfigured"
VERDICT_FILTERS = (*Verdict.values, UNVERIFIED, UNCONFIGURED)
SEARCH_MAX = 200


# The routine whose fire a task is (routines.fire files it in the task's metadata).
FIRED_BY = "metadata__routine_id"


def list_tasks(
    *,
    team: str | list[str] | None = None,
    status: str | None = None,
    assignee: str | None = None,
    label: str | None = None,
    parent: str | None = None,
    ready: bool = False,
    verdict: str | None = None,
    text: str | None = None,
    routine: str | list[str] | None = None,
    dropped: bool | None = None,
) -> QuerySet[Task]:
    """Tasks by filter, in the board's order: priority desc, then newest first.

    ``verdict`` is a stored verdict or ``"none"`` (unverified); ``text`` matches the
    title or description (case-insensitive) or the exact id; ``routine`` keeps the
    fires of a routine (or of any of a list), by the id each fire carries in
    ``metadata.routine_id`` (:data:`FIRED_BY`); ``dropped`` False leaves soft-deleted
    tasks out.
    """
    qs = Task.objects.all()
    if team is not None:
        qs = qs.filter(team_id__in=team) if isinstance(team, list) else qs.filter(team_id=team)
    if status is not None:
        qs = qs.filter(status_filter(checks.check_status(status, "status")))
    if assignee is not None:
        qs = qs.filter(assignee_agent_id=assignee)
    if parent is not None:
        qs = qs.filter(parent_task_id=parent)
    if label is not None:
        qs = with_label(qs, label)
    if ready:
        qs = qs.filter(ready_filter())
    if verdict is not None:
        qs = qs.filter(verdict_filter(checks.check_choice(verdict, "verdict", VERDICT_FILTERS)))
    words = checks.check_text(text, "q", limit=SEARCH_MAX).strip()
    if words:
        qs = qs.filter(Q(title__icontains=words) | Q(description__icontains=words) | Q(pk=words))
    if routine is not None:
        many = isinstance(routine, list)
        qs = qs.filter(**{f"{FIRED_BY}__in" if many else FIRED_BY: routine})
    if dropped is not None:
        qs = qs.filter(dropped_filter(dropped))
    return qs.order_by("-priority", "-created_at", "id")


def verdict_filter(verdict: str) -> Q:
    """The rows a verdict filter (one of ``VERDICT_FILTERS``) lists."""
    unconfigured = Q(verdict=Verdict.FAIL, verdict_evidence=judgement.NONE_CONFIGURED)
    if verdict == UNVERIFIED:
        return Q(verdict__isnull=True)
    if verdict == UNCONFIGURED:
        return unconfigured
    if verdict == Verdict.FAIL:
        return Q(verdict=Verdict.FAIL) & ~unconfigured
    return Q(verdict=verdict)


def count_by_status(qs: QuerySet[Task]) -> dict[str, int]:
    """How many of ``qs`` sit in each status (every status named, zeros included):
    one GROUP BY, which the board's column index answers without reading a row."""
    counts = {str(status): 0 for status in Status}
    for status, count in qs.order_by().values_list("status").annotate(count=Count("pk")):
        counts[status] = count
    return counts


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
    repository: Any = None,
    max_run_cents: Any = None,
    approval_required: Any = False,
    route: Any = None,
    touches: Any = None,
    actor: str | None = None,
    agent_side: bool = False,
    registered: bool = False,
) -> Created:
    """Create a task (``todo`` by default, or ``backlog``). ``actor`` names the
    authenticated user who asked, for the narration (not part of the request's
    identity: a retried create by someone else is still the same create).

    ``repository`` names a registered repository of the team by id; without it, a
    ``metadata.repo_path`` must be exactly the path of one (and links the task to
    it): a path is never taken from a body (:mod:`core.repositories`). Naming
    neither, a subtask works in its parent's repository.

    Ceilings (checked inside the write transaction, so concurrent creates cannot
    overrun them): with a parent, the parent's depth must be < 2 and it may have at
    most 24 live children; a root create naming ``created_by_agent_id`` is limited
    to 30 per team per rolling 5 minutes. Operators creating roots by hand are not.

    The task waits for a person's approval (:mod:`board.store.approvals`) when an
    agent creates it, it is labelled ``risk``, its team requires approval, or the
    caller says so (``approval_required``: a routine whose template asks for it).

    ``touches`` (repository-relative path globs, :mod:`board.scope`) is the task's
    scope: no claim starts it while a task of its repository whose scope overlaps
    it is in progress or waiting to land.

    ``agent_side``: an agent's key, a run's credential or a machine token asked
    (GOVERNANCE §6). Its subtask carries its parent's run ceiling (it may name none),
    and is listed to a run of the parent (MCP ``get_task``),
    so under a parent not yet claimed that has an approval it counts as a comment of
    the agent side does (:func:`board.store.approvals.agent_side_added`).

    ``registered``: the door found ``created_by_agent_id`` in the registry (REST, MCP);
    if it is gone when the write locks its row (deleted meanwhile), the create is
    refused as naming an unknown agent. Store callers without it keep filing as an id
    the registry need not know.
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
        "metadata": checks.check_size(checks.check_object(metadata, "metadata"), "metadata"),
        "input": checks.check_size(checks.check_storable(input, "input"), "input"),
        "parent_task_id": None
        if parent_task_id is None
        else checks.check_id(parent_task_id, "parent_task_id"),
        "file_mutating": check_bool(file_mutating, "file_mutating"),
        "max_attempts": checks.check_max_attempts(max_attempts),
        "depends_on": checks.check_id_list(depends_on, "depends_on"),
        "created_by_agent_id": None
        if created_by_agent_id is None
        else checks.check_agent_id(created_by_agent_id, "created_by_agent_id"),
        "scheduled_by": checks.check_text(scheduled_by or "manual", "scheduled_by", limit=32),
        "max_run_cents": checks.check_max_run_cents(max_run_cents),
        "approval_required": check_bool(approval_required, "approval_required"),
        "route": checks.check_route(route, list(Runtime.values)),
    }
    if repository is not None:
        # Only when given: the fingerprints of creates made before repositories stay.
        clean["repository"] = checks.check_id(repository, "repository")
    if touches is not None:
        # The same: only when given (null and [] alike say "no scope").
        clean["touches"] = check_touches(touches)
    task_id = checks.check_id(id) if id is not None else None
    # A field added later is left out while unset, so a retried create keeps the
    # fingerprint it had before the field existed.
    fingerprint = _fingerprint(
        {k: v for k, v in clean.items() if v is not None or k not in ("max_run_cents", "touches")}
    )
    return storage.write(_create, task_id, clean, fingerprint, actor, agent_side, registered)


def check_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed(field, "must be true or false")
    return value


def _on_parents_branch(metadata: dict[str, Any], parent: Task) -> dict[str, Any]:
    """A subtask working in its parent's repository lands where its parent does: the
    parent's ``base_branch`` (say ``release``), unless the subtask names its own;
    else a person who aimed the work at a branch would find its parts on the default."""
    branch = (parent.metadata or {}).get("base_branch")
    if not branch or metadata.get("base_branch"):
        return metadata
    return {**metadata, "base_branch": branch}


def _create(
    task_id: str | None,
    clean: dict[str, Any],
    fingerprint: str,
    actor: str | None,
    agent_side: bool = False,
    registered: bool = False,
) -> Created:
    if task_id is not None:
        existing = Task.objects.filter(pk=task_id).first()
        if existing is not None:
            if existing.create_fingerprint == fingerprint:
                return Created(existing, created=False)
            raise TaskIdTaken(task_id)
    team_rule = list(
        Team.objects.filter(pk=clean["team"]).values_list("approval_required", flat=True)
    )
    if not team_rule:
        raise ValidationFailed("team", f"no team {clean['team']!r}")
    repository_id = task_repository(clean["team"], clean.get("repository"), clean["metadata"])
    at = now()
    waits = approvals.needs_approval(
        created_by_agent_id=clean["created_by_agent_id"],
        labels=clean["labels"],
        team_requires=team_rule[0],
        routine_requires=clean["approval_required"],
    )
    parent_id = clean["parent_task_id"]
    parent: Task | None = None
    max_run_cents = clean["max_run_cents"]
    if parent_id is not None:
        parent = _check_parent_ceilings(parent_id, clean["team"])
        if repository_id is None:
            repository_id = parent.repository_id  # a subtask works where its parent does
            clean["metadata"] = _on_parents_branch(clean["metadata"], parent)
        if agent_side and max_run_cents is None:
            # The agent side names no ceiling (a people field): a split of a person's
            # capped task would otherwise shed the cap (GOVERNANCE §3, §6).
            max_run_cents = parent.max_run_cents
    elif clean["created_by_agent_id"] is not None:
        _check_root_rate(clean["team"], at)
    check_route_agent(clean["route"], clean["team"])
    check_named_agent(clean["created_by_agent_id"], "created_by_agent_id", registered)
    deps = clean["depends_on"]
    unmet = 0
    if deps:
        # A dependency never crosses teams: another team's task is not found here.
        # Locked (like link() does), so none can finish -- and decrement the counters
        # of dependents it sees -- between this look at its status and our insert of
        # the edge it would not see: that left the counter one too high for good.
        # In id order, so two creates lock a shared pair the same way round.
        found_qs = Task.objects.filter(pk__in=deps, team_id=clean["team"]).order_by("id")
        if connection.features.has_select_for_update:
            found_qs = found_qs.select_for_update()
        found = dict(found_qs.values_list("id", "status"))
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
        repository_id=repository_id,
        max_run_cents=max_run_cents,
        touches=clean.get("touches"),
        scope=clean.get("touches"),
        **route_columns(clean["route"]),
        incarnation_id=secrets.token_hex(8),
        unmet_deps=unmet,
        create_fingerprint=fingerprint,
        revision=1,
        created_at=at,
        updated_at=at,
        approval_state=ApprovalState.REQUIRED if waits else None,
        approval_at=at if waits else None,
    )
    if deps:
        TaskDep.objects.bulk_create(
            [TaskDep(task_id=task.id, depends_on_id=d, created_at=at) for d in deps]
        )
    record_event(task, "added", prev_status=None, actor=actor)
    if agent_side and parent is not None:
        who = clean["created_by_agent_id"] or actor or "the agent side"
        approvals.agent_side_added(parent, who, at, f"given subtask {task.id}")
    return Created(task, created=True)


def task_repository(team_id: str, repository: str | None, metadata: dict[str, Any]) -> str | None:
    """The id of the registered repository a task of ``team_id`` works in: the one
    ``repository`` names (another team's or an unknown id: 400 naming the field),
    else the one whose path ``metadata.repo_path`` is exactly, else None."""
    if repository is not None:
        return repositories.of_team(repository, team_id, "repository").id
    raw = metadata.get("repo_path")
    if raw is None:
        return None
    return repositories.check_named_path(team_id, raw, "metadata.repo_path").id


def route_columns(route: dict[str, Any] | None) -> dict[str, Any]:
    """A clean route (:func:`board.checks.check_route`) as the task's columns."""
    route = route or {}
    return {
        "route_agent_id": route.get("agent"),
        "route_runtime": route.get("runtime"),
        "route_labels": route.get("labels"),
    }


def check_route_agent(route: dict[str, Any] | None, team_id: str) -> None:
    """A route names an agent of the task's own team (another team's: 400), read with
    its row locked (inside the write): an agent deleted at the same time is either
    gone here or counts this route (:func:`core.registry.lock_agent`)."""
    if route is None or route.get("agent") is None:
        return
    agent = registry.lock_agent(route["agent"])
    if agent is None or agent.team_id != team_id:
        raise ValidationFailed("route.agent", f"no agent {route['agent']!r} in team {team_id!r}")


def check_named_agent(agent_id: str | None, field: str, registered: bool) -> None:
    """Lock the row of the agent a write names as its filer or assignee (inside the
    write), as :func:`check_route_agent` does a route's; ``registered`` (the door
    found it): one gone now was deleted meanwhile, refused as the door refuses an
    unknown agent (400 on ``field``)."""
    if agent_id is None:
        return
    if registry.lock_agent(agent_id) is None and registered:
        raise ValidationFailed(field, f"no agent {agent_id!r} in the registry")


def _check_parent_ceilings(parent_id: str, team_id: str) -> Task:
    try:
        parent = lock_task(parent_id)  # serialises concurrent creates under one parent
    except TaskNotFound:
        raise ValidationFailed("parent_task_id", f"no task {parent_id!r}") from None
    if parent.team_id != team_id:  # a tree never crosses teams
        raise ValidationFailed("parent_task_id", f"no task {parent_id!r}")
    depth, max_depth = len(ancestor_ids(parent_id)), ceilings.MAX_DEPTH
    if depth >= max_depth:
        raise DepthExceeded(
            f"parent {parent_id!r} is at depth {depth}; tasks nest at most {max_depth} deep",
            depth=depth,
            max_depth=max_depth,
        )
    live = (
        Task.objects.filter(parent_task_id=parent_id, dropped=False)
        .exclude(status__in=(Status.DONE, Status.CANCELLED))
        .count()
    )
    limit = ceilings.MAX_LIVE_CHILDREN
    if live >= limit:
        raise TooManyChildren(
            f"parent {parent_id!r} already has {live} live children (max {limit})", limit=limit
        )
    return parent


def _check_root_rate(team_id: str, at: dt.datetime) -> None:
    if connection.features.has_select_for_update:
        # Serialise agent root creates per team so two racers cannot both see 29.
        list(Team.objects.select_for_update().filter(pk=team_id).values_list("pk"))
    recent = Task.objects.filter(
        team_id=team_id,
        parent_task__isnull=True,
        created_by_agent_id__isnull=False,
        created_at__gt=at - ceilings.ROOT_RATE_WINDOW,
    ).count()
    if recent >= ceilings.ROOT_RATE_LIMIT:
        raise RootRateLimited(
            f"team {team_id!r} had {recent} agent-created root tasks in the last 5 minutes "
            f"(max {ceilings.ROOT_RATE_LIMIT})",
            limit=ceilings.ROOT_RATE_LIMIT,
        )


# --- transitions -------------------------------------------------------------


def claim_for_agent(agent_id: Any, lease_ms: Any = None) -> ClaimFor:
    """The claim a move into ``in_progress`` takes for ``agent_id`` (a registered agent;
    its runtime comes from the registry)."""
    agent = checks.check_agent_id(agent_id, "agent_id")
    runtime = Agent.objects.filter(pk=agent).values_list("runtime", flat=True).first()
    if runtime is None:
        raise ValidationFailed("agent_id", f"no agent {agent!r} in the registry")
    span = None if lease_ms is None else checks.check_lease_ms(lease_ms)
    return ClaimFor(agent_id=agent, runtime=runtime, lease_ms=span)


def transition(
    task_id: str,
    to: Any,
    *,
    human_override: Any = None,
    agent_id: Any = None,
    lease_ms: Any = None,
    actor: str | None = None,
) -> Task:
    """Move a task to ``to``, checked against the freshly read row in the write
    transaction (:func:`board.store.moves.move`). Same-status is a no-op; an illegal
    pair raises :class:`IllegalTransition`. A move into ``in_progress`` takes a claim
    for ``agent_id`` (a new attempt and lease; :func:`ticket_of` gives its ticket),
    and without one is refused (:class:`ClaimRequired`). ``actor``: the
    authenticated user who moved it (recorded on the event)."""
    target = checks.check_status(to)
    override = check_override(human_override)
    claim = None
    if agent_id is not None:
        if target != Status.IN_PROGRESS:
            raise ValidationFailed("agent_id", "names who works the task: only with to=in_progress")
        claim = claim_for_agent(agent_id, lease_ms)

    if claim is not None and _status_of(task_id) == Status.TODO:
        # From todo the move is the atomic claim itself, with its guard (ready,
        # unassigned, not dropped): a person does not get to skip the dependencies.
        result = claims.claim(task_id, claim.agent_id, claim.runtime, lease_ms=claim.lease_ms)
        result.raise_for_outcome(task_id)
        assert result.task is not None
        return result.task

    def run() -> Task:
        task = lock_task(task_id)
        if claim is not None and approvals.blocks_claim(task.approval_state):
            # The claim statement's rule, for the moves that claim outside it.
            raise ApprovalRequired(approvals.waits_sentence(task_id), task_id=task_id)
        prev = task.status
        at = now()
        # The roles table keeps a move back to todo for people: theirs lifts a
        # person's verdict too (board.store.moves.clear_verdict).
        fields = move(task, target, at=at, override=override, claim=claim, lifts_verdict=True)
        if not fields:
            return task
        from board.store.executions import close_run_leaving

        close_run_leaving(task, prev, "cancelled", error=f"moved to {target}", at=at)
        return commit_change(
            task, kind_of(prev, target), prev_status=prev, fields=fields, at=at, actor=actor
        )

    return storage.write(run)


def _status_of(task_id: str) -> str | None:
    return Task.objects.filter(pk=task_id).values_list("status", flat=True).first()


def ticket_of(task: Task) -> str:
    """The ticket of the claim ``task`` holds now (after a move took one for an agent)."""
    return Ticket.for_task(task).encode()
