"""GOVERNANCE §6, walked rather than listed: for every write operation of the
OpenAPI schema and every MCP tool, each agent-side credential (an agent's key of a
staff owner, a run's credential, a machine token, the critic's credential) that
the roles table does not admit is refused -- ``403 person_required`` for a verb
kept for people, ``403 forbidden`` otherwise -- and nothing is written. The
table's completeness is tests/core/test_roles.py's; this proves every door reads
it, so a view or tool added with a check of its own cannot slip by."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from django.contrib.auth import get_user_model
from drf_spectacular.generators import SchemaGenerator
from mcp.client.client import Client
from rest_framework.test import APIClient

from board import store
from board.models import Budget, Task, ToolApproval
from boardmcp import credentials
from boardmcp.tools import build_server
from core import machines, registry, roles
from core.models import Agent, AgentToken, Repository
from routines.models import Routine
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db

SAFE = {"get", "head", "options", "trace"}
KINDS = {
    "agent key": "agent",
    "run credential": "agent",
    "machine token": "machine",
    "critic credential": "reviewer",
}


def write_operations() -> list[tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(
        (method.upper(), route)
        for route, operations in schema["paths"].items()
        for method in operations
        if method not in SAFE
    )


def written() -> dict[str, Any]:
    return {
        **fingerprint(),
        "task_rows": list(
            Task.objects.order_by("pk").values_list(
                "pk", "status", "verdict", "human_override", "approval_state", "metadata"
            )
        ),
        "tools": list(ToolApproval.objects.values_list("pk", "state")),
        "routines": list(Routine.objects.order_by("pk").values_list("pk", "status", "updated_at")),
        "budgets": list(Budget.objects.order_by("pk").values_list("pk", "limit_cents", "mode")),
        "agent_states": list(Agent.objects.order_by("pk").values_list("pk", "state")),
        "repositories": list(Repository.objects.order_by("pk").values_list("pk", "team_id")),
    }


@pytest.fixture
def keys() -> dict[str, str]:
    """The agent side's credentials, the agent's owner staff: a staff owner lends its
    agents nothing."""
    boss = get_user_model().objects.create_user("boss", is_staff=True, is_superuser=True)
    registry.add_member("default", boss)
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="human", owner=boss)
    held = store.create_task(title="held", file_mutating=False).task
    ticket = store.claim(held.id, "bot", "human").ticket
    return {
        "agent key": AgentToken.objects.create(
            key=machines.new_key(), agent_id="bot", user=boss
        ).key,
        "run credential": credentials.mint_run_credential("bot", held.id, ticket),
        "machine token": machines.mint("laptop", ["bot"])[1],
        "critic credential": credentials.mint_run_credential(
            "bot", held.id, ticket, read_only=True
        ),
    }


def expected(row: roles.Verb) -> str:
    return "forbidden" if row.admits & roles.AGENT_SIDE else "person_required"


@pytest.mark.parametrize("credential", sorted(KINDS))
def test_every_write_the_table_keeps_from_a_credential_is_refused_and_writes_nothing(
    keys, credential
):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {keys[credential]}")
    kind = KINDS[credential]
    before = written()
    refused = 0
    for method, route in write_operations():
        row = roles.TABLE[f"{method} {route}"]
        if kind in row.admits or "anonymous" in row.admits:
            continue  # admitted (or a door that takes no credential at all)
        url = re.sub(r"\{[^}]+\}", "x1", route)
        answer = api.generic(method, url, "{}", content_type="application/json")
        assert answer.status_code == 403, (credential, method, route, answer.content[:200])
        assert answer.json()["error"] == expected(row), (method, route, answer.json())
        refused += 1
    assert refused >= 30  # the walk reached the API
    assert written() == before


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """The least arguments a tool's input schema takes: the refusal, not the
    validation, must answer."""
    values: dict[str, Any] = {}
    for name in schema.get("required", []):
        spec = schema["properties"][name]
        if "enum" in spec:
            values[name] = spec["enum"][0]
        elif spec.get("type") == "integer":
            values[name] = 0
        elif spec.get("type") == "object":
            values[name] = {}
        else:
            values[name] = "x1"
    return values


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("credential", sorted(KINDS))
def test_every_mcp_tool_the_table_keeps_from_a_credential_is_refused(keys, credential):
    caller = credentials.caller_for_key(keys[credential])
    assert caller is not None and caller.principal.kind == KINDS[credential]

    async def sweep() -> list[tuple[str, Any]]:
        answers = []
        async with Client(build_server(caller)) as client:
            for tool in (await client.list_tools()).tools:
                row = roles.TABLE[f"mcp {tool.name}"]
                if caller.principal.kind in row.admits:
                    continue
                answer = await client.call_tool(tool.name, arguments(tool.input_schema))
                answers.append((tool.name, row, answer))
        return answers

    before = written()
    answers = anyio.run(sweep)
    assert answers  # every credential here is kept from something
    for name, row, answer in answers:
        assert answer.is_error, (credential, name)
        assert answer.structured_content["error"] == expected(row), (name, answer)
    assert written() == before


# --- another team's objects answer exactly as missing ones ------------------------------

# Each path parameter: another team's object, and an id nothing has.
MISSING = {
    "task_id": "nope-task",
    "execution_id": "99",
    "dep_id": "nope-dep",
    "budget_id": "999999",
    "routine_id": "nope-routine",
    "schedule_id": "clawboo:nope-routine",
    "repo_id": "nope-repo",
    "agent_id": "nope-agent",
    "team_id": "nope-team",
    "approval_id": "nope-approval",
}
# Doors that take no credential (a forge's signed webhook): no team to see from.
UNSCOPED = {"/api/repositories/{repo_id}/forge/webhook", "/api/forge/{repo_id}/webhook"}


@pytest.fixture
def theirs(tmp_path, settings) -> dict[str, list[str]]:
    """Another team's world, each kind of object in the states a verb could read
    before it asks whose the object is: tasks to do, held (with its run), in review,
    done and waiting for approval; a dependency, an agent, a repository, a budget, a
    routine and a pending tool call."""
    from board.store import spend
    from core import repositories
    from routines import store as routines_store
    from tests.fixtures.gitrepos import make_repo

    settings.CLAWBOO_HTTP_RATE_LIMIT = 0
    base = (tmp_path / "repos").resolve()
    base.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [base]
    registry.ensure_team("red", "Red")
    registry.create_agent(
        id="red-bot",
        display_name="R",
        team="red",
        runtime="command",
        settings={"argv": ["true"]},
        max_concurrent=10,
    )
    repo = repositories.register(team="red", path=str(make_repo(base / "red-app")), id="red-app")
    todo = store.create_task(title="todo", team="red", file_mutating=False).task.id
    held = store.create_task(title="held", team="red", file_mutating=False).task.id
    store.open_execution(held, store.claim(held, "red-bot", "command").ticket)
    review = store.create_task(title="review", team="red", file_mutating=False).task.id
    store.await_review(review, ticket=store.claim(review, "red-bot", "command").ticket)
    done = store.create_task(title="done", team="red", file_mutating=False).task.id
    store.complete(done, ticket=store.claim(done, "red-bot", "command").ticket)
    waiting = store.create_task(title="risky", team="red", labels=["risk"]).task.id
    store.link(todo, done)
    budget = spend.create_budget(
        "red", {"scope": "team", "scope_id": "red", "window": "month", "limit_cents": 100}
    )
    routine = routines_store.create_routine(agent_id="red-bot", team="red", cron_spec="0 * * * *")
    asked = store.ask_tool_call(held, "red-bot", "Bash", {"command": "ls"}, "toolu_1")
    assert asked is not None
    return {
        "task_id": [todo, held, review, done, waiting],
        "execution_id": ["1"],
        "dep_id": [done],
        "budget_id": [str(budget.pk)],
        "routine_id": [routine.id],
        "schedule_id": [f"clawboo:{routine.id}"],
        "repo_id": [repo.id],
        "agent_id": ["red-bot"],
        "team_id": ["red"],
        "approval_id": [asked.id],
    }


def as_missing(answer: Any, ids: list[str]) -> tuple[int, Any]:
    """An answer with the ids it names blanked, to compare with another's."""
    text = answer.content.decode()
    for value in sorted(ids, key=len, reverse=True):
        text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", "ID", text)
    return answer.status_code, text


