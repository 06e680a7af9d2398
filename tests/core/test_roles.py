"""GOVERNANCE §6 as one table (core.roles): every write operation of the REST API,
every MCP tool, every admin action and every board page action is a row, deny by
default; the principal of a request is told by its credential alone; docs/roles.md
is the table."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import anyio
import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import clear_url_caches, path
from drf_spectacular.generators import SchemaGenerator
from mcp.client.client import Client
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.test import APIClient
from rest_framework.views import APIView

from board import store
from boardmcp import credentials
from boardmcp.credentials import Caller
from boardmcp.tools import build_server
from core import machines, registry, roles
from core.models import AgentToken

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
SAFE = {"get", "head", "options", "trace"}
# Pages that only show (their writes go through the API); every other named page
# that takes a write is a row of the table.
READ_ONLY_PAGES = {"board", "routines", "usage", "healthz", "metrics"}


def write_operations(urlconf: str | None = None) -> set[str]:
    schema = SchemaGenerator(urlconf=urlconf).get_schema(request=None, public=True)
    return {
        f"{method.upper()} {route}"
        for route, operations in schema["paths"].items()
        for method in operations
        if method not in SAFE
    }


def missing(operations: set[str]) -> set[str]:
    return {name for name in operations if name not in roles.TABLE}


def test_every_write_operation_of_the_openapi_schema_is_in_the_table():
    operations = write_operations()
    assert len(operations) > 50  # the walk found the API
    assert missing(operations) == set()


def test_every_mcp_tool_is_in_the_table():
    async def names() -> list[str]:
        async with Client(build_server(Caller(name="x", teams=("default",)))) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    tools = anyio.run(names)
    assert "decide_approval" in tools
    assert missing({f"mcp {name}" for name in tools}) == set()


def test_every_admin_action_is_in_the_table():
    request = RequestFactory().get("/admin/")
    request.user = get_user_model()(is_staff=True, is_superuser=True)
    actions = {
        f"admin {model._meta.app_label}.{model._meta.model_name} {name}"
        for model, model_admin in admin.site._registry.items()
        for name in model_admin.get_actions(request)
    }
    assert "admin board.task approve_work" in actions
    assert missing(actions) == set()


def test_every_page_that_takes_a_write_is_in_the_table():
    from clawboo import urls

    names = {
        pattern.name
        for pattern in urls.urlpatterns
        if getattr(pattern, "name", None) and pattern.name not in READ_ONLY_PAGES
    }
    assert "routine-new" in names
    assert missing({f"page {name}" for name in names}) == set()


class Unlisted(APIView):
    """A write somebody added without a row."""

    def post(self, request, widget_id):
        return Response({"made": widget_id})


@pytest.fixture
def unlisted_urlconf(settings):
    from clawboo import urls

    module = types.ModuleType("tests_core_unlisted_urls")
    module.urlpatterns = [  # type: ignore[attr-defined]
        path("api/widgets/<str:widget_id>", Unlisted.as_view()),
        *urls.urlpatterns,
    ]
    sys.modules[module.__name__] = module
    settings.ROOT_URLCONF = module.__name__
    clear_url_caches()
    yield module.__name__
    clear_url_caches()
    del sys.modules[module.__name__]


def test_a_write_view_missing_from_the_table_fails_the_walk_and_is_refused(unlisted_urlconf):
    assert missing(write_operations(unlisted_urlconf)) == {"POST /api/widgets/{widget_id}"}
    staff = get_user_model().objects.create_user("root", is_staff=True, is_superuser=True)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=staff).key}")
    answer = api.post("/api/widgets/w1", {}, format="json")
    assert answer.status_code == 403 and answer.json()["error"] == "forbidden"
    assert "no row of the roles table" in answer.json()["detail"]


def test_an_mcp_tool_missing_from_the_table_is_refused(monkeypatch):
    monkeypatch.delitem(roles.TABLE, "mcp comment")
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="command")
    task = store.create_task(title="t").task

    async def call() -> dict:
        server = build_server(Caller(name="bot", teams=("default",), agent_id="bot"))
        async with Client(server) as client:
            answer = await client.call_tool("comment", {"body": "hi", "task_id": task.id})
            assert answer.is_error
            return answer.structured_content

    assert anyio.run(call)["error"] == "forbidden"


# --- principals -------------------------------------------------------------------


@pytest.fixture
def owner():
    # Staff, to show a staff owner lends its agents' keys nothing.
    user = get_user_model().objects.create_user("boss", is_staff=True, is_superuser=True)
    registry.add_member("default", user)
    registry.create_agent(
        id="bot", display_name="Bot", team="default", runtime="command", owner=user
    )
    return user


def test_the_credential_not_the_user_tells_the_principal(owner):
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner)
    assert roles.principal_of(owner, agent_key) == roles.Principal("agent", "bot")
    machine, _ = machines.mint("gpu-1", ["bot"], created_by=owner)
    # A machine's service user made staff is still a machine.
    machine.user.is_staff = machine.user.is_superuser = True
    assert roles.principal_of(machine.user, machine).kind == "machine"
    assert roles.principal_of(machine.user, None).kind == "machine"
    task = store.create_task(title="t").task
    ticket = store.claim(task.id, "bot", "command").ticket
    run = credentials.RunCredential.objects.get(
        pk=credentials._digest(credentials.mint_run_credential("bot", task.id, ticket))
    )
    critic = credentials.RunCredential.objects.get(
        pk=credentials._digest(
            credentials.mint_run_credential("bot", task.id, ticket, read_only=True)
        )
    )
    assert roles.principal_of(owner, run).kind == "agent"
    assert roles.principal_of(owner, critic).kind == "reviewer"
    person_key = Token.objects.create(user=owner)
    assert roles.principal_of(owner, person_key) == roles.Principal("person", "boss", staff=True)
    assert roles.principal_of(owner, None).kind == "person"  # a session


def test_a_staff_owners_agent_key_is_still_refused_a_people_verb(owner):
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {agent_key.key}")
    # Another team's task, or none at all: the same refusal, before any lookup.
    for task_id in ("t-of-another-team", "no-such-task"):
        answer = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
        assert answer.status_code == 403 and answer.json()["error"] == "person_required"
    answer = api.post("/api/teams", {"id": "mine", "name": "Mine"}, format="json")
    assert answer.json()["error"] == "person_required"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", ["run", "critic", "machine"])
def test_the_agent_side_is_refused_decide_approval_over_mcp(kind):
    owner = get_user_model().objects.create_user("ada")
    registry.add_member("default", owner)
    registry.create_agent(
        id="bot", display_name="Bot", team="default", runtime="command", owner=owner
    )
    filed = store.create_task(title="delegated", created_by_agent_id="bot").task
    held = store.create_task(title="held").task
    ticket = store.claim(held.id, "bot", "command").ticket
    if kind == "machine":
        _, key = machines.mint("gpu-1", ["bot"])
    else:
        key = credentials.mint_run_credential("bot", held.id, ticket, read_only=kind == "critic")
    caller = credentials.caller_for_key(key)
    assert caller is not None

    async def call() -> dict:
        async with Client(build_server(caller)) as client:
            answer = await client.call_tool(
                "decide_approval", {"task_id": filed.id, "decision": "approve"}
            )
            assert answer.is_error
            return answer.structured_content

    refusal = anyio.run(call)
    assert refusal["error"] == "person_required" and refusal["verb"] == "mcp decide_approval"
    assert store.get_task(filed.id).approval["state"] == "required"


# --- the docs ---------------------------------------------------------------------


def test_docs_roles_md_is_the_table():
    written = (ROOT / "docs" / "roles.md").read_text()
    assert written == roles.as_markdown(), (
        "docs/roles.md differs from core/roles.py: python manage.py roles > docs/roles.md"
    )
    assert "docs/roles.md" in (ROOT / "README.md").read_text()
    assert "person_required" in (ROOT / "docs" / "API.md").read_text()


def test_work_the_agent_side_files_waits_for_a_person(owner):
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="bot", user=owner)
    _, machine_key = machines.mint("gpu-1", ["bot"])
    for key in (agent_key.key, machine_key):
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        created = api.post("/api/board/tasks", {"title": "rm -rf the world"}, format="json")
        assert created.status_code == 201, created.content[:300]
        task = created.json()
        assert task["created_by_agent_id"] == "bot"
        assert task["approval"]["state"] == "required"


def test_admin_and_page_writes_go_through_the_table(client, monkeypatch):
    staff = get_user_model().objects.create_user("root", is_staff=True, is_superuser=True)
    client.force_login(staff)
    task = store.create_task(title="t").task
    cancel = {"action": "cancel_tasks", "apply": "1", "_selected_action": [task.id]}
    monkeypatch.delitem(roles.TABLE, "admin board.task cancel_tasks")
    refused = client.post("/admin/board/task/", cancel)
    assert refused.status_code == 403 and b"no row of the roles table" in refused.content
    assert store.get_task(task.id).status == "todo"
    monkeypatch.undo()
    assert client.post("/admin/board/task/", cancel).status_code == 302
    assert store.get_task(task.id).status == "cancelled"
    monkeypatch.delitem(roles.TABLE, "page routine-new")
    assert client.post("/board/routines/new/", {}).status_code == 403


def test_every_write_a_person_does_names_what_staff_need_for_it_beyond_their_teams():
    # GOVERNANCE §6 and the admin's rule: staff's cross-team powers need the Django
    # model permission the admin asks for the same change; a row a person may do that
    # names none would leave staff's power over it ungoverned.
    from django.contrib.auth.models import Permission

    for verb in roles.VERBS:
        if "person" not in verb.admits or verb.name in roles.NO_STAFF_POWER:
            continue
        needed = verb.django_permission
        assert needed is not None, f"{verb.name}: add it to core.roles.STAFF_NEEDS"
        app_label, codename = needed.split(".")
        assert Permission.objects.filter(
            content_type__app_label=app_label, codename=codename
        ).exists(), f"{verb.name}: no permission {needed}"
