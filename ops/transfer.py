"""Export and import: a team (or everything) as JSON Lines, restored losslessly.

One JSON object a line, keys sorted, compact: a header ``{"type":
"clawboo-export", "version": 1, "team": …}``, then every row of each kind in a
fixed order (users, teams, repositories, agents, tasks, deps, comments,
executions, workspaces, events, chat, routines, fires, budgets, tool approvals,
tool grants, machine bindings), each kind sorted by its key, then a trailer with
the counts. Task approvals are columns of their task. Every concrete column is
written as stored (datetimes as ISO-8601 UTC with microseconds), so exporting
what an import restored gives the same bytes.

Left out, by design: passwords and API tokens (users are restored without a
usable password; agent tokens are not carried), machine tokens' keys and service
users (a live token is exported as its binding, host and agents, and the import
mints it a new key to give to that host), agent settings whose key names a
secret (:mod:`core.agent_secrets`), and what is not the team's work —
heartbeats, idempotency records, notification channels (they hold secrets) and
the django-q2 queue. Columns that point at a user (an agent's owner, who
approved it) are written as usernames. An agent whose settings lost a secret no
longer matches its approval fingerprint: the executor will not run it until an
operator puts the secret back and saves it.

:func:`import_lines` restores into an empty database (nothing but the pristine
``default`` team and, perhaps, users) in one transaction: the restore writes
back exactly the rows an export read, so it bypasses the data layers the way
Django's ``loaddata`` does, and refuses a database that holds any work.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.contrib.auth import get_user_model
from django.core.management.color import no_style
from django.db import connection, models
from django.db.models import Q

from board.models import (
    Budget,
    ExecutionProcess,
    Task,
    TaskComment,
    TaskDep,
    ToolApproval,
    ToolGrant,
    Workspace,
)
from core import machines, registry, storage
from core.agent_secrets import without_secrets
from core.checks import check_storable
from core.errors import ClawbooError, ValidationFailed
from core.models import Agent, ChatMessage, Event, Forge, MachineToken, Repository, Team
from core.repositories import FORGE_SECRETS
from routines.models import Routine, RoutineFire

FORMAT = "clawboo-export"
VERSION = 1
USER_FIELDS = (
    "username",
    "email",
    "first_name",
    "last_name",
    "is_active",
    "is_staff",
    "is_superuser",
    "date_joined",
)
BATCH = 1000


class ImportRefused(ClawbooError):
    code = "import_refused"


@dataclass(frozen=True)
class Kind:
    """One record type: its model, how it is ordered, and how it is scoped to a team."""

    name: str
    model: type[models.Model]
    order: tuple[str, ...]
    team_filter: Callable[[str], Q]


def _of_team_agents(team: str) -> Q:
    return Q(agent_id__in=Agent.objects.filter(team_id=team).values("id"))


KINDS: tuple[Kind, ...] = (
    Kind("team", Team, ("id",), lambda t: Q(id=t)),
    # Before the tasks and agents that name it.
    Kind("repository", Repository, ("id",), lambda t: Q(team_id=t)),
    # A repository's forge, without its token and webhook secret (set them again).
    Kind("forge", Forge, ("repository_id",), lambda t: Q(repository__team_id=t)),
    Kind("agent", Agent, ("id",), lambda t: Q(team_id=t)),
    Kind("task", Task, ("id",), lambda t: Q(team_id=t)),
    Kind("task_dep", TaskDep, ("task_id", "depends_on_id"), lambda t: Q(task__team_id=t)),
    Kind("comment", TaskComment, ("id",), lambda t: Q(task__team_id=t)),
    Kind("execution", ExecutionProcess, ("id",), lambda t: Q(task__team_id=t)),
    Kind("workspace", Workspace, ("id",), lambda t: Q(task__team_id=t)),
    Kind("event", Event, ("team_id", "seq"), lambda t: Q(team_id=t)),
    Kind("chat", ChatMessage, ("id",), lambda t: Q(team_id=t)),
    Kind("routine", Routine, ("id",), lambda t: Q(team_id=t)),
    Kind("routine_fire", RoutineFire, ("id",), lambda t: Q(routine__team_id=t)),
    Kind("budget", Budget, ("id",), lambda t: Q(team_id=t)),
    Kind("tool_approval", ToolApproval, ("id",), lambda t: Q(team_id=t)),
    # allow_always: the agent runs the tool without asking again.
    Kind("tool_grant", ToolGrant, ("id",), _of_team_agents),
)
# A live machine token's binding (host → agents), without its key: restored by
# minting a new key (:func:`import_lines` reports it, once, to give to the host).
BINDING = "machine_binding"
BY_NAME = {kind.name: kind for kind in KINDS}


# --- values --------------------------------------------------------------------------


def dump_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return value


def load_value(model_field: models.Field[Any, Any], value: Any) -> Any:
    if value is not None and isinstance(model_field, models.DateTimeField):
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return list(model._meta.concrete_fields)


def _user_columns(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    """Columns that point at a user: written as the username (ids differ between
    databases)."""
    return [
        column
        for column in _columns(model)
        if column.is_relation and column.related_model is get_user_model()
    ]


def _users_of(team: str) -> set[int]:
    """The users a team's export names: its members, and whoever its rows point at."""
    found = set(Team.members.through.objects.filter(team_id=team).values_list("user_id", flat=True))
    for kind in KINDS:
        for column in _user_columns(kind.model):
            found |= set(
                kind.model._default_manager.filter(kind.team_filter(team))
                .exclude(**{column.attname: None})
                .values_list(column.attname, flat=True)
            )
    return found


