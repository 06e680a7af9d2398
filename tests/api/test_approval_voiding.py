"""An approval is voided by any edit of what would run or where (GOVERNANCE §5), by
every door: REST (the board page's door too), MCP and the admin. One list says which
fields (``board.store.approvals.VOIDING_FIELDS``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.store import approvals
from core import registry
from core.models import Event
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db


def approved(api, **fields) -> str:
    body = {"title": "risky", "labels": ["risk"], **fields}
    task = api.post("/api/board/tasks", body, format="json").json()
    answer = api.post(
        f"/api/board/tasks/{task['id']}/approval", {"decision": "approve"}, format="json"
    )
    assert answer.status_code == 200 and answer.json()["approval"]["state"] == "approved"
    return task["id"]


def state(task_id: str) -> str | None:
    return store.get_task(task_id).approval_state


@pytest.fixture
def repository(tmp_path: Path, settings):
    base = (tmp_path / "repos").resolve()
    base.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [base]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    from core import repositories

    return repositories.register(team="default", path=str(make_repo(base / "app")))


@pytest.mark.parametrize(
    "change",
    [
        {"title": "another"},
        {"description": "more"},
        {"labels": ["risk", "ui"]},
        {"metadata": {"verify_cmd": "make test"}},
        {"route": {"runtime": "codex"}},
        {"route": {"labels": ["gpu"]}},
        {"max_run_cents": 50},
    ],
    ids=lambda change: next(iter(change)),
)
def test_an_edit_of_what_would_run_voids_the_approval_over_rest(staff_api, change):
    # Staff: a verify command is an operator's to set.
    task_id = approved(staff_api)
    edited = staff_api.patch(f"/api/board/tasks/{task_id}", change, format="json")
    assert edited.status_code == 200, edited.json()
    assert edited.json()["approval"]["state"] == "required"
    assert Event.objects.filter(task_id=task_id, kind="approval_required").exists()


def test_a_route_to_an_agent_voids_the_approval(api, agent):
    task_id = approved(api)
    edited = api.patch(f"/api/board/tasks/{task_id}", {"route": {"agent": agent.id}}, format="json")
    assert edited.json()["approval"]["state"] == "required"


def test_a_repository_change_voids_the_approval(api, repository):
    task_id = approved(api)
    edited = api.patch(f"/api/board/tasks/{task_id}", {"repository": repository.id}, format="json")
    assert edited.status_code == 200, edited.json()
    assert edited.json()["approval"]["state"] == "required"


def test_adding_or_removing_a_dependency_voids_the_approval(api):
    other = api.post("/api/board/tasks", {"title": "first"}, format="json").json()["id"]
    task_id = approved(api)
    linked = api.post(f"/api/board/tasks/{task_id}/deps", {"depends_on": other}, format="json")
    assert linked.status_code == 201 and state(task_id) == "required"
    api.post(f"/api/board/tasks/{task_id}/approval", {"decision": "approve"}, format="json")
    assert state(task_id) == "approved"
    assert api.delete(f"/api/board/tasks/{task_id}/deps/{other}").status_code == 204
    assert state(task_id) == "required"


def test_the_mcp_door_links_through_the_same_rule(api):
    # The MCP tool link_dependency calls store.link, the only writer of the edge.
    other = store.create_task(title="first").task.id
    task_id = approved(api)
    assert store.link(task_id, other)
    assert state(task_id) == "required"


def test_a_priority_or_assignee_change_is_not_new_work(api):
    task_id = approved(api)
    assert api.patch(f"/api/board/tasks/{task_id}", {"priority": 9}, format="json").json()[
        "approval"
    ]["state"] == ("approved")


def test_the_list_of_voiding_fields_is_the_contracts(api):
    assert approvals.VOIDING_FIELDS >= {
        "title",
        "description",
        "goal",
        "context",
        "labels",
        "metadata",
        "route_agent_id",
        "route_runtime",
        "route_labels",
        "repository_id",
        "max_run_cents",
        "depends_on",
    }


def test_the_admin_form_voids_the_approval_on_a_route_or_ceiling_edit(api, client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    registry.create_agent(id="bob", display_name="Bob", team="default", runtime="codex")
    for field, value in (("max_run_cents", "40"), ("route_agent_id", "bob")):
        task_id = approved(api)
        task = store.get_task(task_id)
        form = {
            "title": task.title,
            "description": "",
            "status": "todo",
            "priority": "0",
            "labels": '["risk"]',
            "metadata": "{}",
            "override_reason": "",
            "route_agent_id": "",
            "route_runtime": "",
            "route_labels": "",
            "comments-TOTAL_FORMS": "0",
            "comments-INITIAL_FORMS": "0",
            "executions-TOTAL_FORMS": "0",
            "executions-INITIAL_FORMS": "0",
            field: value,
        }
        response = client.post(f"/admin/board/task/{task_id}/change/", form)
        assert response.status_code == 302, response.content[:3000]
        assert state(task_id) == "required", field
