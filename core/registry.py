"""The registry of record: teams and agents (the only writer of those tables)."""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.utils import timezone

from core import agent_secrets, authors, events, repositories, roles, server_commands, storage
from core.checks import (
    check_id,
    check_object,
    check_size,
    check_text,
    invisible_in_label,
    is_command_argv,
)
from core.errors import Conflict, Forbidden, NotFound, ValidationFailed
from core.models import Agent, AgentState, ParticipantKind, Runtime, Team
from core.rows import from_rows

DEFAULT_TEAM = "default"
LABEL_MAX = 64
# The labels one agent serves (a task carries at most 32).
AGENT_LABELS_MAX = 64


def get_team(team_id: str) -> Team:
    try:
        return Team.objects.get(pk=team_id)
    except Team.DoesNotExist:
        raise NotFound(f"team {team_id!r} does not exist") from None


def create_team(
    team_id: Any, name: Any = None, *, creator: Any = None, members: Any = None
) -> Team:
    """Make a team; ``creator`` becomes a member, and so does each of ``members``
    (the admin's add page: whoever makes a team names its first members)."""
    tid = check_id(team_id, "id")
    label = check_text(name if name is not None else tid, "name", limit=200, required=True)

    def run() -> Team:
        if Team.objects.filter(pk=tid).exists():
            raise Conflict(f"team {tid!r} already exists")
        team = Team.objects.create(id=tid, name=label)
        joining = [*([creator] if creator is not None else []), *(members or [])]
        if joining:
            team.members.add(*joining)
            for member in joining:
                _forget_teams(member)
        return team

    return storage.write(run)


def ensure_team(team_id: str, name: str | None = None) -> Team:
    def run() -> Team:
        team, _ = Team.objects.get_or_create(pk=team_id, defaults={"name": name or team_id})
        return team

    return storage.write(run)


def add_member(team_id: str, user: Any) -> None:
    def run() -> None:
        get_team(team_id).members.add(user)
        _forget_teams(user)

    storage.write(run)


_AGENT_SCOPE_SQL = f"SELECT team_id, owner_id FROM {Agent._meta.db_table} WHERE id = %s"  # noqa: S608
_MEMBER_TEAMS_SQL = (
    f"SELECT team_id FROM {Team.members.through._meta.db_table} "  # noqa: S608
    "WHERE user_id = %s ORDER BY team_id"
)


def agent_scope(agent_id: str) -> tuple[str, Any] | None:
    """(team, owner id) of an agent, or None (precompiled: every claim asks it)."""
    with connection.cursor() as cursor:
        cursor.execute(_AGENT_SCOPE_SQL, [agent_id])
        row = cursor.fetchone()
    return None if row is None else (row[0], row[1])


_AGENT_ROW_SQL = f"SELECT * FROM {Agent._meta.db_table} WHERE id = %s"  # noqa: S608


def find_agent(agent_id: str) -> Agent | None:
    """The agent, or None (hand-written SQL: every claim's answer reads its claimer)."""
    with connection.cursor() as cursor:
        cursor.execute(_AGENT_ROW_SQL, [agent_id])
        rows = cursor.fetchall()
        columns = tuple(d[0] for d in cursor.description)
    return next(iter(from_rows(Agent, columns, rows)), None)


# Where a user object keeps the teams it read: asked several times in one request
# (the permission, the view, the scope of a list), and the object lives for one
# request; a membership change through this module makes it forget them.
_TEAMS_READ = "_clawboo_member_team_ids"


def member_team_ids(user: Any) -> list[str]:
    """The teams a user belongs to (precompiled, and read once per user object:
    asked on every API request)."""
    read: list[str] | None = getattr(user, _TEAMS_READ, None)
    if read is None:
        with connection.cursor() as cursor:
            cursor.execute(_MEMBER_TEAMS_SQL, [user.pk])
            read = [row[0] for row in cursor.fetchall()]
        setattr(user, _TEAMS_READ, read)
    return list(read)


def _forget_teams(user: Any) -> None:
    """A user object whose teams changed forgets the ones it read."""
    if hasattr(user, "__dict__"):
        user.__dict__.pop(_TEAMS_READ, None)