def callers(api: APIClient, agent_key: str) -> dict[str, APIClient]:
    machine = APIClient()
    machine.credentials(HTTP_AUTHORIZATION=f"Token {machines.mint('host', ['ada-bot'])[1]}")
    bot = APIClient()
    bot.credentials(HTTP_AUTHORIZATION=f"Token {agent_key}")
    return {"person": api, "agent key": bot, "machine token": machine}


@pytest.fixture
def member():
    """A member of the default team with an agent of their own (and its key)."""
    from tests.api.conftest import make_client

    api = make_client("ada")
    registry.create_agent(
        id="ada-bot", display_name="A", team="default", runtime="human", owner=api.user
    )
    return api, AgentToken.objects.create(
        key=machines.new_key(), agent_id="ada-bot", user=api.user
    ).key


def test_every_write_naming_another_teams_object_answers_as_a_missing_one(theirs, member):
    """GOVERNANCE §6 and the API's scoping: a verb that met another team's object with
    a state check (409), a validation (400) or a refusal (403) before it asked whose
    the object is would tell the caller the object exists, and what state it is in."""
    api, key = member
    before = written()
    swept = 0
    for method, route in write_operations():
        params = re.findall(r"\{([^}]+)\}", route)
        if not params or route in UNSCOPED:
            continue
        for index in range(max(len(theirs[p]) for p in params)):
            named = {p: theirs[p][min(index, len(theirs[p]) - 1)] for p in params}
            url, missing = route, route
            for p in params:
                url = url.replace(f"{{{p}}}", named[p])
                missing = missing.replace(f"{{{p}}}", MISSING[p])
            ids = [*named.values(), *(MISSING[p] for p in params)]
            for who, client in callers(api, key).items():
                seen = as_missing(client.generic(method, url, "{}", "application/json"), ids)
                unknown = as_missing(client.generic(method, missing, "{}", "application/json"), ids)
                assert seen == unknown, (who, method, url, seen, unknown)
                if who == "person":
                    assert seen[0] == 404 and '"error":"not_found"' in seen[1], (method, url)
                swept += 1
    assert swept > 150  # the walk reached every kind of object
    assert written() == before