# --- export --------------------------------------------------------------------------


@dataclass
class ExportReport:
    counts: dict[str, int] = field(default_factory=dict)
    redacted: list[str] = field(default_factory=list)


def export_lines(team: str | None = None, report: ExportReport | None = None) -> Iterator[str]:
    """The export of ``team`` (or of everything), line by line."""
    report = report if report is not None else ExportReport()
    if team is not None and not Team.objects.filter(pk=team).exists():
        raise ValidationFailed("team", f"no team {team!r}")
    yield line({"type": FORMAT, "version": VERSION, "team": team})
    usernames = dict(get_user_model().objects.values_list("pk", "username"))

    # A machine token's service user goes with its key: a binding is restored by
    # minting a new one (and a new service user).
    machine_users = set(MachineToken.objects.values_list("user_id", flat=True))
    users = get_user_model().objects.order_by("username").exclude(pk__in=machine_users)
    if team is not None:
        users = users.filter(pk__in=_users_of(team))
    report.counts["user"] = 0
    for user in users:
        fields = {name: dump_value(getattr(user, name)) for name in USER_FIELDS}
        report.counts["user"] += 1
        yield line({"type": "user", **fields})

    members: dict[str, list[str]] = {}
    for team_id, user_id in Team.members.through.objects.values_list("team_id", "user_id"):
        if user_id not in machine_users:
            members.setdefault(team_id, []).append(usernames[user_id])

    for kind in KINDS:
        rows = kind.model._default_manager.order_by(*kind.order)
        if team is not None:
            rows = rows.filter(kind.team_filter(team))
        columns = _columns(kind.model)
        report.counts[kind.name] = 0
        for row in rows.iterator(chunk_size=BATCH):
            record: dict[str, Any] = {"type": kind.name}
            for column in columns:
                record[column.attname] = dump_value(getattr(row, column.attname))
            for column in _user_columns(kind.model):
                user_id = record.pop(column.attname)
                record[column.name] = None if user_id is None else usernames.get(user_id)
            if kind.model is Team:
                record["members"] = sorted(members.get(row.pk, []))
            elif kind.model is Agent:
                record["settings"], dropped = without_secrets(record["settings"], record["runtime"])
                report.redacted += [f"agent {row.pk}: {where}" for where in dropped]
            elif kind.model is Forge:
                # Left blank: an import restores the forge, a person sets its secrets.
                for name in FORGE_SECRETS:
                    if record.get(name):
                        report.redacted.append(f"forge of repository {row.pk}: {name}")
                    record[name] = ""
            report.counts[kind.name] += 1
            yield line(record)
    report.counts[BINDING] = 0
    for binding in _bindings(team):
        report.counts[BINDING] += 1
        yield line(binding)
    yield line({"type": "end", "counts": dict(sorted(report.counts.items()))})


