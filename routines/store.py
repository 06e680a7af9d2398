"""The routines data layer: the only writer of ``scheduled_runs`` and the ticker poke.

Every write runs through :func:`core.storage.write` (``BEGIN IMMEDIATE`` on
SQLite; ``SELECT … FOR UPDATE`` on the routine row on PostgreSQL) and checks its
ledger move against :data:`routines.models.TRANSITIONS` on the freshly read row.
Every user-facing write also bumps the poke row, so tickers in any process re-arm.
Cron math is delegated to :mod:`routines.occurrence`; this module never parses a
cron expression itself.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from django.db import IntegrityError, models
from django.db.models import Count, F, QuerySet
from django.db.models.fields.json import KT
from django.utils import timezone as dj_timezone

from board import checks
from board import store as board_store
from board.errors import TaskNotFound
from board.models import Task
from board.scope import check_touches
from board.transitions import Status
from core import registry, repositories, server_commands, storage, wakeups
from core.errors import Conflict, ValidationFailed
from core.models import Agent, Team
from routines import occurrence
from routines.errors import (
    BoundRecurringScheduleError,
    DuplicateFiringOwnerError,
    HumanParticipantRefused,
    IllegalRoutineTransition,
    RoutineBusy,
    RoutineNotFound,
)
from routines.models import (
    TRANSITIONS,
    CatchUp,
    Routine,
    RoutineFire,
    RoutineStatus,
    TickerPoke,
    is_transition_allowed,
)

FIRING_OWNER = "clawboo"
MANUAL_OWNER = "manual"
DEFAULT_TITLE = "Scheduled team task"
# Isolation kinds: `code` provisions a worktree (file-mutating); the others do not.
TEMPLATE_KINDS = ("code", "research", "chat")
BOOT_RESUME_ERROR = "orphaned mid-dispatch (restart)"
# What a routine's task_template may say, in the order the forms show it.
TEMPLATE_KEYS = (
    "title",
    "description",
    "kind",
    "priority",
    "repository",
    "repo_path",
    "model",
    "max_node_cents",
    "team_task_id",
    "verify_cmd",
    "approval_required",
    "touches",
)
_TEMPLATE_KEYS = frozenset(TEMPLATE_KEYS)
_IN_FLIGHT = frozenset({RoutineStatus.QUEUED, RoutineStatus.CLAIMED, RoutineStatus.RUNNING})


def now_ms() -> int:
    """Wall-clock UTC epoch ms (time_machine moves it in tests)."""
    return int(time.time() * 1000)


# --- validation ----------------------------------------------------------------


def check_task_template(value: Any) -> dict[str, Any]:
    """The board task each fire materializes, with the SPEC §10 defaults filled in."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ValidationFailed("task_template", "must be an object")
    unknown = sorted(set(value) - _TEMPLATE_KEYS)
    if unknown:
        raise ValidationFailed(f"task_template.{unknown[0]}", "unknown field")

    def sub(name: str, exc: ValidationFailed) -> ValidationFailed:
        return ValidationFailed(f"task_template.{name}", exc.detail.split(": ", 1)[-1])

    clean: dict[str, Any] = {}
    try:
        clean["title"] = checks.check_title(value.get("title", DEFAULT_TITLE))
    except ValidationFailed as exc:
        raise sub("title", exc) from None
    try:
        clean["description"] = checks.check_text(value.get("description"), "description")
    except ValidationFailed as exc:
        raise sub("description", exc) from None
    clean["kind"] = checks.check_choice(
        value.get("kind", "code"), "task_template.kind", TEMPLATE_KINDS
    )
    try:
        clean["priority"] = checks.check_priority(value.get("priority", 0))
    except ValidationFailed as exc:
        raise sub("priority", exc) from None
    for name in ("repo_path", "model", "verify_cmd"):
        raw = value.get(name)
        if raw is not None and (not isinstance(raw, str) or not raw.strip() or len(raw) > 1024):
            raise ValidationFailed(f"task_template.{name}", "must be a non-empty string")
        clean[name] = raw
    cents = value.get("max_node_cents")
    if cents is not None:
        try:
            checks.check_int(cents, "max_node_cents", low=0, high=2**31 - 1)
        except ValidationFailed as exc:
            raise sub("max_node_cents", exc) from None
    clean["max_node_cents"] = cents
    bound = value.get("team_task_id")
    if bound is not None:
        bound = checks.check_id(bound, "task_template.team_task_id")
    clean["team_task_id"] = bound
    named = value.get("repository")
    clean["repository"] = (
        None if named is None else checks.check_id(named, "task_template.repository")
    )
    # Each fire's task waits for a person's approval before any claim (GOVERNANCE §5).
    approval = value.get("approval_required", False)
    if not isinstance(approval, bool):
        raise ValidationFailed("task_template.approval_required", "must be true or false")
    clean["approval_required"] = approval
    # The paths each fire's task says it changes (board.scope): its claim waits while
    # overlapping work of its repository is in progress or waiting to land.
    clean["touches"] = check_touches(value.get("touches"), "task_template.touches")
    return clean