def lock_agent(agent_id: str) -> Agent | None:
    """The agent a write is about to name, read inside that write with its row locked
    (None: no such agent, now). Inside ``storage.write`` only.

    It is the lock an agent's delete takes before counting what names it
    (ops.agent_removal) and a claim's gate takes: a write that names the agent either
    waits for a racing delete and then finds no agent (refused as an unknown one), or
    holds the row first, so the delete waits and counts what it wrote (refused: still
    named). Without it a route or a routine committed just after the count, naming an
    agent that was then deleted. PostgreSQL: ``SELECT … FOR UPDATE``; SQLite's write
    transaction already holds the database."""
    rows = Agent.objects.filter(pk=agent_id)
    if connection.features.has_select_for_update:
        rows = rows.select_for_update()
    return rows.first()


def get_agent(agent_id: str) -> Agent:
    try:
        return Agent.objects.get(pk=agent_id)
    except Agent.DoesNotExist:
        raise NotFound(f"agent {agent_id!r} does not exist") from None


def _check_runtime(value: Any) -> str:
    if value not in Runtime.values:
        raise ValidationFailed(
            "runtime", f"unknown runtime {value!r}; one of {', '.join(Runtime.values)}"
        )
    return str(value)


def _check_kind(value: Any) -> str:
    if value is None:
        return ParticipantKind.AGENT
    if value not in ParticipantKind.values:
        raise ValidationFailed("participant_kind", "must be 'agent' or 'human'")
    return str(value)


