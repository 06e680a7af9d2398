"""Deleting an agent in the admin: only while nothing names it, through the registry."""

from __future__ import annotations

import io

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.core.management import call_command

from board import store as board
from board.models import Budget, Task
from board.store import spend
from core import registry
from core.models import Agent, AgentToken
from routines import store as routines
from routines.models import Routine

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def an_agent(agent_id: str = "ada") -> Agent:
    return registry.create_agent(
        id=agent_id,
        display_name=agent_id.title(),
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )


def bulk_delete(client, *agent_ids: str, confirm: bool = True):
    form = {"action": "delete_selected", "_selected_action": list(agent_ids)}
    if confirm:
        form["post"] = "yes"
    return client.post("/admin/clawboo/agent/", form)


def test_an_agent_with_a_routine_is_not_deleted_from_its_page(operator):
    an_agent()
    routine = routines.create_routine(agent_id="ada", team="default", cron_spec="0 9 * * *")
    page = operator.get("/admin/clawboo/agent/ada/delete/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "1 routine(s)" in text and "Pause the agent instead" in text
    assert 'name="post"' not in text  # no confirm button
    # Django's delete cascaded the routine without releasing its bound task.
    refused = operator.post("/admin/clawboo/agent/ada/delete/", {"post": "yes"})
    assert refused.status_code == 200 and "Pause the agent instead" in refused.content.decode()
    assert Agent.objects.filter(pk="ada").exists()
    assert Routine.objects.filter(pk=routine.pk).exists()
    assert not LogEntry.objects.exists()


def test_the_bulk_delete_refuses_an_agent_with_budgets_and_tasks_and_writes_nothing(operator):
    an_agent()
    an_agent("bob")
    spend.create_budget(
        "default",
        {"scope": "agent", "scope_id": "ada", "window": "day", "limit_cents": 5, "mode": "cap"},
    )
    board.create_task(title="for bob", route={"agent": "bob"})
    answer = bulk_delete(operator, "ada", "bob")
    text = answer.content.decode()
    assert answer.status_code == 200
    assert "agent ada: 1 budget(s)" in text and "agent bob: 1 task(s) routed to it" in text
    assert set(Agent.objects.values_list("pk", flat=True)) >= {"ada", "bob"}
    assert Budget.objects.count() == 1 and Task.objects.get().route_agent_id == "bob"
    assert not LogEntry.objects.exists()


def test_an_agent_nothing_names_is_deleted_through_the_registry_with_its_tokens(operator):
    an_agent()
    call_command("create_agent_token", "op", "--agent", "ada", stdout=io.StringIO())
    assert AgentToken.objects.filter(agent="ada").exists()
    page = operator.get("/admin/clawboo/agent/ada/delete/")
    assert 'name="post"' in page.content.decode()
    assert operator.post("/admin/clawboo/agent/ada/delete/", {"post": "yes"}).status_code == 302
    assert not Agent.objects.filter(pk="ada").exists()
    assert not AgentToken.objects.exists()


def test_the_bulk_delete_deletes_agents_nothing_names(operator):
    an_agent()
    an_agent("bob")
    assert bulk_delete(operator, "ada", "bob").status_code == 302
    assert not Agent.objects.filter(pk__in=["ada", "bob"]).exists()