def _check_template_repository(template: dict[str, Any], team_id: str) -> None:
    """The repository a template's tasks work in is one of the routine's team's: by
    id (``repository``), or a ``repo_path`` that is exactly a registered one's path
    (which then names it). A path is never taken as given (core.repositories)."""
    named = template.get("repository")
    if named is not None:
        repositories.of_team(named, team_id, "task_template.repository")
    raw = template.get("repo_path")
    if raw is None:
        return
    found = repositories.check_named_path(team_id, raw, "task_template.repo_path")
    if named is None:
        template["repository"] = found.id


def _check_catch_up(value: Any) -> str:
    if value is None:
        return CatchUp.LATEST
    return checks.check_choice(value, "catch_up", CatchUp.values)


def _check_agent(agent_id: Any, team_id: str, *, lock: bool = False) -> Agent:
    """The routine's agent. ``lock``: inside the routine's write, read with its row
    locked, so an agent deleted at the same time is either gone here or counts this
    routine (:func:`core.registry.lock_agent`); else its routine committed just after
    the delete's count and the delete then failed on it."""
    if not isinstance(agent_id, str) or not agent_id:
        raise ValidationFailed("agent_id", "is required")
    agent = registry.lock_agent(agent_id) if lock else Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise ValidationFailed("agent_id", f"no agent {agent_id!r}")
    if agent.team_id != team_id:
        raise ValidationFailed("agent_id", f"agent {agent_id!r} is not on team {team_id!r}")
    check_not_human(agent)
    return agent


def check_not_human(agent: Agent) -> None:
    """A routine runs its agent on a schedule; a person is never run (the executor
    does not claim for a ``human``): refused, saying what to do instead."""
    never = server_commands.never_run(agent)
    if never is not None:
        raise HumanParticipantRefused(
            "agent_id",
            f"{never}: a routine fires an agent's run on the server "
            "and the server runs no such participant. Give the routine an agent that runs "
            "(claude-code, codex, hermes, command, openclaw), or put the work in front of "
            f'it as a task routed to them (route: {{"agent": "{agent.id}"}}), which they '
            "claim from the board (or the API)",
            agent_id=agent.id,
        )