def check_agent_labels(value: Any) -> list[str]:
    """An agent's labels: at most AGENT_LABELS_MAX, each non-empty and at most
    LABEL_MAX characters (claim-next asks one term a label: SQLite's compound
    SELECT holds 500). Stripped, repeats dropped."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(
        isinstance(x, str) and x.strip() and len(x) <= LABEL_MAX for x in value
    ):
        raise ValidationFailed(
            "labels", f"must be a list of non-empty strings of at most {LABEL_MAX} characters"
        )
    # A dict drops repeats in one pass (a list scanned per label was quadratic).
    labels = list(dict.fromkeys(item.strip() for item in value))
    if len(labels) > AGENT_LABELS_MAX:
        raise ValidationFailed("labels", f"at most {AGENT_LABELS_MAX} labels")
    for label in labels:
        # The rule a task's labels follow (board.checks.check_label): a route's "gpu"
        # never matched an agent's "gpu\u200b", which the board shows as "gpu".
        hidden = invisible_in_label(label)
        if hidden:
            raise ValidationFailed(
                "labels", f"label {label!r} holds an invisible character ({hidden})"
            )
    return labels


def check_max_concurrent(value: Any, *, nullable: bool = False) -> int | None:
    """An agent's (``nullable``: a team's, null for no limit) in_progress limit."""
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise ValidationFailed("max_concurrent", "must be an integer from 1 to 10000")
    return value


def create_agent(
    *,
    id: Any,  # noqa: A002 - the API's field name
    display_name: Any,
    team: Any,
    runtime: Any,
    participant_kind: Any = None,
    settings: Any = None,
    labels: Any = None,
    max_concurrent: Any = 1,
    owner: Any = None,
    operator: bool = True,
    approved_by: Any = None,
) -> Agent:
    """Register an agent owned by ``owner`` (None: only staff may act as it).

    ``operator`` says the caller may decide what the agent runs on the server (staff,
    the admin, the CLI); otherwise its runtime and settings must be allowlisted
    (:mod:`core.server_commands`, 403). An operator's save stamps their fingerprint.
    """
    aid = check_id(id, "id")
    name = check_text(display_name, "display_name", limit=200, required=True)
    tid = check_id(team, "team")
    rt = _check_runtime(runtime)
    kind = _check_kind(participant_kind)
    conf = agent_secrets.keep_stored(
        check_size(check_object(settings, "settings"), "settings"), {}, rt
    )
    tags = check_agent_labels(labels)
    limit = check_max_concurrent(1 if max_concurrent is None else max_concurrent) or 1
    check_runtime_settings(rt, conf)
    server_commands.check_agent_execution(rt, conf, operator=operator)

    def run() -> Agent:
        if Agent.objects.filter(pk=aid).exists():
            raise Conflict(f"agent {aid!r} already exists")
        taken = authors.agent_id_taken(aid)
        if taken is not None:
            # Its comments and chat lines would be signed as that person (or the server).
            raise Conflict(f"agent id {taken}: people and agents sign with one name", field="id")
        if not Team.objects.filter(pk=tid).exists():
            raise ValidationFailed("team", f"no team {tid!r}")
        _check_default_repository(conf, tid)
        return Agent.objects.create(
            id=aid,
            display_name=name,
            team_id=tid,
            runtime=rt,
            participant_kind=kind,
            settings=conf,
            labels=tags,
            max_concurrent=limit,
            owner=owner,
            approved_fingerprint=server_commands.fingerprint(rt, conf) if operator else "",
            approved_by=approved_by if operator else None,
        )

    return storage.write(run)


_AGENT_EDITABLE = (
    "display_name",
    "runtime",
    "participant_kind",
    "settings",
    "team",
    "owner",
    "labels",
    "max_concurrent",
)


def update_agent(
    agent_id: str, changes: dict[str, Any], *, operator: bool = True, approved_by: Any = None
) -> Agent:
    """Change an agent. A new runtime or settings from a non-operator must be
    allowlisted (403); an operator's change re-stamps the approved fingerprint."""
    extra = sorted(set(changes) - set(_AGENT_EDITABLE))
    if extra:
        raise ValidationFailed(extra[0], "unknown field in an agent update")
    clean: dict[str, Any] = {}
    if "display_name" in changes:
        clean["display_name"] = check_text(
            changes["display_name"], "display_name", limit=200, required=True
        )
    if "runtime" in changes:
        clean["runtime"] = _check_runtime(changes["runtime"])
    if "participant_kind" in changes:
        clean["participant_kind"] = _check_kind(changes["participant_kind"])
    if "settings" in changes:
        clean["settings"] = check_size(check_object(changes["settings"], "settings"), "settings")
    if "team" in changes:
        clean["team_id"] = check_id(changes["team"], "team")
    if "owner" in changes:
        clean["owner"] = changes["owner"]
    if "labels" in changes:
        clean["labels"] = check_agent_labels(changes["labels"])
    if "max_concurrent" in changes:
        clean["max_concurrent"] = check_max_concurrent(changes["max_concurrent"])

    def run() -> Agent:
        agent = get_agent(agent_id)
        if "team_id" in clean and not Team.objects.filter(pk=clean["team_id"]).exists():
            raise ValidationFailed("team", f"no team {clean['team_id']!r}")
        runtime = clean.get("runtime", agent.runtime)
        if "settings" in clean:
            # A secret handed back as the mask an answer carried keeps its stored value.
            clean["settings"] = agent_secrets.keep_stored(
                clean["settings"], agent.settings, runtime
            )
        conf = clean.get("settings", agent.settings)
        if "settings" in clean or "team_id" in clean:
            _check_default_repository(conf, clean.get("team_id", agent.team_id))
        executes = "runtime" in clean or "settings" in clean
        if executes:
            check_runtime_settings(runtime, conf)
            server_commands.check_agent_execution(runtime, conf, operator=operator)
        for name, value in clean.items():
            setattr(agent, name, value)
        if executes and operator:
            agent.approved_fingerprint = server_commands.fingerprint(runtime, conf)
            agent.approved_by = approved_by
        agent.save()
        return agent

    return storage.write(run)


def check_runtime_settings(runtime: str, conf: dict[str, Any]) -> None:
    """Refuse (400) settings the runtime could never run, when they are saved rather
    than at the agent's first run. ``argv`` not given yet is left to the worker,
    which says what is missing."""
    if runtime == "command" and "argv" in conf and not is_command_argv(conf["argv"]):
        raise ValidationFailed(
            "settings.argv",
            "must be a non-empty list of strings, the program and its arguments (no shell): "
            '["python3", "fix.py"]',
        )
    if not _seconds(conf.get("timeout_s")):
        raise ValidationFailed(
            "settings.timeout_s", "must be a number of seconds (0 or null: the default)"
        )


def _seconds(value: Any) -> bool:
    """Whether every run and review can read ``value`` as ``float(timeout_s or the
    default)``: anything else was saved, then crashed each run after its claim."""
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    try:
        return float(value) >= 0
    except ValueError:
        return False


