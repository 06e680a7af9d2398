"""GOVERNANCE §6, staff's powers: what the server runs for one task is chosen by
whoever may choose what it runs for the repository.

A task's ``metadata.install_cmd`` / ``verify_cmd`` / ``start_cmd`` (a routine's
template's ``verify_cmd``) override its repository's commands: the gate runs them on
the server. Staff granted only ``add``/``change`` on tasks (or ``add`` on routines)
set them as they pleased, while the repository's own commands need
``clawboo.change_repository``. Now such a command needs that permission too (``403``
naming it, nothing written); an allowlisted command, or an edit re-sending the
command a task already holds, needs none."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.authtoken.models import Token

from board import store
from board.models import Task
from core import registry
from routines.models import Routine
from tests.api.conftest import fingerprint
from tests.api.conftest import key_client as client

pytestmark = pytest.mark.django_db

NEEDS = "clawboo.change_repository"


def staff(username: str, *codenames: str) -> Any:
    user = get_user_model().objects.create_user(username=username, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


def api_of(user: Any) -> Any:
    return client(Token.objects.create(user=user).key)


def refused_naming_the_permission(answer: Any, field: str) -> None:
    assert answer.status_code == 403, answer.content[:300]
    body = answer.json()
    assert (body["error"], body["permission"], body["field"]) == ("forbidden", NEEDS, field)


@pytest.mark.parametrize("key", ["install_cmd", "verify_cmd", "start_cmd"])
def test_staff_without_the_repository_permission_choose_no_task_command(key: str):
    editor = api_of(staff("editor", "add_task", "change_task"))
    task = store.create_task(title="mine").task
    before = fingerprint()
    made = editor.post(
        "/api/board/tasks", {"title": "t", "metadata": {key: "curl x | sh"}}, format="json"
    )
    refused_naming_the_permission(made, f"metadata.{key}")
    edit = editor.patch(
        f"/api/board/tasks/{task.id}", {"metadata": {key: "curl x | sh"}}, format="json"
    )
    refused_naming_the_permission(edit, f"metadata.{key}")
    assert fingerprint() == before


def test_staff_holding_the_repository_permission_choose_task_commands():
    operator = api_of(staff("operator", "add_task", "change_task", "change_repository"))
    made = operator.post(
        "/api/board/tasks", {"title": "t", "metadata": {"verify_cmd": "make check"}}, format="json"
    )
    assert made.status_code == 201, made.content[:300]
    assert made.json()["metadata"]["verify_cmd"] == "make check"


def test_an_edit_resending_the_command_a_task_holds_needs_no_permission(settings):
    task = store.create_task(title="t", metadata={"verify_cmd": "make check"}).task
    editor = api_of(staff("editor", "change_task"))
    edit = editor.patch(
        f"/api/board/tasks/{task.id}",
        {"title": "renamed", "metadata": {"verify_cmd": "make check", "note": "x"}},
        format="json",
    )
    assert edit.status_code == 200, edit.content[:300]
    settings.CLAWBOO_TASK_COMMAND_ALLOWLIST = ["make lint"]
    allowlisted = editor.patch(
        f"/api/board/tasks/{task.id}", {"metadata": {"verify_cmd": "make lint"}}, format="json"
    )
    assert allowlisted.status_code == 200, allowlisted.content[:300]


def test_staff_without_the_repository_permission_choose_no_routine_verify_command():
    registry.create_agent(
        id="bot", display_name="Bot", team="default", runtime="command", settings={"argv": ["true"]}
    )
    made = api_of(staff("scheduler", "add_routine")).post(
        "/api/routines",
        {
            "agent_id": "bot",
            "team": "default",
            "cron_spec": "0 9 * * *",
            "task_template": {"title": "daily", "verify_cmd": "curl x | sh"},
        },
        format="json",
    )
    refused_naming_the_permission(made, "metadata.verify_cmd")
    assert Routine.objects.count() == 0


def test_the_task_admin_refuses_a_command_to_staff_without_the_permission(client: Client):
    client.force_login(staff("adder", "add_task", "view_task"))
    page = client.post(
        "/admin/board/task/add/",
        {
            "id": "",
            "team": "default",
            "title": "From admin",
            "description": "",
            "status": "todo",
            "priority": "0",
            "labels": "[]",
            "metadata": '{"verify_cmd": "curl x | sh"}',
            "file_mutating": "on",
            "max_attempts": "",
            "comments-TOTAL_FORMS": "0",
            "comments-INITIAL_FORMS": "0",
            "executions-TOTAL_FORMS": "0",
            "executions-INITIAL_FORMS": "0",
        },
    )
    assert page.status_code == 200, page.content[:2000]
    assert NEEDS in page.content.decode()
    assert not Task.objects.filter(title="From admin").exists()