def _check_bound_task(task_id: str, team_id: str, routine_id: str | None) -> Task:
    """Registration-time de-dup, the first wall of the one-firing-owner invariant.

    Must run inside the registration's write transaction: the board store's
    :func:`~board.store.lock_task` holds the task row (``FOR UPDATE`` on PostgreSQL;
    SQLite's BEGIN IMMEDIATE already serializes), so two concurrent registrations
    against one task cannot both pass. It reads only ``tasks.scheduled_by`` (the
    team-task domain), never a runtime's own cron. Returns the locked task.
    """
    # Another team's task answers exactly as an unknown id: a team is a wall, and the
    # difference told a member which ids another team's tasks have.
    unknown = ValidationFailed(
        "task_template.team_task_id", f"no task {task_id!r} in team {team_id!r}"
    )
    try:
        task = board_store.lock_task(task_id)
    except TaskNotFound:
        raise unknown from None
    if task.team_id != team_id:
        raise unknown
    if task.scheduled_by not in (MANUAL_OWNER, FIRING_OWNER):
        raise DuplicateFiringOwnerError(
            f"task {task_id!r} is already fired by {task.scheduled_by!r}",
            task_id=task_id,
            owner=task.scheduled_by,
        )
    other = Routine.objects.filter(bound_task_id=task_id).exclude(pk=routine_id).first()
    if other is not None:
        raise DuplicateFiringOwnerError(
            f"task {task_id!r} is already fired by routine {other.id!r}",
            task_id=task_id,
            owner=FIRING_OWNER,
            routine_id=other.id,
        )
    if task.status in ("done", "cancelled"):
        raise ValidationFailed(
            "task_template.team_task_id", f"task {task_id!r} is {task.status} and cannot fire"
        )
    return task


def _stamp_bound_task(task: Task) -> None:
    """Mark the bound task as Clawboo's to fire, in the registration's transaction
    (``expect`` guards against an owner change since :func:`_check_bound_task`)."""
    board_store.set_scheduled_by(task.id, FIRING_OWNER, expect=task.scheduled_by)


def _release_bound_task(task_id: str | None) -> None:
    """A routine let go of its bound task: hand it back to manual scheduling, unless
    someone else has taken it since (then it is theirs and stays untouched)."""
    if task_id is None or board_store.find_task(task_id) is None:
        return
    try:
        board_store.set_scheduled_by(task_id, MANUAL_OWNER, expect=FIRING_OWNER)
    except Conflict:
        pass


# --- the poke --------------------------------------------------------------------


def poke() -> None:
    """Tell every ticker (any process) to re-arm now. Call inside the write."""
    wakeups.notify(wakeups.ROUTINES)
    if not TickerPoke.objects.filter(pk=1).update(seq=F("seq") + 1):
        TickerPoke.objects.get_or_create(pk=1, defaults={"seq": 1})


def poke_seq() -> int:
    value = TickerPoke.objects.filter(pk=1).values_list("seq", flat=True).first()
    return int(value or 0)


# --- reads -----------------------------------------------------------------------


def get_routine(routine_id: str) -> Routine:
    try:
        return Routine.objects.select_related("agent").get(pk=routine_id)
    except Routine.DoesNotExist:
        raise RoutineNotFound(routine_id) from None


def list_routines(
    *, team: str | list[str] | None = None, status: str | None = None
) -> QuerySet[Routine]:
    qs = Routine.objects.select_related("agent").all()
    if team is not None:
        qs = qs.filter(team_id__in=team) if isinstance(team, list) else qs.filter(team_id=team)
    if status is not None:
        checks.check_choice(status, "status", RoutineStatus.values)
        qs = qs.filter(status=status)
    return qs.order_by("created_at", "id")


def waiting_in_review(routine_ids: list[str]) -> dict[str, int]:
    """How many of each routine's fires wait in review: the count the board's In
    review column shows filtered to the routine (``?routine=``). A routine firing
    every two minutes files work faster than anyone reviews it, and nothing said so
    (one query, for a page of routines or the admin's list)."""
    rows = (
        board_store.list_tasks(status=Status.IN_REVIEW, routine=routine_ids, dropped=False)
        .order_by()
        .values(routine=KT(board_store.FIRED_BY))
        .annotate(n=Count("pk"))
    )
    counts = dict.fromkeys(routine_ids, 0)
    counts.update((row["routine"], row["n"]) for row in rows)
    return counts


class RoutineState(models.TextChoices):
    """What a person is told about a routine (the ledger's status, read against the
    clock), derived here only: the routines page and the admin both show this."""

    ARMED = "armed", "armed"  # waiting for its next slot
    RUNNING = "running", "running"  # a fire is queued or in flight
    LATE = "late", "late"  # a slot is past due and nothing has fired it
    ERROR = "error", "error"  # the last fire failed: parked for a person (resume)
    PAUSED = "paused", "paused"
    SPENT = "spent", "spent"  # a one-shot that has fired: nothing left to fire