def _check_default_repository(conf: dict[str, Any], team_id: str) -> None:
    """An agent's default repository (``settings.repository``) is one of its team's."""
    if conf.get("repository") is not None:
        repositories.of_team(conf["repository"], team_id, "settings.repository")


# "Not given" for a field whose null means something (no limit, no critic).
UNSET: Any = object()


def update_team(
    team_id: str,
    *,
    name: Any = None,
    members: Any = None,
    approval_required: Any = None,
    max_concurrent: Any = UNSET,
    reviewer_agent: Any = UNSET,
    by: Any = None,
) -> Team:
    """Change a team's settings in one write (the admin's save, ``PATCH
    /api/teams/{id}``): its name, members, whether its new tasks wait for a person's
    approval (tasks already filed keep theirs), ``max_concurrent`` (the most of its
    tasks ``in_progress`` at once, counted by the claim; None: no team limit) and
    ``reviewer_agent`` (its critic: an agent of the team, or None). Every field is
    checked before anything is written: a refusal writes nothing.

    ``by``: the person asking, when a person asks (every door but the server's own
    commands): changing the members is theirs only as
    :func:`core.roles.may_change_members` says (``403 forbidden`` otherwise)."""
    label = None if name is None else check_text(name, "name", limit=200, required=True)
    if approval_required is not None and not isinstance(approval_required, bool):
        raise ValidationFailed("approval_required", "must be true or false")
    limit = (
        UNSET if max_concurrent is UNSET else check_max_concurrent(max_concurrent, nullable=True)
    )
    if reviewer_agent is not UNSET and reviewer_agent is not None:
        if not isinstance(reviewer_agent, str):
            raise ValidationFailed("reviewer_agent", "must be an agent id or null")

    def run() -> Team:
        team = get_team(team_id)
        if members is not None and by is not None and not roles.may_change_members(by, team.id):
            raise Forbidden(
                f"only a superuser or a member of team {team.id!r} changes its members",
                field="members",
            )
        changed: list[str] = []
        if reviewer_agent is not UNSET:
            agent = None
            if reviewer_agent is not None:
                agent = Agent.objects.filter(pk=reviewer_agent).first()
                if agent is None or agent.team_id != team.id:
                    raise ValidationFailed(
                        "reviewer_agent", f"no agent {reviewer_agent!r} in team {team.id!r}"
                    )
                never = server_commands.never_run(agent)
                if never is not None:
                    # The critic is a run right after the gate; nobody runs a person
                    # (a person reviews in the review step, before approving).
                    raise ValidationFailed(
                        "reviewer_agent",
                        f"{never}: the critic is an agent's run after the "
                        "gate; name an agent of any runtime the executor runs",
                    )
            team.reviewer_agent = agent
            changed.append("reviewer_agent")
        if label is not None and label != team.name:
            team.name = label
            changed.append("name")
        if approval_required is not None and approval_required != team.approval_required:
            team.approval_required = approval_required
            changed.append("approval_required")
        if limit is not UNSET and limit != team.max_concurrent:
            team.max_concurrent = limit
            changed.append("max_concurrent")
        if changed:
            team.save(update_fields=changed)
        if members is not None:
            team.members.set(members)
            for member in members:
                _forget_teams(member)
        return team

    return storage.write(run)


def set_reviewer_agent(team_id: str, agent_id: Any) -> Team:
    """Name the team's critic (GOVERNANCE §4): an agent of that team, or None (no
    critic). ValidationFailed for an unknown agent or another team's."""
    return update_team(team_id, reviewer_agent=agent_id)


def delete_agent(agent_id: str) -> None:
    """Delete the agent's row; its API tokens, run credentials and machine-token
    bindings go with it. The caller has checked, in the same transaction, that no
    row on a higher floor still names it (``ops.agent_removal``): this floor cannot
    see tasks, runs, budgets or routines."""

    def run() -> None:
        agent = Agent.objects.select_for_update().filter(pk=agent_id).first()
        if agent is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        agent.delete()

    storage.write(run)


# --- dispatch state: pause, resume, health, the breaker's count ----------------------

REASON_MAX = 2_000


