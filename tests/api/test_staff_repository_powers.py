"""GOVERNANCE §6, staff's powers: what a repository's permissions govern -- registering
one, choosing the commands the server runs for it -- is not had by way of a task.

A staff caller's ``repo_path`` registers a repository only if they may register one.

A staff person's ``metadata.repo_path`` (a task, its checkout) or
``task_template.repo_path`` (a routine) resolves to the team's repository at that
path, and registers one when the team has none there. Registering a repository is
``POST /api/repositories``, whose row asks ``clawboo.add_repository``; staff granted
only ``add`` on tasks (or ``change``, or ``add`` on routines) registered any git
checkout on the server as any team's repository through these side doors, which
the admin's own repository page refuses them. Now an unregistered path is ``403``
naming the permission, nothing written; a registered path still works, and staff
holding the permission still register one.

A task's ``metadata.install_cmd`` / ``verify_cmd`` / ``start_cmd`` (a routine's
template's ``verify_cmd``) override its repository's commands: the gate runs them on
the server. Staff granted only ``add``/``change`` on tasks (or ``add`` on routines)
set them as they pleased, while the repository's own commands need
``clawboo.change_repository``. Now such a command needs that permission too (``403``
naming it, nothing written); an allowlisted command, or an edit re-sending the
command a task already holds, needs none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from rest_framework.authtoken.models import Token

from board import store
from board.models import Task
from core import registry, repositories
from core.models import Repository
from routines.models import Routine
from tests.api.conftest import fingerprint
from tests.api.conftest import key_client as client
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db

NEEDS = "clawboo.add_repository"


@pytest.fixture
def root(tmp_path: Path, settings) -> Path:
    base = (tmp_path / "repos").resolve()
    base.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [base]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    return base


def staff(username: str, *codenames: str) -> Any:
    user = get_user_model().objects.create_user(username=username, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


def api_of(user: Any) -> Any:
    return client(Token.objects.create(user=user).key)


def written() -> dict[str, Any]:
    return {**fingerprint(), "repositories": list(Repository.objects.values_list("id", "path"))}


def refused_naming_the_permission(answer: Any, field: str) -> None:
    assert answer.status_code == 403, answer.content[:300]
    body = answer.json()
    assert (body["error"], body["permission"], body["field"]) == ("forbidden", NEEDS, field)


def test_staff_without_the_repository_permission_register_none_through_a_task(root: Path):
    loose = make_repo(root / "loose")
    adder = api_of(staff("adder", "add_task", "change_task"))
    before = written()
    made = adder.post(
        "/api/board/tasks", {"title": "t", "metadata": {"repo_path": str(loose)}}, format="json"
    )
    refused_naming_the_permission(made, "metadata.repo_path")
    assert written() == before
    task = store.create_task(title="mine").task
    edit = adder.patch(
        f"/api/board/tasks/{task.id}", {"metadata": {"repo_path": str(loose)}}, format="json"
    )
    refused_naming_the_permission(edit, "metadata.repo_path")
    checkout = adder.post(
        f"/api/board/tasks/{task.id}/workspace", {"repo_path": str(loose)}, format="json"
    )
    refused_naming_the_permission(checkout, "repo_path")
    assert Repository.objects.count() == 0
    assert store.get_task(task.id).repository_id is None


def test_staff_without_the_repository_permission_still_name_a_registered_path(root: Path):
    registered = repositories.register(team="default", path=str(make_repo(root / "app")))
    adder = api_of(staff("adder", "add_task"))
    made = adder.post(
        "/api/board/tasks",
        {"title": "t", "metadata": {"repo_path": registered.path}},
        format="json",
    )
    assert made.status_code == 201, made.content[:300]
    assert made.json()["repository"] == registered.id


def test_staff_holding_the_repository_permission_register_one_as_before(root: Path):
    loose = make_repo(root / "loose")
    operator = api_of(staff("operator", "add_task", "add_repository"))
    made = operator.post(
        "/api/board/tasks", {"title": "t", "metadata": {"repo_path": str(loose)}}, format="json"
    )
    assert made.status_code == 201, made.content[:300]
    assert Repository.objects.get(team_id="default").path == str(loose)


def test_staff_without_the_repository_permission_register_none_through_a_routine(root: Path):
    loose = make_repo(root / "loose")
    user = staff("scheduler", "add_routine")
    registry.create_agent(
        id="bot", display_name="Bot", team="default", runtime="command", settings={"argv": ["true"]}
    )
    before = written()
    made = api_of(user).post(
        "/api/routines",
        {
            "agent_id": "bot",
            "team": "default",
            "cron_spec": "0 9 * * *",
            "task_template": {"title": "daily", "repo_path": str(loose)},
        },
        format="json",
    )
    refused_naming_the_permission(made, "task_template.repo_path")
    assert written() == before
    assert Routine.objects.count() == 0


def test_the_routines_page_registers_no_repository_for_staff_without_the_permission(
    root: Path, client: Client
):
    loose = make_repo(root / "loose")
    registry.create_agent(
        id="bot", display_name="Bot", team="default", runtime="command", settings={"argv": ["true"]}
    )
    client.force_login(staff("scheduler", "add_routine"))
    page = client.post(
        "/board/routines/new/",
        {
            "team": "default",
            "agent": "bot",
            "cron_spec": "0 9 * * *",
            "timezone": "UTC",
            "catch_up": "latest",
            "title": "daily",
            "description": "",
            "kind": "research",
            "priority": "0",
            "repo_path": str(loose),
            "model": "",
            "max_node_cents": "",
            "team_task_id": "",
        },
    )
    assert page.status_code == 200  # the form again, the refusal beside its field
    assert NEEDS in page.content.decode()
    assert Repository.objects.count() == 0
    assert Routine.objects.count() == 0


def admin_add(client: Client, metadata: str) -> Any:
    """The task admin's add page, posted with ``metadata`` (its JSON text)."""
    return client.post(
        "/admin/board/task/add/",
        {
            "id": "",
            "team": "default",
            "title": "From admin",
            "description": "",
            "status": "todo",
            "priority": "0",
            "labels": "[]",
            "metadata": metadata,
            "file_mutating": "on",
            "max_attempts": "",
            "comments-TOTAL_FORMS": "0",
            "comments-INITIAL_FORMS": "0",
            "executions-TOTAL_FORMS": "0",
            "executions-INITIAL_FORMS": "0",
        },
    )