def state_of(routine: Routine, at_ms: int | None = None) -> RoutineState:
    """The routine's state at ``at_ms`` (default now).

    Late means a slot older than :data:`routines.occurrence.MISSED_GRACE_MS` is still
    waiting: the ticker rescans every 60 s, so only a stopped ticker (or one far
    behind) leaves a slot that old unfired.
    """
    at = now_ms() if at_ms is None else at_ms
    if routine.status == RoutineStatus.PAUSED:
        return RoutineState.PAUSED
    if routine.status == RoutineStatus.ERROR:
        return RoutineState.ERROR
    if routine.status == RoutineStatus.QUEUED:
        due = routine.fire_slot if routine.fire_slot is not None else routine.next_run_at
        late = due is not None and at - due > occurrence.MISSED_GRACE_MS
        return RoutineState.LATE if late else RoutineState.RUNNING
    if routine.status in _IN_FLIGHT:
        return RoutineState.RUNNING
    if routine.next_run_at is None:
        return RoutineState.SPENT
    if at - routine.next_run_at > occurrence.MISSED_GRACE_MS:
        return RoutineState.LATE
    return RoutineState.ARMED


def offered_moves(routine: Routine) -> tuple[str, ...]:
    """The moves a person may ask of this row now, of ``pause``, ``resume`` and
    ``run-now`` (what the page and the admin offer; the writes still decide)."""
    moves: list[str] = []
    if routine.status != RoutineStatus.PAUSED and is_transition_allowed(
        routine.status, RoutineStatus.PAUSED
    ):
        moves.append("pause")
    if routine.status in (RoutineStatus.PAUSED, RoutineStatus.ERROR):
        moves.append("resume")
    if routine.status == RoutineStatus.IDLE:
        moves.append("run-now")
    return tuple(moves)


@dataclass(frozen=True)
class FireRow:
    """One fired slot with the board task it materialized (None: not yet, or gone)."""

    fire: RoutineFire
    task: Task | None


def recent_fires(routine_ids: list[str], per_routine: int = 5) -> dict[str, list[FireRow]]:
    """The newest fires of each routine, newest first, with their tasks' titles and
    statuses (one small query per routine on the (routine, slot) index, one for the
    tasks)."""
    fires = {
        rid: list(RoutineFire.objects.filter(routine_id=rid).order_by("-slot_at")[:per_routine])
        for rid in routine_ids
    }
    task_ids = {f.task_id for rows in fires.values() for f in rows if f.task_id}
    tasks = {
        t.id: t
        for t in Task.objects.filter(pk__in=task_ids).only("id", "title", "status", "team_id")
    }
    return {
        rid: [FireRow(f, tasks.get(f.task_id) if f.task_id else None) for f in rows]
        for rid, rows in fires.items()
    }


def lock_routine(routine_id: str) -> Routine:
    """Read the routine row for a write: call inside the write transaction only."""
    row = Routine.objects.select_for_update().filter(pk=routine_id).first()
    if row is None:
        raise RoutineNotFound(routine_id)
    return row


def move(routine: Routine, to_status: str, **fields: Any) -> Routine:
    """Apply one ledger move to a row freshly read under lock (see :func:`lock_routine`).

    Refuses a move that is not in the transition table; same-status is a no-op move
    (the other fields are still written).
    """
    if not is_transition_allowed(routine.status, to_status):
        raise IllegalRoutineTransition(
            routine.id, routine.status, to_status, TRANSITIONS.get(routine.status, ())
        )
    routine.status = to_status
    for name, value in fields.items():
        setattr(routine, name, value)
    routine.updated_at = dj_timezone.now()
    routine.save()
    return routine


# --- writes ----------------------------------------------------------------------


