"""A refusal answers before the body is read (GOVERNANCE §6, API.md "Errors"): for
every write operation of the OpenAPI schema, a caller who may not do it -- a plain
member where staff or an owner is needed, an agent's own key, a machine token, a
run's credential -- gets the same refusal (403, or 404 for what it may not see)
whatever the body says. A view that validated the body first would answer such a
caller 400 for a bad body and 403 for a good one: it would teach the rules of a
door it may not open, and the answer would depend on what it sent. Nothing is
written either way.

The walk is the schema's, so a new endpoint is covered without a line here; its
valid-shaped body is made from the schema's required fields (the world's ``values``
name the few whose value must exist, its ``extra`` the optional ones an operation
needs), and staff answering it other than 400 proves the body really is
valid-shaped. The bad bodies: not JSON, JSON but no object, an unknown field, and
every field of a wrong type.

Left out, each where it is decided below: the doors that take no credential
(``EXCLUDED``); a refusal that names a body field (``field``: acting as the agent
the body names, a setting only staff change), which the body must be read to
know; and a body that is not JSON from an agent's key or a machine token to an
operation whose body can name a people verb (``Verb.people_fields``), which the
roles check reads before the view."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from board import store
from board.store import spend
from boardmcp import credentials
from core import machines, registry, repositories, roles
from core.models import AgentToken
from routines import store as routines_store
from routines.schedules import ROUTINE_SOURCE
from tests.api.conftest import key_client, make_client
from tests.api.test_roles_sweep import written
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db

# The agent side's credentials the table admits to its own agents' work.
KEYS = ("agent key", "machine token")
_T = "/api/board/tasks/{task_id}"
SAFE = {"get", "head", "options", "trace"}
# Doors that take no credential (a login, a forge's signed webhook): nobody is
# refused by role there, so there is no order to hold.
EXCLUDED = {
    "POST /api/auth/token": "a login: anyone may ask, the password decides",
    "POST /api/repositories/{repo_id}/forge/webhook": "a forge's webhook: signature, not role",
    "POST /api/forge/{repo_id}/webhook": "the same webhook at the contract's path",
}


def write_operations() -> list[tuple[str, str, dict[str, Any]]]:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    components = generated.get("components", {}).get("schemas", {})
    found = []
    for route, operations in sorted(generated["paths"].items()):
        for method, operation in operations.items():
            if method in SAFE or f"{method.upper()} {route}" in EXCLUDED:
                continue
            found.append((method.upper(), route, request_schema(operation, components)))
    return found


def request_schema(operation: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    content = operation.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    schema = resolved(schema, components)
    properties = {
        name: resolved(spec, components) for name, spec in schema.get("properties", {}).items()
    }
    return {**schema, "properties": properties}


def resolved(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$ref`` (or a one-item ``allOf``/``oneOf``) followed."""
    for key in ("allOf", "oneOf"):
        if schema.get(key):
            schema = {**schema[key][0], **{k: v for k, v in schema.items() if k != key}}
    ref = schema.get("$ref")
    return components[ref.rsplit("/", 1)[-1]] if ref else schema


