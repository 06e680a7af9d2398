"""The budget admin saves through the spend store: the team is the scope's, a scope
that does not exist is refused on the form, resume lifts a pause."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.models import Budget
from board.store import spend

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


FORM = {"scope": "team", "scope_id": "default", "window": "day", "limit_cents": 50, "mode": "cap"}


def test_a_budget_added_in_the_admin_belongs_to_its_scopes_team(admin_client):
    response = admin_client.post("/admin/board/budget/add/", FORM)
    assert response.status_code == 302, response.content[:500]
    budget = Budget.objects.get()
    assert (budget.team_id, budget.limit_cents, budget.mode) == ("default", 50, "cap")
    page = admin_client.get("/admin/board/budget/")
    assert page.status_code == 200 and b"default" in page.content


def test_an_unknown_scope_is_refused_and_nothing_is_saved(admin_client):
    admin_client.post("/admin/board/budget/add/", {**FORM, "scope": "agent", "scope_id": "nobody"})
    assert not Budget.objects.exists()


def test_the_resume_action_lifts_a_pause(admin_client):
    pk = spend.create_budget("default", {**FORM, "limit_cents": 1}).pk
    task = store.create_task(title="t").task
    claimed = store.claim(task.id, "ada", "command")
    run = store.open_execution(task.id, claimed.ticket)
    store.close_execution(run.id, "succeeded", cost_cents=3)
    assert spend.get_budget(pk).as_dict(store.now())["status"] == "paused"
    admin_client.post("/admin/board/budget/", {"action": "resume", "_selected_action": [pk]})
    assert spend.get_budget(pk).as_dict(store.now())["status"] == "soft_capped"


def test_the_add_form_says_what_each_field_takes(admin_client):
    # "Scope id" and "Limit cents" stood bare: an operator guessed at what to type.
    page = admin_client.get("/admin/board/budget/add/").content.decode()
    for words in (
        "the team's, agent's or routine's id, or a task's for a task tree",
        "500 is $5.00",
        "UTC",
        "warn only notifies",
        "cap also stops",
    ):
        assert words in page, words


def test_the_resume_action_says_which_budgets_it_lifted_and_leaves_the_rest(admin_client):
    from core.models import Event

    paused = spend.create_budget("default", {**FORM, "limit_cents": 1}).pk
    calm = spend.create_budget("default", {**FORM, "scope_id": "default", "window": "month"}).pk
    task = store.create_task(title="t").task
    run = store.open_execution(task.id, store.claim(task.id, "ada", "command").ticket)
    store.close_execution(run.id, "succeeded", cost_cents=3)
    before = Event.objects.filter(kind="budget_resumed").count()
    answer = admin_client.post(
        "/admin/board/budget/",
        {"action": "resume", "_selected_action": [paused, calm]},
        follow=True,
    )
    said = [str(m) for m in answer.context["messages"]]
    assert said == [
        "Resumed 1 budget(s): team default: 1¢/day (cap). "
        "Not paused (nothing to lift): team default: 50¢/month (cap)"
    ]
    # Only the paused one was resumed (one event), the other left as it was.
    assert Event.objects.filter(kind="budget_resumed").count() == before + 1


def test_the_budget_list_links_each_budget_to_what_it_holds(admin_client):
    from core import registry
    from routines import store as routines

    registry.create_agent(
        id="ada", display_name="Ada", team="default", runtime="command", settings={}
    )
    routine = routines.create_routine(agent_id="ada", team="default", cron_spec="0 9 * * *")
    task = store.create_task(id="root", title="Root").task
    for scope, scope_id in (
        ("team", "default"),
        ("agent", "ada"),
        ("routine", routine.pk),
        ("task_tree", task.pk),
    ):
        spend.create_budget("default", {**FORM, "scope": scope, "scope_id": scope_id})
    page = admin_client.get("/admin/board/budget/").content.decode()
    for href in (
        "/admin/clawboo/team/default/change/",
        "/admin/clawboo/agent/ada/change/",
        f"/admin/routines/routine/{routine.pk}/change/",
        "/admin/board/task/root/change/",
    ):
        assert f'href="{href}"' in page
        assert admin_client.get(href).status_code == 200