@dataclass(frozen=True)
class CheckedCreate:
    """The inputs of a create, each checked (what :func:`check_create` returns)."""

    team_id: str
    agent: Agent
    spec: occurrence.Spec
    tz: ZoneInfo
    template: dict[str, Any]
    catch_up: str


def _check_bound_recurring(spec: occurrence.Spec, template: dict[str, Any]) -> None:
    bound = template.get("team_task_id")
    if bound is not None and not spec.is_one_shot:
        raise BoundRecurringScheduleError(
            "a routine bound to an existing task must be a one-shot (once@…): the task "
            "is claimable exactly once",
            task_id=bound,
        )


def check_create(
    *,
    agent_id: Any,
    team: Any,
    cron_spec: Any,
    timezone: Any = "UTC",
    task_template: Any = None,
    catch_up: Any = None,
    at_ms: int | None = None,
    lock: bool = False,
) -> CheckedCreate:
    """Every refusal of :func:`create_routine` that needs no lock, in its order, and
    nothing written: forms call it to show a refusal beside its field, and
    :func:`create_routine` calls it again inside its write. (The bound task's owner
    is checked only there, under the task's lock, and the agent's row is locked
    there: ``lock``.)"""
    team_id = checks.check_id(team, "team")
    spec, tz = occurrence.validate_new(
        cron_spec, timezone or "UTC", now_ms() if at_ms is None else at_ms
    )
    template = check_task_template(task_template)
    policy = _check_catch_up(catch_up)
    _check_bound_recurring(spec, template)
    if not Team.objects.filter(pk=team_id).exists():
        raise ValidationFailed("team", f"no team {team_id!r}")
    agent = _check_agent(agent_id, team_id, lock=lock)
    _check_template_repository(template, team_id)
    return CheckedCreate(team_id, agent, spec, tz, template, policy)


def create_routine(
    *,
    agent_id: Any,
    team: Any,
    cron_spec: Any,
    timezone: Any = "UTC",
    task_template: Any = None,
    catch_up: Any = None,
) -> Routine:
    """Register a routine, armed at its first slot strictly after now.

    Refusals: bad spec/timezone/template or a past one-shot → ValidationFailed
    (400); unknown agent → ValidationFailed; a recurring spec bound to a task →
    BoundRecurringScheduleError (400); a task with another firing owner →
    DuplicateFiringOwnerError (409); a human participant →
    HumanParticipantRefused (400 on ``agent_id``, saying what to do instead).
    """
    at = now_ms()
    # Once before the write (a refusal takes no lock), once inside it (the team or
    # the agent may have changed in between).
    inputs = dict(
        agent_id=agent_id,
        team=team,
        cron_spec=cron_spec,
        timezone=timezone,
        task_template=task_template,
        catch_up=catch_up,
        at_ms=at,
    )
    check_create(**inputs)

    def run() -> Routine:
        checked = check_create(**inputs, lock=True)
        bound = checked.template["team_task_id"]
        bound_task = _check_bound_task(bound, checked.team_id, None) if bound is not None else None
        stamp = dj_timezone.now()
        try:
            routine = Routine.objects.create(
                id=secrets.token_hex(8),
                agent=checked.agent,
                team_id=checked.team_id,
                cron_spec=checked.spec.text,
                timezone=str(checked.tz.key),
                task_template=checked.template,
                bound_task_id=bound,
                status=RoutineStatus.IDLE,
                next_run_at=occurrence.first_slot(checked.spec, checked.tz, at),
                scheduled_by=FIRING_OWNER,
                catch_up=checked.catch_up,
                created_at=stamp,
                updated_at=stamp,
            )
        except IntegrityError:
            # Lost a race on the one-owner-per-task constraint (PostgreSQL).
            raise DuplicateFiringOwnerError(
                f"task {bound!r} is already fired by another routine", task_id=bound
            ) from None
        if bound_task is not None:
            _stamp_bound_task(bound_task)
        poke()
        return routine

    return storage.write(run)


EDITABLE = ("agent_id", "cron_spec", "timezone", "task_template", "catch_up")