def pause_agent(agent_id: str, reason: Any, *, by: str) -> tuple[Agent, bool]:
    """Pause an agent (it claims nothing until resumed): ``(agent, True)`` when this
    paused it, ``(agent, False)`` when it was already paused (nothing written). The
    pause is an ``agent_paused`` event in its team's log: the notification."""
    text = check_text(reason if reason is not None else "", "reason", limit=REASON_MAX)

    def run() -> tuple[Agent, bool]:
        agent = Agent.objects.select_for_update().filter(pk=agent_id).first()
        if agent is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        if agent.state == AgentState.PAUSED:
            return agent, False
        agent.state = AgentState.PAUSED
        agent.state_reason = text or f"paused by {by}"
        agent.paused_by, agent.paused_at = by, timezone.now()
        agent.save(update_fields=["state", "state_reason", "paused_by", "paused_at", "updated_at"])
        events.append(
            agent.team_id,
            "agent_paused",
            {"agent_id": agent.id, "reason": agent.state_reason, "by": by},
        )
        return agent, True

    return storage.write(run)


def resume_agent(agent_id: str, *, by: str) -> Agent:
    """Let a paused agent take work again; its breaker's count starts over."""

    def run() -> Agent:
        agent = Agent.objects.select_for_update().filter(pk=agent_id).first()
        if agent is None:
            raise NotFound(f"agent {agent_id!r} does not exist")
        was_paused = agent.state == AgentState.PAUSED
        agent.state, agent.state_reason = AgentState.ACTIVE, ""
        agent.paused_by, agent.paused_at, agent.breaker_failures = "", None, 0
        agent.save(
            update_fields=[
                "state",
                "state_reason",
                "paused_by",
                "paused_at",
                "breaker_failures",
                "updated_at",
            ]
        )
        if was_paused:
            events.append(agent.team_id, "agent_resumed", {"agent_id": agent.id, "by": by})
        return agent

    return storage.write(run)


_HEALTH_SQL = (
    f"UPDATE {Agent._meta.db_table} SET health_ok = %s, health_detail = %s, "  # noqa: S608
    "health_checked_at = %s WHERE id = %s"
)


def record_health(agent_id: str, ok: bool, detail: str) -> None:
    """Store the last preflight of an agent (where a worker runs it). A plain UPDATE:
    it leaves ``updated_at`` alone, which tells the workers the agent changed."""
    at = connection.ops.adapt_datetimefield_value(timezone.now())

    def run() -> None:
        with connection.cursor() as cursor:
            cursor.execute(_HEALTH_SQL, [ok, detail[:REASON_MAX], at, agent_id])

    storage.write(run)


def forget_health(agent_ids: list[str]) -> None:
    """Drop the server's preflight verdict on agents a remote host now runs: the
    server's workers no longer probe them, so a failed check of the server's own
    machine would refuse the host's claims for good."""
    if agent_ids:
        storage.write(
            lambda: Agent.objects.filter(pk__in=agent_ids).update(
                health_ok=None, health_detail="", health_checked_at=None
            )
        )


_COUNT_FAILURE_SQL = (
    f"UPDATE {Agent._meta.db_table} SET breaker_failures = breaker_failures + 1 "  # noqa: S608
    "WHERE id = %s RETURNING breaker_failures"
)
_RESET_FAILURES_SQL = (
    f"UPDATE {Agent._meta.db_table} SET breaker_failures = 0 "  # noqa: S608
    "WHERE id = %s AND breaker_failures <> 0"
)


def breaker_count(agent_id: str) -> int:
    """The breaker's count as it stands: the agent's consecutive failed runs."""
    count = Agent.objects.filter(pk=agent_id).values_list("breaker_failures", flat=True).first()
    return int(count or 0)


def count_run(agent_id: str, *, failed: bool) -> int:
    """The breaker's count after one run: consecutive failures (a success resets it).
    One UPDATE, so workers of one agent on several hosts count together."""

    def run() -> int:
        with connection.cursor() as cursor:
            if not failed:
                cursor.execute(_RESET_FAILURES_SQL, [agent_id])
                return 0
            cursor.execute(_COUNT_FAILURE_SQL, [agent_id])
            row = cursor.fetchone()
        return 0 if row is None else int(row[0])

    return storage.write(run)