def _bindings(team: str | None) -> Iterator[dict[str, Any]]:
    """Each live machine token as its host and the agents (of ``team``) it binds:
    never its key, its hash or its service user."""
    tokens = (
        MachineToken.objects.filter(revoked_at__isnull=True)
        .order_by("host", "id")
        .prefetch_related("agents")
    )
    for token in tokens:
        agents = sorted(a.id for a in token.agents.all() if team is None or a.team_id == team)
        if agents:
            yield {
                "type": BINDING,
                "host": token.host,
                "agents": agents,
                "created_at": dump_value(token.created_at),
            }


def export_to(out: IO[str], team: str | None = None) -> ExportReport:
    report = ExportReport()
    for text in export_lines(team, report):
        out.write(text)
    return report


# --- import --------------------------------------------------------------------------


def _work_present() -> list[str]:
    found = []
    for kind in KINDS:
        if kind.model is Team:
            continue
        count = kind.model._default_manager.count()
        if count:
            found.append(f"{count} {kind.name}(s)")
    teams = Team.objects.exclude(pk="default").count()
    if teams or Team.objects.filter(pk="default", last_event_seq__gt=0).exists():
        found.append(f"{teams} team(s) besides a used 'default'" if teams else "a used 'default'")
    return found


def parse(lines: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """Records by type, the whole file checked before anything is written: each
    record's shape, columns, types and text (:func:`check_record`), then the file
    as a whole (:func:`check_file`). The first fault found is refused, named by its
    line: ``ValidationFailed("file", "line 7: task record: status 'finished' is
    not one of …")``."""
    records: dict[str, list[dict[str, Any]]] = {}
    numbers: dict[str, list[int]] = {}
    header = None
    trailer: tuple[int, dict[str, Any]] | None = None
    number = 0
    try:
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValidationFailed("file", f"line {number}: not JSON ({exc.msg})") from None
            except RecursionError:
                raise ValidationFailed("file", f"line {number}: nested too deep") from None
            if not isinstance(record, dict) or not isinstance(record.get("type"), str):
                raise ValidationFailed("file", f"line {number}: not a record with a 'type'")
            kind = record.pop("type")
            if header is None:
                if kind != FORMAT or record.get("version") != VERSION:
                    raise ValidationFailed("file", f"line 1: not a {FORMAT} version {VERSION} file")
                header = record
                continue
            if trailer is not None:
                raise ValidationFailed("file", f"line {number}: a record after the end record")
            if kind == "end":
                trailer = (number, record)
                continue
            if kind not in ("user", BINDING) and kind not in BY_NAME:
                raise ValidationFailed("file", f"line {number}: unknown record type {kind!r}")
            if kind == BINDING:
                check_binding(record, number)
            else:
                check_record(kind, record, number)
            records.setdefault(kind, []).append(record)
            numbers.setdefault(kind, []).append(number)
    except UnicodeDecodeError:
        raise ValidationFailed("file", f"line {number + 1}: not UTF-8 text") from None
    if header is None:
        raise ValidationFailed("file", "empty: no export header")
    check_file(records, numbers, trailer, number)
    return records


# --- the checks an import makes before it writes ---------------------------------------


def _allowed_columns(kind: str) -> dict[str, models.Field[Any, Any] | None]:
    """The keys a record of ``kind`` may carry: its model's columns as exported (a
    user column under its name, holding a username), plus ``members`` for a team."""
    if kind == "user":
        return {name: _user_field(name) for name in USER_FIELDS}
    model = BY_NAME[kind].model
    user_columns = {column.attname for column in _user_columns(model)}
    allowed: dict[str, models.Field[Any, Any] | None] = {}
    for column in _columns(model):
        allowed[column.name if column.attname in user_columns else column.attname] = (
            None if column.attname in user_columns else column
        )
    if model is Team:
        allowed["members"] = None
    return allowed


def check_record(kind: str, record: dict[str, Any], number: int) -> None:
    """One record's columns (none unknown, none missing), each value's type, range,
    length and choice, and its text (no NUL or lone surrogate, on any database)."""
    where = f"line {number}: {kind} record"
    allowed = _allowed_columns(kind)
    for key in record:
        if key not in allowed:
            raise ValidationFailed("file", f"{where}: unknown column {key!r}")
    for name, column in allowed.items():
        if name not in record:
            if kind == "user" and name != "username":
                continue  # a user's optional fields default
            if column is None and name != "members":
                continue  # a user reference left out is no reference
            if name == "members":
                continue
            raise ValidationFailed("file", f"{where}: no {name!r} column")
        value = record[name]
        try:
            check_storable(value, name)
        except ValidationFailed as exc:
            raise ValidationFailed("file", f"{where}: {exc.detail}") from None
        if column is None:
            if name == "members":
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValidationFailed("file", f"{where}: members must be a list of usernames")
            elif value is not None and not isinstance(value, str):
                raise ValidationFailed("file", f"{where}: {name} must be a username or null")
            continue
        problem = _value_problem(column, value)
        if problem:
            raise ValidationFailed("file", f"{where}: {name} {problem}")
    if kind == "agent":
        _check_agent(record, where)


def _check_agent(record: dict[str, Any], where: str) -> None:
    """An agent's labels under the rules the registry keeps on every write: an export
    from before the cap can hold more, and an agent restored with them is one whose
    every claim-next fails. Refused, not trimmed: which labels to drop decides which
    tasks the agent takes, so that is the operator's call (edit the file)."""
    try:
        registry.check_agent_labels(record["labels"])
    except ValidationFailed as exc:
        raise ValidationFailed(
            "file", f"{where}: {exc.detail} (agent {record['id']!r}: trim them in the file)"
        ) from None


def check_binding(record: dict[str, Any], number: int) -> None:
    """A machine binding: a host, the agents it binds, when it was minted."""
    where = f"line {number}: {BINDING} record"
    if set(record) != {"host", "agents", "created_at"}:
        raise ValidationFailed("file", f"{where}: holds host, agents and created_at only")
    host, agents = record["host"], record["agents"]
    if not isinstance(host, str) or not 0 < len(host.strip()) <= 200:
        raise ValidationFailed("file", f"{where}: host must be a name of 1 to 200 characters")
    if not isinstance(agents, list) or not agents or not all(isinstance(a, str) for a in agents):
        raise ValidationFailed("file", f"{where}: agents must be a list of agent ids")
    problem = _value_problem(_minted_at(), record["created_at"])
    if problem:
        raise ValidationFailed("file", f"{where}: created_at {problem}")
    for value in (host, *agents):
        try:
            check_storable(value, "binding")
        except ValidationFailed as exc:
            raise ValidationFailed("file", f"{where}: {exc.detail}") from None


def _value_problem(column: models.Field[Any, Any], value: Any) -> str | None:
    if value is None:
        return None if column.null else "must not be null"
    if isinstance(column, models.JSONField):
        return None
    if isinstance(column, models.BooleanField):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(column, models.DateTimeField):
        if not isinstance(value, str):
            return "must be an ISO-8601 time"
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return f"{value[:40]!r} is not an ISO-8601 time"
        return None if parsed.tzinfo is not None else "must carry its UTC offset"
    target = getattr(column, "target_field", column) if column.is_relation else column
    if isinstance(target, models.IntegerField):
        if not isinstance(value, int) or isinstance(value, bool):
            return "must be an integer"
        low, high = connection.ops.integer_field_range(target.get_internal_type())
        if (low is not None and value < low) or (high is not None and value > high):
            return f"{value} is out of range"
        return None
    if isinstance(target, models.FloatField):
        return (
            None
            if isinstance(value, int | float) and not isinstance(value, bool)
            else ("must be a number")
        )
    if isinstance(target, models.CharField | models.TextField):
        if not isinstance(value, str):
            return "must be text"
        if target.max_length is not None and len(value) > target.max_length:
            return f"is longer than {target.max_length} characters"
        if column.choices and not (value == "" and column.blank):
            allowed = [str(choice) for choice, _ in column.flatchoices]
            if value not in allowed:
                return f"{value[:40]!r} is not one of {', '.join(allowed)}"
    return None


def _key(kind: Kind, record: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(record.get(name) for name in kind.order)


def _numbered(
    kind: str, records: dict[str, list[dict[str, Any]]], numbers: dict[str, list[int]]
) -> Iterator[tuple[int, dict[str, Any]]]:
    return zip(numbers.get(kind, []), records.get(kind, []), strict=True)


def check_file(
    records: dict[str, list[dict[str, Any]]],
    numbers: dict[str, list[int]],
    trailer: tuple[int, dict[str, Any]] | None,
    last_line: int,
) -> None:
    """The file as a whole: it ends with its end record (else it was cut short),
    whose counts match the records; no key twice; every reference names a record of
    the file (or the pristine ``default`` team) and every user a user record."""
    if trailer is None:
        raise ValidationFailed(
            "file", f"truncated: no end record after line {last_line} (an incomplete copy?)"
        )
    end_line, end = trailer
    counts = end.get("counts")
    if not isinstance(counts, dict):
        raise ValidationFailed("file", f"line {end_line}: the end record has no counts")
    for kind in sorted(set(counts) | set(records)):
        held = len(records.get(kind, []))
        said = counts.get(kind, 0)
        if said != held:
            raise ValidationFailed(
                "file",
                f"line {end_line}: the end record counts {said!r} {kind} record(s), "
                f"the file holds {held}",
            )
    keys: dict[str, set[Any]] = {}
    usernames: set[str] = set()
    for number, user in _numbered("user", records, numbers):
        if user["username"] in usernames:
            raise ValidationFailed("file", f"line {number}: user {user['username']!r} twice")
        usernames.add(user["username"])
    for kind in KINDS:
        seen: set[tuple[Any, ...]] = set()
        for number, record in zip(
            numbers.get(kind.name, []), records.get(kind.name, []), strict=True
        ):
            key = _key(kind, record)
            if key in seen:
                raise ValidationFailed("file", f"line {number}: {kind.name} {key!r} twice")
            seen.add(key)
        if kind.model._meta.pk is not None and kind.model._meta.pk.attname in kind.order:
            keys[kind.name] = {key[0] for key in seen}
    by_model = {kind.model: kind.name for kind in KINDS}
    for kind in KINDS:
        user_columns = _user_columns(kind.model)
        references = [
            column
            for column in _columns(kind.model)
            if column.is_relation and column.related_model in by_model
        ]
        for number, record in zip(
            numbers.get(kind.name, []), records.get(kind.name, []), strict=True
        ):
            for column in references:
                value = record.get(column.attname)
                if value is None:
                    continue
                target = by_model[column.related_model]  # type: ignore[index]
                if value in keys.get(target, set()):
                    continue
                if target == "team" and value == "default":
                    continue  # the pristine default team of the database restored into
                raise ValidationFailed(
                    "file",
                    f"line {number}: {kind.name} record: {column.attname} {value!r} "
                    f"names no {target} record of the file",
                )
            for column in user_columns:
                name = record.get(column.name)
                if name is not None and name not in usernames:
                    raise ValidationFailed(
                        "file",
                        f"line {number}: {kind.name} record: {column.name} {name!r} "
                        "names no user record of the file",
                    )
            members = record.get("members") if kind.model is Team else None
            for name in members or ():
                if name not in usernames:
                    raise ValidationFailed(
                        "file",
                        f"line {number}: team record: member {name!r} names no user record",
                    )
    for number, binding in _numbered(BINDING, records, numbers):
        for agent_id in binding["agents"]:
            if agent_id not in keys.get("agent", set()):
                raise ValidationFailed(
                    "file",
                    f"line {number}: {BINDING} record: agent {agent_id!r} names no agent record",
                )


def _instances(kind: Kind, rows: list[dict[str, Any]], users: dict[str, Any]) -> list[models.Model]:
    user_columns = {column.attname for column in _user_columns(kind.model)}
    made = []
    for row in rows:
        values = {}
        for column in _columns(kind.model):
            if column.attname in user_columns:
                # A user the export did not carry (or no user): the reference is dropped.
                user = users.get(row.get(column.name) or "")
                values[column.attname] = user.pk if user is not None else None
                continue
            if column.attname not in row:
                raise ValidationFailed("file", f"{kind.name} record without {column.attname!r}")
            values[column.attname] = load_value(column, row[column.attname])
        made.append(kind.model(**values))
    return made


@dataclass(frozen=True)
class Reminted:
    """A machine binding restored with a new key: the host's worker needs it
    (``clawboo worker --token``); the old key authenticates nowhere here."""

    host: str
    agents: tuple[str, ...]
    key: str


def import_lines(lines: Iterable[str], reminted: list[Reminted] | None = None) -> dict[str, int]:
    """Restore an export into an empty database; returns the rows restored by type.
    Each machine binding is minted a new key (appended to ``reminted``: shown
    once, as ``create_machine_token`` shows one), so its agents stay with their
    host and the server's workers leave them alone from the start.

    All or nothing: one transaction; any bad record writes nothing.
    """
    records = parse(lines)
    minted: list[Reminted] = []

    def run() -> dict[str, int]:
        present = _work_present()
        if present:
            raise ImportRefused("the database is not empty: " + ", ".join(present))
        counts: dict[str, int] = {}
        User = get_user_model()
        users = {}
        for row in records.get("user", []):
            user = User.objects.filter(username=row["username"]).first()
            if user is None:
                values = {
                    name: load_value(_user_field(name), row[name])
                    for name in USER_FIELDS
                    if name in row
                }
                user = User(**values)
                user.set_unusable_password()
                user.save()
            users[user.username] = user
        counts["user"] = len(users)

        team_rows = records.get("team", [])
        if any(row["id"] == "default" for row in team_rows):
            Team.objects.filter(pk="default").delete()  # pristine: replaced by the export's
        restored: list[type[models.Model]] = []
        for kind in KINDS:
            rows = records.get(kind.name, [])
            instances = _instances(kind, rows, users)
            kind.model._default_manager.bulk_create(instances, batch_size=BATCH)
            if kind.model is Team:
                links = [
                    Team.members.through(team_id=row["id"], user_id=users[name].pk)
                    for row in rows
                    for name in row.get("members") or []
                    if name in users
                ]
                Team.members.through.objects.bulk_create(links, batch_size=BATCH)
            _restamp(kind.model, rows)
            counts[kind.name] = len(instances)
            restored.append(kind.model)
        _reset_sequences(restored)
        minted.clear()  # a re-run of the transaction mints afresh
        for row in records.get(BINDING, []):
            token, key = machines.mint(row["host"], row["agents"])
            MachineToken.objects.filter(pk=token.pk).update(
                created_at=load_value(_minted_at(), row["created_at"])
            )
            minted.append(Reminted(token.host, tuple(row["agents"]), key))
        counts[BINDING] = len(minted)
        return counts

    counts = storage.write(run)
    if reminted is not None:
        reminted.extend(minted)
    return counts


def _minted_at() -> models.Field[Any, Any]:
    found = MachineToken._meta.get_field("created_at")
    assert isinstance(found, models.Field)
    return found


def _user_field(name: str) -> models.Field[Any, Any]:
    found = get_user_model()._meta.get_field(name)
    assert isinstance(found, models.Field)
    return found


def _restamp(model: type[models.Model], rows: list[dict[str, Any]]) -> None:
    """An insert stamps ``auto_now``/``auto_now_add`` columns with the present time:
    put the exported values back."""
    stamped = [
        column
        for column in _columns(model)
        if getattr(column, "auto_now", False) or getattr(column, "auto_now_add", False)
    ]
    if not stamped:
        return
    key = model._meta.pk.attname  # "id", or a one-to-one's column (a forge's)
    for row in rows:
        model._default_manager.filter(pk=row[key]).update(
            **{column.attname: load_value(column, row[column.attname]) for column in stamped}
        )


def _reset_sequences(restored: list[type[models.Model]]) -> None:
    """PostgreSQL: serial ids continue past the restored ones."""
    statements = connection.ops.sequence_reset_sql(no_style(), restored)
    if statements:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
