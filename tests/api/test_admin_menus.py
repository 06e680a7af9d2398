"""The console offers a person what they may run -- an action menu, a button, is what
the roles table (core.roles) lets them do, so no choice on a page ends in a 403 --
and asks before an action that cannot be undone."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin import ModelAdmin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import RequestFactory

from board import store
from board.models import Task, ToolApproval
from core import machines, registry
from core.models import Agent
from ops.queue.models import SuccessfulJob

pytestmark = pytest.mark.django_db


def person(name: str, *codenames: str, superuser: bool = False):
    user = get_user_model().objects.create_user(name, is_staff=True, is_superuser=superuser)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return get_user_model().objects.get(pk=user.pk)  # a fresh permission cache


def offered(user, model) -> set[str]:
    request = RequestFactory().get("/admin/")
    request.user = user
    return set(admin.site._registry[model].get_actions(request))


@pytest.fixture
def every_action():
    """What Django's own menu lists for a superuser, before the roles table."""
    request = RequestFactory().get("/admin/")
    request.user = person("root", superuser=True)

    def listed(model) -> set[str]:
        return set(ModelAdmin.get_actions(admin.site._registry[model], request))

    return listed


VIEWS = ("view_task", "view_agent", "view_toolapproval", "view_successfuljob")


def test_staff_granted_view_only_are_offered_no_action():
    """Every task move, Allow and Deny, Pause and Resume, django-q2's Resubmit: each
    was in the menu of a person who may only read, and each answered a bare 403."""
    viewer = person("viewer", *VIEWS)
    for model in (Task, Agent, ToolApproval, SuccessfulJob):
        assert offered(viewer, model) == set(), model


def test_staff_are_offered_the_actions_of_the_models_they_may_change(every_action):
    changer = person("changer", *VIEWS, "change_task")
    assert offered(changer, Task) == every_action(Task) != set()
    assert offered(changer, Agent) == set()  # change on tasks is not change on agents


def test_a_superuser_is_offered_every_action_of_every_list(every_action):
    """Every action the admin registers has its row in the roles table: one missing
    would be left out of every menu, a superuser's too."""
    root = person("su", superuser=True)
    hidden = {
        model._meta.label: every_action(model) - offered(root, model)
        for model in admin.site._registry
    }
    assert {label: names for label, names in hidden.items() if names} == {}
    assert "resubmit_task" in offered(root, SuccessfulJob)


def test_staff_granted_view_only_see_no_recovery_buttons(client):
    client.force_login(person("viewer", "view_task"))
    page = client.get("/admin/board/task/").content.decode()
    assert 'name="pass"' not in page
    client.force_login(person("changer", "view_task", "change_task"))
    assert 'name="pass"' in client.get("/admin/board/task/").content.decode()


def test_cancelling_tasks_asks_first_and_cancels_only_once_confirmed(admin_client):
    """Cancelled is final and stops a running task's run: the action ran on the
    selection at once, from the menu's second entry."""
    tasks = [store.create_task(title=f"t{n}").task for n in range(2)]
    chosen = {"action": "cancel_tasks", "_selected_action": [t.id for t in tasks]}
    asked = admin_client.post("/admin/board/task/", chosen)
    assert asked.status_code == 200 and "Cancelled is final" in asked.content.decode()
    assert all(t.title in asked.content.decode() for t in tasks)
    assert {store.get_task(t.id).status for t in tasks} == {"todo"}
    done = admin_client.post("/admin/board/task/", {**chosen, "apply": "1"}, follow=True)
    assert {store.get_task(t.id).status for t in tasks} == {"cancelled"}
    assert any(str(m).startswith("Cancelled") for m in done.context["messages"])


def test_revoking_machine_tokens_asks_first_and_revokes_only_once_confirmed(admin_client):
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="codex")
    token, key = machines.mint("vm-1", ["bot"])
    chosen = {"action": "revoke", "_selected_action": [token.pk]}
    asked = admin_client.post("/admin/clawboo/machinetoken/", chosen)
    assert asked.status_code == 200 and "vm-1" in asked.content.decode()
    assert machines.by_key(key) == token
    admin_client.post("/admin/clawboo/machinetoken/", {**chosen, "apply": "1"})
    assert machines.by_key(key) is None