def test_the_task_admin_registers_no_repository_for_staff_without_the_permission(
    root: Path, client: Client
):
    loose = make_repo(root / "loose")
    client.force_login(staff("adder", "add_task", "view_task"))
    page = admin_add(client, f'{{"repo_path": "{loose}"}}')
    assert page.status_code == 200, page.content[:2000]
    assert NEEDS in page.content.decode()
    assert Repository.objects.count() == 0
    assert not Task.objects.filter(title="From admin").exists()


# --- the commands the server runs -------------------------------------------------

COMMANDS = "clawboo.change_repository"


def refused_the_commands(answer: Any, field: str) -> None:
    assert answer.status_code == 403, answer.content[:300]
    body = answer.json()
    assert (body["error"], body["permission"], body["field"]) == ("forbidden", COMMANDS, field)


@pytest.mark.parametrize("key", ["install_cmd", "verify_cmd", "start_cmd"])
def test_staff_without_the_repository_permission_choose_no_task_command(key: str):
    editor = api_of(staff("editor", "add_task", "change_task"))
    task = store.create_task(title="mine").task
    before = fingerprint()
    made = editor.post(
        "/api/board/tasks", {"title": "t", "metadata": {key: "curl x | sh"}}, format="json"
    )
    refused_the_commands(made, f"metadata.{key}")
    edit = editor.patch(
        f"/api/board/tasks/{task.id}", {"metadata": {key: "curl x | sh"}}, format="json"
    )
    refused_the_commands(edit, f"metadata.{key}")
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
    refused_the_commands(made, "metadata.verify_cmd")
    assert Routine.objects.count() == 0


def test_the_task_admin_refuses_a_command_to_staff_without_the_permission(client: Client):
    client.force_login(staff("adder", "add_task", "view_task"))
    page = admin_add(client, '{"verify_cmd": "curl x | sh"}')
    assert page.status_code == 200, page.content[:2000]
    assert COMMANDS in page.content.decode()
    assert not Task.objects.filter(title="From admin").exists()
