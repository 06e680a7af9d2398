"""Export and import: a team (or everything) as JSON Lines, restored losslessly.

One JSON object a line, keys sorted, compact: a header ``{"type":
"clawboo-export", "version": 1, "team": …}``, then every row of each kind in a
fixed order (users, teams, agents, tasks, deps, comments, executions,
workspaces, events, chat, routines, fires), each kind sorted by its key, then a
trailer with the counts. Every concrete column is written as stored (datetimes
as ISO-8601 UTC with microseconds), so exporting what an import restored gives
the same bytes.

Left out, by design: passwords and API tokens (users are restored without a
usable password; agent tokens are not carried), agent settings whose key names a
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

from board.models import ExecutionProcess, Task, TaskComment, TaskDep, Workspace
from core import storage
from core.agent_secrets import without_secrets
from core.errors import ClawbooError, ValidationFailed
from core.models import Agent, ChatMessage, Event, Team
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


KINDS: tuple[Kind, ...] = (
    Kind("team", Team, ("id",), lambda t: Q(id=t)),
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
)
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

    users = get_user_model().objects.order_by("username")
    if team is not None:
        users = users.filter(pk__in=_users_of(team))
    report.counts["user"] = 0
    for user in users:
        fields = {name: dump_value(getattr(user, name)) for name in USER_FIELDS}
        report.counts["user"] += 1
        yield line({"type": "user", **fields})

    members: dict[str, list[str]] = {}
    for team_id, user_id in Team.members.through.objects.values_list("team_id", "user_id"):
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
            report.counts[kind.name] += 1
            yield line(record)
    yield line({"type": "end", "counts": dict(sorted(report.counts.items()))})


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
    """Records by type, checked for shape; a bad line is named by its number."""
    records: dict[str, list[dict[str, Any]]] = {}
    header = None
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationFailed("file", f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            raise ValidationFailed("file", f"line {number}: not a record with a 'type'")
        kind = record.pop("type")
        if header is None:
            if kind != FORMAT or record.get("version") != VERSION:
                raise ValidationFailed("file", f"line 1: not a {FORMAT} version {VERSION} file")
            header = record
            continue
        if kind == "end":
            continue
        if kind != "user" and kind not in BY_NAME:
            raise ValidationFailed("file", f"line {number}: unknown record type {kind!r}")
        records.setdefault(kind, []).append(record)
    if header is None:
        raise ValidationFailed("file", "empty: no export header")
    return records


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


def import_lines(lines: Iterable[str]) -> dict[str, int]:
    """Restore an export into an empty database; returns the rows restored by type.

    All or nothing: one transaction; any bad record writes nothing.
    """
    records = parse(lines)

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
        return counts

    return storage.write(run)


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
    for row in rows:
        model._default_manager.filter(pk=row["id"]).update(
            **{column.attname: load_value(column, row[column.attname]) for column in stamped}
        )


def _reset_sequences(restored: list[type[models.Model]]) -> None:
    """PostgreSQL: serial ids continue past the restored ones."""
    statements = connection.ops.sequence_reset_sql(no_style(), restored)
    if statements:
        with connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)
