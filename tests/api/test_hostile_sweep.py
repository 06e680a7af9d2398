"""The API as a hostile caller meets it, walked from the OpenAPI schema: for every
operation, a staff caller (who passes every role check, so the input itself is what
gets judged) sends bodies that are not objects, a megabyte in one field, odd
unicode, numbers no column holds, path ids that do not exist or are another team's,
and query parameters of the wrong type, repeated, or out of range. Every answer is
below 500, every error is the envelope (API.md "Errors") and short (a refusal names
what it refuses; it does not send the megabyte back), and no 4xx writes anything:
no INSERT, UPDATE or DELETE of the request stands (the SQL it ran, watched on the
connection), and every table's row count is what it was.

Hand-rolled, not schemathesis: the values that break a server are known (NUL and a
lone surrogate on PostgreSQL, an integer past 64 bits, a string past a column's
width), and a table sends each to every field in a few seconds, deterministically;
tests/api/test_schemathesis.py keeps the random walk. Each request runs in a
transaction that is rolled back, so every one meets the same world."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.apps import apps
from django.db import connection, transaction
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from board import store
from board.store import spend
from core import registry, repositories
from routines import store as routines_store
from routines.schedules import ROUTINE_SOURCE
from tests.api.conftest import make_client
from tests.api.test_refusal_order import EXCLUDED, request_schema, shaped
from tests.api.test_refusal_order import world as world  # noqa: F401 - the fixture
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db

MB = "x" * (1 << 20)
# Text a person may well send (kept or refused, never a 500): an RTL override, 4-byte
# emoji (one a ZWJ sequence), a pile of combining marks and zero-width characters,
# in every text field at once. NUL and a lone surrogate no database stores (400).
ODD_TEXT = "\u202eevil\u202c.txt 😀🧑\u200d💻 e" + "\u0301" * 200 + "\u200b\ufeff"
UNSTORABLE = {"NUL": "a\x00b", "lone surrogate": "\ud800"}
# Numbers no 64-bit column holds, and one a count must not be.
NUMBERS = {"2**63": 2**63, "-1": -1, "10**30": 10**30}
REFUSED = set(range(400, 500))
# A refusal names what it refuses in a sentence: it never sends the megabyte back.
ERROR_BODY_MAX = 4096
NOT_OBJECTS = {
    "malformed": b"{",
    "array": b"[1]",
    "string": b'"x"',
    "number": b"3",
    "1e309": b'{"x": 1e309}',
}
# A path id: absent, a 64-bit overflow, long and odd.
PATH_IDS = {"absent": "no-such-thing", "2**63": str(2**63), "long emoji": "😀\u202e" * 300}
INTEGER_QUERY = ["abc", "-1", str(2**63), "1e309", "1.5"]
ODD_QUERY = "😀\u202e" + "a" * 5000


def operations() -> list[tuple[str, str, dict[str, Any], list[dict[str, Any]]]]:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    components = generated.get("components", {}).get("schemas", {})
    found = []
    for route, ops in sorted(generated["paths"].items()):
        for method, operation in ops.items():
            if f"{method.upper()} {route}" in EXCLUDED:
                continue
            found.append(
                (
                    method.upper(),
                    route,
                    request_schema(operation, components),
                    operation.get("parameters", []),
                )
            )
    return found


def _stamp_columns() -> list[str]:
    """One SELECT's columns: each table's row count and its latest ``auto_now``."""
    columns = []
    for model in apps.get_models():
        meta = model._meta
        if meta.app_label in {"sessions", "admin", "contenttypes"} or not meta.managed:
            continue
        table = connection.ops.quote_name(meta.db_table)
        columns.append(f"(SELECT COUNT(*) FROM {table})")
        for field in meta.concrete_fields:
            if getattr(field, "auto_now", False):
                column = connection.ops.quote_name(field.column)
                columns.append(f"(SELECT CAST(MAX({column}) AS TEXT) FROM {table})")
    return columns


def snapshot(columns: list[str]) -> Any:
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(columns))
        return cursor.fetchone()


_WRITE = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
_SAVEPOINT = re.compile(r'\s*(SAVEPOINT|RELEASE SAVEPOINT|ROLLBACK TO SAVEPOINT)\s+"?(\w+)"?', re.I)


class Writes:
    """The writes a request left standing: every INSERT, UPDATE or DELETE it ran on
    the connection, less those a savepoint of its own rolled back (a data layer that
    wrote, then refused, and undid it, wrote nothing)."""

    def __init__(self) -> None:
        self.standing: list[str] = []
        self.marks: list[tuple[str, int]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        text = str(sql)
        point = _SAVEPOINT.match(text)
        if point is not None:
            kind, name = point.group(1).upper(), point.group(2)
            if kind == "SAVEPOINT":
                self.marks.append((name, len(self.standing)))
            elif any(mark == name for mark, _ in self.marks):
                while self.marks:
                    mark, at = self.marks.pop()
                    if mark == name:
                        if kind.startswith("ROLLBACK"):
                            del self.standing[at:]
                        break
        elif _WRITE.match(text):
            self.standing.append(text[:120])
        return execute(sql, params, many, context)


@pytest.fixture
def hostile(world) -> dict[str, Any]:  # noqa: F811 - the imported fixture
    """The refusal-order world, plus a team ``blue`` that holds one of each object a
    path names; the world's plain member (of default only) must never reach them."""
    registry.create_team("blue", "Blue")
    registry.create_agent(
        id="blue-bot",
        display_name="B",
        team="blue",
        runtime="command",
        settings={"argv": ["true"]},
        max_concurrent=5,
    )
    theirs = store.create_task(title="blue", team="blue", file_mutating=False).task.id
    held = store.create_task(title="blue held", team="blue", file_mutating=False).task.id
    ticket = store.claim(held, "blue-bot", "command").ticket
    run = store.open_execution(held, ticket)
    budget = spend.create_budget(
        "blue", {"scope": "team", "scope_id": "blue", "window": "month", "limit_cents": 1}
    )
    routine = routines_store.create_routine(agent_id="blue-bot", team="blue", cron_spec="0 * * * *")
    base = Path(world["values"]["path"]).parent
    repo = repositories.register(team="blue", path=str(make_repo(base / "blue")), id="bl")
    asked = store.ask_tool_call(held, "blue-bot", "Bash", {"command": "ls"}, "toolu_2")
    assert asked is not None
    # The routine source's own id, so a schedule's path reaches the routine.
    ours = f"{ROUTINE_SOURCE}:{world['params']['routine_id']}"
    return {
        **world,
        "params": {**world["params"], "schedule_id": ours},
        "member": world["callers"]["member"],
        "theirs": {
            "task_id": theirs,
            "dep_id": held,
            "execution_id": str(run.id),
            "budget_id": str(budget.pk),
            "routine_id": routine.id,
            "schedule_id": f"{ROUTINE_SOURCE}:{routine.id}",
            "repo_id": repo.id,
            "agent_id": "blue-bot",
            "team_id": "blue",
            "approval_id": asked.id,
        },
        "blue_held": held,
    }