@dataclass(frozen=True)
class CheckedUpdate:
    """A routine's fields after an edit, each checked (what :func:`check_update` returns)."""

    agent: Agent | None  # None: the agent is unchanged
    spec: occurrence.Spec
    tz: ZoneInfo
    template: dict[str, Any]
    catch_up: str


def check_update(
    routine: Routine, changes: Any, at_ms: int | None = None, *, lock: bool = False
) -> CheckedUpdate:
    """Every refusal of :func:`update_routine` for this row that needs no lock, and
    nothing written: forms call it with the row they show, :func:`update_routine`
    with the row it locked. Refused with RoutineBusy (409) while a fire is in flight."""
    if not isinstance(changes, dict):
        raise ValidationFailed("body", "must be an object")
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ValidationFailed(unknown[0], "unknown field in a routine update")
    template = (
        check_task_template(changes["task_template"])
        if "task_template" in changes
        else routine.task_template
    )
    policy = _check_catch_up(changes["catch_up"]) if "catch_up" in changes else routine.catch_up
    if routine.status in _IN_FLIGHT:
        raise RoutineBusy(
            f"routine {routine.id!r} is {routine.status}; edit it after the fire settles",
            status=routine.status,
        )
    spec_text = changes.get("cron_spec", routine.cron_spec)
    tz_name = changes.get("timezone", routine.timezone)
    if "cron_spec" in changes or "timezone" in changes:
        spec, tz = occurrence.validate_new(spec_text, tz_name, now_ms() if at_ms is None else at_ms)
    else:
        # Unchanged: a spent one-shot's past date is no reason to refuse a title edit.
        tz = occurrence.check_timezone(tz_name)
        spec = occurrence.parse_spec(spec_text, tz)
    _check_bound_recurring(spec, template)
    agent = (
        _check_agent(changes["agent_id"], routine.team_id, lock=lock)
        if "agent_id" in changes
        else None
    )
    if "task_template" in changes:
        _check_template_repository(template, routine.team_id)
    return CheckedUpdate(agent, spec, tz, template, policy)


def update_routine(routine_id: str, changes: dict[str, Any]) -> Routine:
    """PATCH: schedule, template, agent or catch-up. Re-arms an idle row from now.

    Refused with RoutineBusy (409) while a fire is in flight.
    """
    if not isinstance(changes, dict):
        raise ValidationFailed("body", "must be an object")
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise ValidationFailed(unknown[0], "unknown field in a routine update")
    # The template and catch-up need no row: refuse them before taking the lock.
    if "task_template" in changes:
        check_task_template(changes["task_template"])
    if "catch_up" in changes:
        _check_catch_up(changes["catch_up"])

    def run() -> Routine:
        routine = lock_routine(routine_id)
        at = now_ms()
        checked = check_update(routine, changes, at, lock=True)
        bound = checked.template.get("team_task_id")
        previous_bound = routine.bound_task_id
        if bound is not None and bound != previous_bound:
            _stamp_bound_task(_check_bound_task(bound, routine.team_id, routine.id))
        if previous_bound is not None and bound != previous_bound:
            _release_bound_task(previous_bound)
        if checked.agent is not None:
            routine.agent = checked.agent
        routine.cron_spec = checked.spec.text
        routine.timezone = str(checked.tz.key)
        routine.task_template = checked.template
        routine.bound_task_id = bound
        routine.catch_up = checked.catch_up
        fields: dict[str, Any] = {}
        if routine.status == RoutineStatus.IDLE:
            fields["next_run_at"] = occurrence.first_slot(checked.spec, checked.tz, at)
        move(routine, routine.status, **fields)
        poke()
        return routine

    return storage.write(run)


def delete_routine(routine_id: str) -> None:
    def run() -> None:
        routine = lock_routine(routine_id)
        bound = routine.bound_task_id
        routine.delete()
        _release_bound_task(bound)
        poke()

    storage.write(run)