@pytest.mark.django_db(transaction=True)
def test_every_mcp_tool_naming_another_teams_task_answers_as_a_missing_one(theirs, member):
    api, key = member
    people_key = api._credentials["HTTP_AUTHORIZATION"].split()[-1]
    for credential in (key, people_key, machines.mint("host", ["ada-bot"])[1]):
        caller = credentials.caller_for_key(credential)
        assert caller is not None

        async def sweep(caller: Any = caller) -> list[tuple[str, Any, Any]]:
            answers = []
            async with Client(build_server(caller)) as client:
                for tool in (await client.list_tools()).tools:
                    fields = tool.input_schema.get("properties", {})
                    for field in ("task_id", "parent_task_id", "depends_on", "repository_id"):
                        if field not in fields:
                            continue
                        pool = theirs["repo_id"] if field == "repository_id" else theirs["task_id"]
                        for value in pool:
                            args = arguments(tool.input_schema)
                            seen = await client.call_tool(tool.name, {**args, field: value})
                            unknown = await client.call_tool(tool.name, {**args, field: "nope1"})
                            answers.append((tool.name, (seen, value), unknown))
            return answers

        before = written()
        for name, (seen, value), unknown in anyio.run(sweep):

            def shown(answer: Any, ids: list[str]) -> str:
                text = answer.content[0].text if answer.content else ""
                for one in ids:
                    text = text.replace(one, "ID")
                return text

            assert seen.is_error == unknown.is_error, (name, value)
            assert shown(seen, [value]) == shown(unknown, ["nope1"]), (name, value)
        assert written() == before