def absent(name: str) -> set[int]:
    """What a path naming nothing answers: 404 (or 400 for an id no object could
    have). Removing a dependency that is not there is done already: 204, the same
    answer whether the task exists elsewhere or nowhere."""
    return {400, 404, 204} if name == "dep_id" else {400, 404}


def url_for(route: str, params: dict[str, str]) -> str:
    for name, value in params.items():
        route = route.replace(f"{{{name}}}", value)
    return route


class Sweep:
    """Sends each request in a rolled-back transaction and keeps what went wrong."""

    def __init__(self) -> None:
        self.columns = _stamp_columns()
        self.wrong: list[str] = []
        self.sent = 0

    def send(
        self,
        client: APIClient,
        method: str,
        url: str,
        raw: bytes | None,
        what: str,
        *,
        expect: set[int] | None = None,
    ) -> int:
        self.sent += 1
        writes = Writes()
        with transaction.atomic():
            before = snapshot(self.columns)
            with connection.execute_wrapper(writes):
                if raw is None:
                    response = client.generic(method, url)
                else:
                    response = client.generic(method, url, raw, content_type="application/json")
            after = snapshot(self.columns) if 400 <= response.status_code < 500 else before
            transaction.set_rollback(True)
        status = response.status_code
        label = f"{method} {url[:120]} [{what}] -> {status}"
        if status >= 500:
            self.wrong.append(f"{label}: {response.content[:200]!r}")
            return status
        if status >= 400:
            self._envelope(response, label)
            if after != before or writes.standing:
                self.wrong.append(f"{label}: wrote on a refusal {writes.standing[:3]}")
        if expect is not None and status not in expect:
            self.wrong.append(f"{label}: expected one of {sorted(expect)}")
        return status

    def _envelope(self, response: Any, label: str) -> None:
        if len(response.content) > ERROR_BODY_MAX:
            self.wrong.append(f"{label}: a refusal of {len(response.content)} bytes")
        if not response.get("Content-Type", "").startswith("application/json"):
            self.wrong.append(f"{label}: not JSON ({response.get('Content-Type')})")
            return
        body = json.loads(response.content)
        if not (
            isinstance(body, dict)
            and isinstance(body.get("error"), str)
            and isinstance(body.get("detail"), str)
            and body["detail"]
        ):
            self.wrong.append(f"{label}: not the envelope: {response.content[:200]!r}")


def field_type(spec: dict[str, Any]) -> str | None:
    if "enum" in spec:
        return "string"
    return spec.get("type")


