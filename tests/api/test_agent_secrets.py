"""Agent secrets are write-only: no API, MCP, export, admin page or CLI output carries
a secret's value; staff see that one is set; the placeholder written back keeps it."""

from __future__ import annotations

import io
import json

import anyio
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from mcp.client.client import Client

from boardmcp.credentials import Caller
from boardmcp.tools import build_server
from core import agent_secrets, registry
from core.models import Agent
from ops import transfer
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db

PLANTED = "sk-planted-7f3a9c"
SETTINGS = {
    "argv": ["true"],
    "api_key": PLANTED,
    "env": {"GITHUB_TOKEN": PLANTED, "MODE": "fast"},
    "providers": [{"name": "x", "password": PLANTED}],
}


@pytest.fixture
def secret_agent(db):
    ada = get_user_model().objects.create_user("owner")
    return registry.create_agent(
        id="sec",
        display_name="Sec",
        team="default",
        runtime="command",
        settings=SETTINGS,
        owner=ada,
    )


def test_no_agents_answer_carries_a_secret_for_staff_or_members(secret_agent, staff_api):
    member = make_client("ada")
    for client in (staff_api, member):
        for path in ("/api/agents", "/api/agents/sec"):
            answer = client.get(path)
            assert answer.status_code == 200
            assert PLANTED not in answer.content.decode(), path
    detail = staff_api.get("/api/agents/sec").json()
    assert detail["settings"]["api_key"] == agent_secrets.MASK
    assert detail["settings"]["env"] == {"GITHUB_TOKEN": agent_secrets.MASK, "MODE": "fast"}
    assert detail["settings"]["providers"][0]["password"] == agent_secrets.MASK
    # A member sees the runtime, not the settings.
    seen = member.get("/api/agents/sec").json()
    assert seen["runtime"] == "command" and "settings" not in seen


def test_patching_the_masked_settings_back_keeps_every_secret(secret_agent, staff_api):
    shown = staff_api.get("/api/agents/sec").json()["settings"]
    shown["env"]["MODE"] = "slow"
    answer = staff_api.patch("/api/agents/sec", {"settings": shown}, format="json")
    assert answer.status_code == 200, answer.json()
    assert PLANTED not in answer.content.decode()
    stored = Agent.objects.get(pk="sec").settings
    assert stored["api_key"] == PLANTED
    assert stored["env"] == {"GITHUB_TOKEN": PLANTED, "MODE": "slow"}
    assert stored["providers"][0]["password"] == PLANTED
    replaced = staff_api.patch(
        "/api/agents/sec", {"settings": {**shown, "api_key": "sk-new"}}, format="json"
    )
    assert replaced.status_code == 200
    assert Agent.objects.get(pk="sec").settings["api_key"] == "sk-new"


def test_the_mask_is_never_saved_as_a_secret(staff_api):
    body = {
        "id": "fresh",
        "display_name": "Fresh",
        "team": "default",
        "runtime": "command",
        "settings": {"argv": ["true"], "token": agent_secrets.MASK},
    }
    answer = staff_api.post("/api/agents", body, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "settings.token"
    assert not Agent.objects.filter(pk="fresh").exists()


def test_a_runtime_declared_secret_is_masked_too(staff_api):
    registry.create_agent(
        id="claw",
        display_name="Claw",
        team="default",
        runtime="openclaw",
        settings={"agent_id": "main", "session_key": PLANTED},
    )
    answer = staff_api.get("/api/agents/claw")
    assert PLANTED not in answer.content.decode()
    assert answer.json()["settings"]["session_key"] == agent_secrets.MASK


def test_a_key_clawboo_secret_settings_names_is_masked_and_others_are_not(staff_api, settings):
    settings.CLAWBOO_SECRET_SETTINGS = ["webhook_path"]
    registry.create_agent(
        id="cmd",
        display_name="Cmd",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "webhook_path": PLANTED, "model": "visible"},
    )
    body = staff_api.get("/api/agents/cmd").json()["settings"]
    assert body["webhook_path"] == agent_secrets.MASK and body["model"] == "visible"
    settings.CLAWBOO_SECRET_SETTINGS = []
    assert staff_api.get("/api/agents/cmd").json()["settings"]["webhook_path"] == PLANTED


def test_export_and_the_approve_cli_carry_no_secret(secret_agent):
    out = io.StringIO()
    transfer.export_to(out)
    assert PLANTED not in out.getvalue()
    printed = io.StringIO()
    call_command("approve_agents", "sec", stdout=printed)
    assert "sec" in printed.getvalue() and PLANTED not in printed.getvalue()


def test_approve_agents_naming_none_lists_who_waits_and_approves_nothing(secret_agent):
    from core import server_commands
    from core.models import Agent

    registry.create_agent(
        id="waits", display_name="w", team="default", runtime="command", settings={"argv": ["x"]}
    )
    Agent.objects.filter(pk="waits").update(settings={"argv": ["changed", "around"]})
    listed = io.StringIO()
    call_command("approve_agents", stdout=listed)
    lines = listed.getvalue().splitlines()
    assert any(line.startswith("waiting waits (default): command") for line in lines), lines
    assert "name them to approve, or use --all" in lines[-1]
    assert PLANTED not in listed.getvalue()
    assert server_commands.agent_run_refusal(Agent.objects.get(pk="waits")) is not None


@pytest.mark.django_db(transaction=True)
def test_no_mcp_answer_carries_a_secret():
    # Transactional: each tool body runs in a worker thread with its own connection.
    owner = get_user_model().objects.create_user("owner")
    registry.create_agent(
        id="sec",
        display_name="Sec",
        team="default",
        runtime="command",
        settings=SETTINGS,
        owner=owner,
    )
    server = build_server(Caller(name="Sec", teams=("default",), agent_id="sec"))

    async def answers() -> list[str]:
        texts = []
        async with Client(server) as client:
            tools = await client.list_tools()
            texts.append(json.dumps(tools.model_dump(), default=str))
            for name, arguments in (
                ("create_task", {"title": "t"}),
                ("list_tasks", {}),
            ):
                answer = await client.call_tool(name, arguments)
                assert not answer.is_error, answer
                texts.append(json.dumps(answer.model_dump(), default=str))
        return texts

    texts = anyio.run(answers)
    assert len(texts) == 3
    for text in texts:
        assert PLANTED not in text


def test_the_admin_page_shows_a_secret_is_set_and_keeps_it(secret_agent, client):
    staff = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(staff)
    page = client.get("/admin/clawboo/agent/sec/change/").content.decode()
    assert PLANTED not in page and agent_secrets.MASK in page
    form = {
        "display_name": "Sec renamed",
        "team": "default",
        "runtime": "command",
        "participant_kind": "agent",
        "settings": json.dumps(agent_secrets.masked(SETTINGS)),
        "owner": str(secret_agent.owner_id),
    }
    client.post("/admin/clawboo/agent/sec/change/", form)
    saved = Agent.objects.get(pk="sec")
    assert saved.display_name == "Sec renamed"
    assert saved.settings == SETTINGS
