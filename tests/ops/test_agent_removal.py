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


# --- a delete raced by a claim, a run or another delete -------------------------------
# The delete page is drawn from a count taken before the delete locks the agent: what
# commits in between is met by the delete's own count or lock, and said on the page.


@pytest.fixture
def racing(monkeypatch):
    """``racing(step)``: ``step`` runs once, right after the delete's page (or the bulk
    delete's confirmation) counted what names the agents -- the interleaving in which
    a racer commits between that count and the delete."""
    from ops.admin import RemovableAgentAdmin

    counted = RemovableAgentAdmin.get_deleted_objects

    def arm(step):
        steps = [step]

        def then_race(self, objs, request):
            answer = counted(self, objs, request)
            if request.method == "POST" and steps:
                steps.pop()()
            return answer

        monkeypatch.setattr(RemovableAgentAdmin, "get_deleted_objects", then_race)

    return arm


def claimed_by(agent_id: str) -> Task:
    task = board.create_task(title=f"work for {agent_id}", team="default").task
    assert board.claim(task.id, agent_id).outcome == "ok"
    return Task.objects.get(pk=task.id)


def test_a_claim_landing_after_the_delete_page_is_refused_on_the_page_not_500(operator, racing):
    an_agent()
    racing(lambda: claimed_by("ada"))
    answer = operator.post("/admin/clawboo/agent/ada/delete/", {"post": "yes"}, follow=True)
    assert answer.status_code == 200
    assert any("1 task(s) assigned to it" in m for m in map(str, answer.context["messages"]))
    assert Agent.objects.filter(pk="ada").exists()
    assert not LogEntry.objects.exists()


def test_a_bulk_delete_raced_by_a_claim_deletes_none_of_the_agents_and_logs_nothing(
    operator, racing
):
    an_agent()
    an_agent("bob")
    racing(lambda: claimed_by("bob"))
    answer = bulk_delete(operator, "ada", "bob")
    assert answer.status_code == 302
    assert set(Agent.objects.values_list("pk", flat=True)) >= {"ada", "bob"}
    assert not LogEntry.objects.exists()
    shown = operator.get("/admin/clawboo/agent/")
    assert any("still named by 1 task(s)" in str(m) for m in shown.context["messages"])


def test_an_agent_deleted_by_a_racing_delete_answers_not_found_not_500(operator, racing):
    from ops import agent_removal

    an_agent()
    racing(lambda: agent_removal.delete_agent("ada"))
    answer = operator.post("/admin/clawboo/agent/ada/delete/", {"post": "yes"}, follow=True)
    assert answer.status_code == 200
    assert any("'ada' does not exist" in str(m) for m in answer.context["messages"])
    # (Here the racer's delete shares the page's transaction, so it is rolled back
    # with the page's; a racer of its own commits, and the page says the same.)
    assert not LogEntry.objects.exists()


@pytest.fixture
def deleted_at_the_gate(monkeypatch):
    """The agent is deleted (and the delete committed) while a claim waits for its
    row's lock: the claim's gate then reads the registry without it."""
    from board.store import claims
    from ops import agent_removal

    gate = claims._gate

    def deleted_while_waiting(agent_id, *rest):
        agent_removal.delete_agent(agent_id)
        return gate(agent_id, *rest)

    monkeypatch.setattr(claims, "_gate", deleted_while_waiting)


def test_an_executor_whose_agent_was_deleted_mid_claim_claims_nothing(deleted_at_the_gate):
    from core.errors import NotFound
    from executor.runner import Executor

    an_agent()
    task = board.create_task(title="free work", team="default").task
    worker = Executor("ada")
    with pytest.raises(NotFound):  # as its registry.get_agent says on the next pass
        worker.work_once()
    task.refresh_from_db()
    assert task.status == "todo" and task.assignee_agent_id is None


def test_a_claim_that_waited_for_a_deleted_agents_lock_is_not_found_and_claims_nothing(
    client, deleted_at_the_gate
):
    """The claim's gate finds no row once the delete committed: through the API, the
    agent's owner asking for it is told so; the task stays todo, nobody's."""
    from rest_framework.authtoken.models import Token

    owner = get_user_model().objects.create_user("owner", password="pw")
    registry.update_team("default", members=[owner])
    registry.create_agent(
        id="ada",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=owner,
    )
    task = board.create_task(title="free work", team="default").task
    key = Token.objects.create(user=owner).key
    answer = client.post(
        f"/api/board/tasks/{task.id}/claim",
        {"agent_id": "ada"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert answer.status_code == 404 and answer.json()["error"] == "not_found"
    task.refresh_from_db()
    assert task.status == "todo" and task.assignee_agent_id is None