def hostile_bodies(
    schema: dict[str, Any], valid: dict[str, Any]
) -> Iterator[tuple[str, bytes, set[int] | None]]:
    """(what, raw body, the statuses it may get: None for any below 500)."""
    # Refused, if not for the body then for what the path names first (a task with
    # no workspace is a 404 whatever the body).
    for what, raw in NOT_OBJECTS.items():
        yield what, raw, REFUSED
    properties = schema.get("properties", {})
    texts = [name for name, spec in properties.items() if field_type(spec) == "string"]
    for what, text in {"odd text": ODD_TEXT, **UNSTORABLE}.items():
        if texts:
            body = {**valid, **dict.fromkeys(texts, text)}
            raw = json.dumps(body, ensure_ascii=True).encode()
            yield f"{what} in {', '.join(texts)}", raw, REFUSED if what in UNSTORABLE else None
    for name, spec in properties.items():
        kind = field_type(spec)
        if kind == "string":
            yield f"1 MB in {name}", json.dumps({**valid, name: MB}).encode(), None
        elif kind in ("integer", "number"):
            for what, number in NUMBERS.items():
                raw = json.dumps({**valid, name: number}).encode()
                yield f"{name}={what}", raw, None
        elif kind == "object" and name not in valid:
            yield f"1 MB inside {name}", json.dumps({**valid, name: {"k": MB}}).encode(), None
        elif name not in valid:
            yield f"1 MB inside {name}", json.dumps({**valid, name: [MB]}).encode(), None


def hostile_queries(parameters: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """Each integer parameter out of range or no integer, each boolean neither, every
    text parameter odd and long at once, and one parameter given twice."""
    query = [p for p in parameters if p.get("in") == "query"]
    texts = []
    for parameter in query:
        name, kind = parameter["name"], parameter.get("schema", {}).get("type")
        if kind == "integer":
            for value in INTEGER_QUERY:
                yield f"{name}={value[:20]}", f"{name}={value}"
        elif kind == "boolean":
            yield f"{name}=maybe", f"{name}=maybe"
        else:
            texts.append(name)
    if texts:
        odd = quote(ODD_QUERY)
        yield f"odd {', '.join(texts)}", "&".join(f"{name}={odd}" for name in texts)
    if query:
        name = query[0]["name"]
        yield f"{name} twice", f"{name}=1&{name}=2"


def test_no_hostile_input_gets_a_5xx_a_non_envelope_or_a_write(hostile, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4 << 20  # a megabyte in a field reaches the view
    sweep = Sweep()
    staff = hostile["staff"]
    for method, route, schema, parameters in operations():
        params = {**hostile["params"]}
        if "{execution_id}" in route:
            params["task_id"] = hostile["held"]
        url = url_for(route, params)
        if method in ("POST", "PATCH", "PUT"):
            extra = hostile["extra"].get(f"{method} {route}", {})
            valid = shaped(schema, hostile["values"], extra)
            for what, raw, expect in hostile_bodies(schema, valid):
                sweep.send(staff, method, url, raw, what, expect=expect)
        body = b"{}" if method in ("POST", "PATCH", "PUT") else None
        for what, query in hostile_queries(parameters):
            expect = {400} if what.endswith(" twice") else None
            sweep.send(staff, method, f"{url}?{query}", body, what, expect=expect)
        for name in params:
            if f"{{{name}}}" not in route:
                continue
            for what, value in PATH_IDS.items():
                odd = url_for(route, {**params, name: value})
                sweep.send(staff, method, odd, body, f"{name} {what}", expect=absent(name))
            # Another team's object, asked for by a member of default only.
            theirs = {**params, name: hostile["theirs"][name]}
            if name == "execution_id":
                theirs["task_id"] = hostile["blue_held"]
            sweep.send(
                hostile["member"],
                method,
                url_for(route, theirs),
                body,
                f"{name} of blue",
                expect=absent(name) | {403},
            )
    assert not sweep.wrong, f"{len(sweep.wrong)} of {sweep.sent}:\n" + "\n".join(sweep.wrong)
    assert sweep.sent > 1000


def test_the_sweep_sees_a_write_on_a_refusal(hostile):
    """The sweep's write check is not blind: a refusal that wrote is reported."""
    sweep = Sweep()

    class Writes(APIClient):
        def generic(self, *args: Any, **kwargs: Any) -> Any:
            store.create_task(title="written anyway")
            return super().generic(*args, **kwargs)

    member = make_client("carl")
    writer = Writes()
    writer.credentials(**member._credentials)
    sweep.send(writer, "GET", "/api/board/tasks/no-such-thing", None, "absent")
    assert len(sweep.wrong) == 1 and "wrote on a refusal" in sweep.wrong[0]
    assert "INSERT" in sweep.wrong[0]  # seen as the statement, not only as a count
