"""Field writes (assignee, priority, labels, metadata, edits), the verification
verdict, comments and the task's pointers to its worktree."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from board import checks, judgement
from board.models import Task, TaskComment, Verdict
from board.scope import check_touches
from board.store import approvals
from board.store._base import (
    add_comment_row,
    commit_change,
    depends_on_ids,
    lock_task,
    now,
    record_event,
    set_fields,
)
from board.store.tasks import (
    check_named_agent,
    check_route_agent,
    get_task,
    route_columns,
    task_repository,
)
from board.store.tickets import WriteOutcome, declined, recorded, unchanged
from board.transitions import (
    is_locked,
    is_terminal,
)
from core import storage
from core.errors import Conflict, ValidationFailed
from core.models import Agent, Runtime

# SPEC §10 ceilings (the agent create path; see create_task).
EVIDENCE_TAIL = checks.field_limit("evidence")
DEFAULT_TEAM = "default"


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
        at = now()
        asked = approvals.ask_again_after_edit(task, fields, at)
        commit_change(task, kind, prev_status=task.status, fields=fields | asked, at=at)
        if asked:
            approvals.record_required(task)
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
        lambda t: set_fields(t, assignee_agent_id=value),
        refuse=_assignee_refusal,
    )


def set_priority(task_id: str, priority: Any) -> WriteOutcome:
    value = checks.check_priority(priority)
    return _field_write(task_id, "priority_changed", lambda t: set_fields(t, priority=value))


def set_labels(task_id: str, labels: Any) -> WriteOutcome:
    value = checks.check_labels(labels)
    return _field_write(task_id, "label_changed", lambda t: set_fields(t, labels=value))


def add_label(task_id: str, label: Any) -> WriteOutcome:
    value = checks.check_label(label)
    return _field_write(
        task_id,
        "label_changed",
        lambda t: set() if value in t.labels else set_fields(t, labels=[*t.labels, value]),
    )


def remove_label(task_id: str, label: Any) -> WriteOutcome:
    value = checks.check_label(label)
    return _field_write(
        task_id,
        "label_changed",
        lambda t: (
            set_fields(t, labels=[x for x in t.labels if x != value])
            if value in t.labels
            else set()
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
        changed = {"metadata"}
        raw = merged.get("repo_path")
        if raw is not None and raw != (task.metadata or {}).get("repo_path"):
            task.repository_id = task_repository(task.team_id, None, merged)
            changed.add("repository")
        # The merge is what is kept: a patch within the limit may take it past.
        task.metadata = checks.check_size(merged, "metadata")
        return changed

    return _field_write(task_id, "metadata_changed", mutate)


_EDITABLE = (
    "title",
    "description",
    "priority",
    "labels",
    "metadata",
    "assignee_agent_id",
    "repository",
    "max_run_cents",
    "route",
    "touches",
)


def update_task(
    task_id: str, changes: dict[str, Any], *, if_revision: Any = None, registered: bool = False
) -> Task:
    """The API's PATCH: several field writes in one transaction.

    ``registered``: the door found the ``assignee_agent_id`` it names in the registry;
    one deleted meanwhile is refused (:func:`board.store.tasks.check_named_agent`).

    An edit of what the work is voids a decided approval (back to ``required``,
    :func:`board.store.approvals.ask_again_after_edit`).

    Unlike the advisory field writes, a refused assignee change raises
    :class:`Conflict` (the caller asked for exactly this change). With
    ``if_revision`` (the revision the editor saw), an edit of a task that moved on
    since raises :class:`Conflict` carrying the task as it is now, so whoever lost
    the race sees the newer values instead of overwriting them.
    """
    checks.unknown_keys(changes, _EDITABLE, "a task update")
    if if_revision is not None and (
        isinstance(if_revision, bool) or not isinstance(if_revision, int) or if_revision < 0
    ):
        raise ValidationFailed("if_revision", "must be a non-negative integer")
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
        clean["metadata"] = checks.check_size(
            checks.check_object(changes["metadata"], "metadata"), "metadata"
        )
    if "max_run_cents" in changes:
        clean["max_run_cents"] = checks.check_max_run_cents(changes["max_run_cents"])
    if "assignee_agent_id" in changes:
        value = changes["assignee_agent_id"]
        clean["assignee_agent_id"] = (
            None if value is None else checks.check_agent_id(value, "assignee_agent_id")
        )
    if "repository" in changes and changes["repository"] is not None:
        checks.check_id(changes["repository"], "repository")

    if "route" in changes:
        clean.update(route_columns(checks.check_route(changes["route"], list(Runtime.values))))
    if "touches" in changes:
        # The person's scope replaces the effective one too (null: none until an
        # attempt settles and records what it changed).
        clean["touches"] = clean["scope"] = check_touches(changes["touches"])

    def run() -> Task:
        task = lock_task(task_id)
        if if_revision is not None and task.revision != if_revision:
            raise Conflict(
                f"task {task_id!r} changed since revision {if_revision} "
                f"(it is at revision {task.revision})",
                reason="stale_revision",
                revision=task.revision,
                task=task.as_dict(depends_on=depends_on_ids(task.id)),
            )
        if "repository" in changes:
            named = changes["repository"]
            clean["repository_id"] = (
                None if named is None else task_repository(task.team_id, named, {})
            )
        elif "metadata" in clean:
            raw = clean["metadata"].get("repo_path")
            if raw is not None and raw != (task.metadata or {}).get("repo_path"):
                # A new path in the metadata: it must be one of the team's repositories.
                clean["repository_id"] = task_repository(task.team_id, None, clean["metadata"])
        if "route_agent_id" in clean:
            check_route_agent({"agent": clean["route_agent_id"]}, task.team_id)
        if "assignee_agent_id" in clean:
            check_named_agent(clean["assignee_agent_id"], "assignee_agent_id", registered)
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
        at = now()
        asked = approvals.ask_again_after_edit(task, fields, at)
        commit_change(task, kind, prev_status=task.status, fields=fields | asked, at=at)
        if asked:
            approvals.record_required(task)
        return task

    return storage.write(run)


_FIELD_KIND = {
    "title": "updated",
    "description": "updated",
    "priority": "priority_changed",
    "labels": "label_changed",
    "metadata": "metadata_changed",
    "assignee_agent_id": "assignee_changed",
    "repository_id": "updated",
    "max_run_cents": "updated",
    "route_agent_id": "updated",
    "route_runtime": "updated",
    "route_labels": "updated",
    "touches": "updated",
    "scope": "updated",
}


# --- verification ------------------------------------------------------------


def set_verdict(task_id: str, verdict: Any, evidence: Any = None, *, by: str | None = None) -> Task:
    """Store a verification verdict with its evidence (the last 4,000 characters).
    ``by``: the person who gave it by hand (kept in its detail,
    :data:`board.judgement.SET_BY`): such a verdict against the work stands when the
    work is given up mid-run (:func:`board.store.moves.clear_verdict`)."""
    if verdict not in Verdict.values:
        raise ValidationFailed("verdict", f"must be one of {', '.join(Verdict.values)}")
    if evidence is not None and not isinstance(evidence, str):
        raise ValidationFailed("evidence", "must be a string")
    tail = checks.check_storable((evidence or "")[-EVIDENCE_TAIL:], "evidence")

    def run() -> Task:
        task = lock_task(task_id)
        if is_terminal(task.status):
            raise Conflict(
                f"task {task_id!r} is {task.status}; its verdict is final", status=task.status
            )
        at = now()
        task.verdict, task.verdict_evidence, task.verdict_at = str(verdict), tail, at
        # A verdict given by hand has no gate, findings or reviewer of its own; the
        # rounds before it stay on record.
        before = task.verification_detail if isinstance(task.verification_detail, dict) else {}
        task.verification_detail = judgement.detail(None, [], None, before.get("attempts") or [])
        if by:
            task.verification_detail[judgement.SET_BY] = by
        return commit_change(
            task,
            "verification_recorded",
            prev_status=task.status,
            fields={"verdict", "verdict_evidence", "verdict_at", "verification_detail"},
            at=at,
        )

    return storage.write(run)


# --- comments ----------------------------------------------------------------


# "@name" where name is a member's username or an agent's id (no "@" inside an
# address: "ada@example.com" mentions no one).
_MENTION = re.compile(r"(?<![\w@.])@([\w.+-]+)")
COMMENT_EXCERPT = 500


def mentions_in(team_id: str, text: str) -> list[str]:
    """The team's people (usernames) and agents (ids) that ``text`` @-mentions, in
    the order first mentioned; a name that is neither is plain text."""
    named = list(dict.fromkeys(m.rstrip(".") for m in _MENTION.findall(text)))
    if not named:
        return []
    people = set(
        get_user_model()
        .objects.filter(teams__id=team_id, username__in=named)
        .values_list("username", flat=True)
    )
    agents = set(Agent.objects.filter(team_id=team_id, id__in=named).values_list("id", flat=True))
    return [name for name in named if name in people or name in agents]


def add_comment(task_id: str, body: Any, author: Any, *, agent_side: bool = False) -> TaskComment:
    """A comment by ``author``. ``agent_side``: it comes from an agent's key, a run's
    credential or a machine token (GOVERNANCE §6); on a task not yet claimed that has
    an approval, it is part of what the run would be told, so it counts as an edit
    does: the task's revision moves (a person's decision on the revision before it is
    refused) and an approval is asked again (:func:`board.store.approvals.agent_side_added`,
    the rule a subtask filed under it by the agent side meets too)."""
    text = checks.check_text(body, "body", required=True)
    who = checks.check_text(author, "author", limit=200, required=True)

    def run() -> TaskComment:
        task = lock_task(task_id)
        at = now()
        comment = add_comment_row(task, who, text, at)
        if agent_side:
            approvals.agent_side_added(task, who, at, "commented on")
        # The event carries who was mentioned: notifications (ops.notify) tell them.
        mentioned = mentions_in(task.team_id, text)
        extra = {
            "comment": {
                "id": comment.id,
                "author": who,
                "body": text[:COMMENT_EXCERPT],
                "mentions": mentioned,
            }
        }
        record_event(task, "commented", prev_status=task.status, extra=extra)
        return comment

    return storage.write(run)


def list_comments(task_id: str) -> QuerySet[TaskComment]:
    get_task(task_id)
    return TaskComment.objects.filter(task_id=task_id).order_by("created_at", "id")


def drop_task(task_id: str) -> Task:
    """Soft-delete: a dropped task is never ready or claimable."""

    def run() -> Task:
        task = lock_task(task_id)
        if task.dropped:
            return task
        task.dropped = True
        return commit_change(task, "metadata_changed", prev_status=task.status, fields={"dropped"})

    return storage.write(run)