def shaped(schema: dict[str, Any], values: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The schema's required fields, each with a value of its type (``values`` for
    the ones that must name something that exists), and ``extra``: the optional ones
    the operation still needs on the task at hand."""
    body: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        spec = properties.get(name, {})
        if name in values:
            body[name] = values[name]
        elif "enum" in spec:
            body[name] = spec["enum"][0]
        else:
            body[name] = {
                "integer": 1,
                "number": 1,
                "boolean": True,
                "object": {},
                "array": [],
            }.get(spec.get("type", "string"), "x1")
    return {**body, **extra}


def wrong_typed(schema: dict[str, Any], body: dict[str, Any], verb: str) -> dict[str, Any]:
    """Every declared field with a value no field takes (an object where a number, a
    string or a list is due): the bad ``grace_cents`` that started this. Not the
    fields that make the operation a people verb (``human_override``): those name
    another verb, refused as such (tests/api/test_agent_side_*.py)."""
    people = {name.split(".")[0] for name in roles.TABLE[verb].people_fields or {}}
    names = (set(schema.get("properties", {})) | set(body)) - people
    return {name: {"not": "this"} for name in names}


@pytest.fixture
def world(tmp_path, settings) -> dict[str, Any]:
    """Team default: ada with her agent ada-bot, a key for it, a machine token for it
    and a run's credential for the task it holds; bob, a plain member who owns
    nothing; staff root; and one of each object a path names, all in the team."""
    settings.CLAWBOO_HTTP_RATE_LIMIT = 0
    base = (tmp_path / "repos").resolve()
    base.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [base]
    ada = make_client("ada")
    bob = make_client("bob")
    root = make_client("root", staff=True)
    get_user_model().objects.filter(username="root").update(is_superuser=True)
    registry.create_agent(
        id="ada-bot",
        display_name="A",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=ada.user,
        max_concurrent=10,
    )
    repo = repositories.register(team="default", path=str(make_repo(base / "app")), id="app")
    todo = store.create_task(title="todo", file_mutating=False).task.id
    held = store.create_task(title="held", file_mutating=False).task.id
    ticket = store.claim(held, "ada-bot", "command").ticket
    run = store.open_execution(held, ticket)
    store.link(todo, held)
    budget = spend.create_budget(
        "default", {"scope": "team", "scope_id": "default", "window": "month", "limit_cents": 1}
    )
    routine = routines_store.create_routine(
        agent_id="ada-bot", team="default", cron_spec="0 * * * *"
    )
    asked = store.ask_tool_call(held, "ada-bot", "Bash", {"command": "ls"}, "toolu_1")
    assert asked is not None
    callers = {
        "member": bob,
        "agent key": key_client(
            AgentToken.objects.create(key=machines.new_key(), agent_id="ada-bot", user=ada.user).key
        ),
        "machine token": key_client(machines.mint("laptop", ["ada-bot"])[1]),
        "run credential": key_client(credentials.mint_run_credential("ada-bot", held, ticket)),
    }
    return {
        "callers": callers,
        "staff": root,
        # A run's report names its own task; every other path the todo task, which
        # is not the run's (a run's credential acts on its own only).
        "held": held,
        "params": {
            "task_id": todo,
            "execution_id": str(run.id),
            "dep_id": held,
            "budget_id": str(budget.pk),
            "routine_id": routine.id,
            "schedule_id": f"clawboo:{routine.id}",
            "repo_id": repo.id,
            "agent_id": "ada-bot",
            "team_id": "default",
            "approval_id": asked.id,
        },
        # Required fields whose value must name something that exists.
        "values": {
            "agent_id": "ada-bot",
            "team": "default",
            "scope_id": "default",
            "depends_on": held,
            "ticket": ticket,
            "cron_spec": "0 * * * *",
            "path": str(base / "app"),
            "repo_path": str(base / "app"),
            "limit_cents": 5,
            "source": ROUTINE_SOURCE,
        },
        # Optional fields an operation needs to be valid on the todo task.
        "extra": {
            f"POST {_T}/claim": {"agent_id": "ada-bot"},
            # A move the agent side makes too: to done or backlog would be a people verb.
            f"POST {_T}/transition": {"to": "in_progress", "agent_id": "ada-bot"},
            "POST /api/board/claim-next": {"agent_id": "ada-bot"},
            f"POST {_T}/request-changes": {"feedback": "again"},
            f"POST {_T}/workspace": {"repository": repo.id},
            "POST /api/schedules": {
                "team": "default",
                "agent_id": "ada-bot",
                "cron_spec": "0 * * * *",
            },
        },
    }


def answer(
    client: APIClient, method: str, url: str, raw: bytes
) -> tuple[tuple[int, str], bool, str | None]:
    """The answer's status and error code, whether it wrote anything and the body
    field its error names; the request's writes rolled back, so each one meets the
    same world."""
    with transaction.atomic():
        before = written()
        response = client.generic(method, url, raw, content_type="application/json")
        changed = written() != before
        transaction.set_rollback(True)
    body = json.loads(response.content) if response.content else None
    if not isinstance(body, dict):
        return (response.status_code, ""), changed, None
    return (response.status_code, str(body.get("error", ""))), changed, body.get("field")


def test_a_caller_who_may_not_write_is_refused_the_same_whatever_the_body(world):
    refusals: dict[str, set[str]] = {}
    unshaped, wrong = [], []
    for method, route, schema in write_operations():
        params = {**world["params"]}
        if "{execution_id}" in route:
            params["task_id"] = world["held"]
        url = route
        for name, value in params.items():
            url = url.replace(f"{{{name}}}", value)
        verb = f"{method} {route}"
        valid = shaped(schema, world["values"], world["extra"].get(f"{method} {route}", {}))
        staff_says, _, _ = answer(world["staff"], method, url, json.dumps(valid).encode())
        if staff_says[0] == 400:
            unshaped.append((method, route, valid))  # give the world a value or an extra
        bad_bodies = {
            "malformed JSON": b"{",
            "not an object": b"[1]",
            "an unknown field": json.dumps({**valid, "no_such_field": 1}).encode(),
            "wrong types": json.dumps(wrong_typed(schema, valid, verb)).encode(),
        }
        for who, client in world["callers"].items():
            refused, changed, field = answer(client, method, url, json.dumps(valid).encode())
            if refused[0] not in (403, 404):
                continue  # this caller may do it: validation is its answer to give
            if field is not None:
                # Refused for what the body says (acting as an agent it names, a
                # setting only staff change): the body is read to know, and one
                # that cannot be read is a 400.
                continue
            if changed:
                wrong.append((who, method, route, "valid", "wrote"))
            for what, raw in bad_bodies.items():
                people_fields = roles.TABLE[verb].people_fields
                if what == "malformed JSON" and who in KEYS and people_fields:
                    # The body names the verb (human_override makes a people verb of a
                    # move), so the door reads it before the view: one that is not
                    # JSON is a 400, and tells nothing but that. (A run's credential
                    # off its own task is refused for the path first.)
                    continue
                got, changed, _ = answer(client, method, url, raw)
                if got != refused or changed:
                    wrong.append((who, method, route, what, got, refused, changed))
            refusals.setdefault(who, set()).add(f"{method} {route}")
    assert not unshaped, "\n".join(map(str, unshaped))
    assert not wrong, "\n".join(map(str, wrong))
    # The walk met each caller's refusals, the one that started this among them.
    assert {who: len(ops) >= 15 for who, ops in refusals.items()} == dict.fromkeys(
        world["callers"], True
    ), {who: len(ops) for who, ops in refusals.items()}
    assert "POST /api/budgets/{budget_id}/resume" in refusals["member"]
    assert "POST /api/repositories" in refusals["member"]
    for who in ("agent key", "machine token", "run credential"):
        assert "POST /api/budgets/{budget_id}/resume" in refusals[who], who
    assert "POST /api/board/tasks/{task_id}/claim" in refusals["run credential"]