def pause_routine(routine_id: str) -> Routine:
    """idle/queued/error → paused. A paused row never auto-fires."""

    def run() -> Routine:
        routine = move(lock_routine(routine_id), RoutineStatus.PAUSED)
        poke()
        return routine

    return storage.write(run)


def resume_routine(routine_id: str) -> Routine:
    """paused/error → idle, re-armed at the first slot after now (never a past one),
    clearing the last error. A spent one-shot resumes quiet (next_run_at null)."""

    def run() -> Routine:
        routine = lock_routine(routine_id)
        if routine.status == RoutineStatus.IDLE:
            return routine  # same-status: idempotent no-op
        if not is_transition_allowed(routine.status, RoutineStatus.IDLE) or routine.status in (
            _IN_FLIGHT
        ):
            raise IllegalRoutineTransition(
                routine.id, routine.status, RoutineStatus.IDLE, TRANSITIONS[routine.status]
            )
        tz = occurrence.check_timezone(routine.timezone)
        spec = occurrence.parse_spec(routine.cron_spec, tz)
        move(
            routine,
            RoutineStatus.IDLE,
            next_run_at=occurrence.first_slot(spec, tz, now_ms()),
            last_error=None,
            fire_slot=None,
        )
        poke()
        return routine

    return storage.write(run)


def run_routine_now(routine_id: str) -> Routine:
    """idle → queued for a slot at now: the next tick claims and fires it."""

    def run() -> Routine:
        routine = lock_routine(routine_id)
        if routine.status == RoutineStatus.QUEUED:
            return routine  # already about to fire
        move(routine, RoutineStatus.QUEUED, fire_slot=now_ms())
        poke()
        return routine

    return storage.write(run)


# --- boot-resume -----------------------------------------------------------------


@dataclass
class BootResumeReport:
    requeued: list[str] = field(default_factory=list)  # claimed orphans → queued
    rearmed: list[str] = field(default_factory=list)  # recurring running → idle
    errored: list[str] = field(default_factory=list)  # one-shot running → error


def boot_resume() -> BootResumeReport:
    """Heal rows a dead process left mid-transition, in one transaction (seed 002):

    * ``claimed`` (the fire never started) → ``queued``: it was due, fire it now;
      ``routine_fires`` and the board claim deduplicate any double-fire;
    * recurring ``running`` → ``idle`` at the occurrence after the slot it fired;
    * one-shot ``running`` → ``error`` (outcome unknown; never re-fired);
    * ``idle`` rows are untouched (a past-due slot fires on the next due-pass).

    Only safe when no other ticker is mid-fire on these rows (one ticker per database
    at boot, or run before starting the cluster).
    """

    def run() -> BootResumeReport:
        report = BootResumeReport()
        orphans = Routine.objects.select_for_update().filter(
            status__in=(RoutineStatus.CLAIMED, RoutineStatus.RUNNING)
        )
        for routine in orphans:
            if routine.status == RoutineStatus.CLAIMED:
                move(routine, RoutineStatus.QUEUED)
                report.requeued.append(routine.id)
            elif routine.is_one_shot:
                move(routine, RoutineStatus.ERROR, next_run_at=None, last_error=BOOT_RESUME_ERROR)
                report.errored.append(routine.id)
                _record_boot_error(routine)
            else:
                tz = occurrence.check_timezone(routine.timezone)
                spec = occurrence.parse_spec(routine.cron_spec, tz)
                base = max(routine.fire_slot or 0, routine.next_run_at or 0) or now_ms()
                move(
                    routine,
                    RoutineStatus.IDLE,
                    next_run_at=occurrence.next_after(spec, tz, base),
                    fire_slot=None,
                )
                report.rearmed.append(routine.id)
        if report.requeued or report.rearmed or report.errored:
            poke()
        return report

    return storage.write(run)


def _record_boot_error(routine: Routine) -> None:
    from core import events

    events.append(
        routine.team_id,
        "routine_error",
        {"routine_id": routine.id, "error": BOOT_RESUME_ERROR, "slot_at": routine.fire_slot},
    )
