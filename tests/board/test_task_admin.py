"""The task admin's fields: labels as a comma list, metadata as validated JSON, and a
changelist that fits a 1440 px screen (the column set is checked in Chromium by
tests/live/test_routines_browser.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.admin import TaskAdmin

pytestmark = pytest.mark.django_db

INLINES = {
    "comments-TOTAL_FORMS": "0",
    "comments-INITIAL_FORMS": "0",
    "executions-TOTAL_FORMS": "0",
    "executions-INITIAL_FORMS": "0",
}


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def add_form(**fields: str) -> dict[str, str]:
    return {
        "id": "",
        "team": "default",
        "title": "From admin",
        "description": "",
        "status": "todo",
        "priority": "0",
        "labels": "",
        "metadata": "",
        "max_attempts": "",
        **INLINES,
        **fields,
    }


def change_form(task, **fields: str) -> dict[str, str]:
    return {
        "title": task.title,
        "description": task.description,
        "status": task.status,
        "priority": str(task.priority),
        "labels": ", ".join(task.labels),
        "metadata": "{}",
        "claim_agent": "",
        "override_reason": "",
        **INLINES,
        **fields,
    }


def test_labels_typed_as_a_comma_list_round_trip(operator):
    response = operator.post("/admin/board/task/add/", add_form(labels="bug, backend ,, ui"))
    assert response.status_code == 302, response.content.decode()[:3000]
    task = store.list_tasks().get(title="From admin")
    assert task.labels == ["bug", "backend", "ui"]
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert 'name="labels" value="bug, backend, ui"' in page
    # Saving the form unchanged writes nothing; editing the list writes the new one.
    same = operator.post(f"/admin/board/task/{task.id}/change/", change_form(task))
    assert same.status_code == 302 and store.get_task(task.id).revision == task.revision
    operator.post(f"/admin/board/task/{task.id}/change/", change_form(task, labels="backend"))
    assert store.get_task(task.id).labels == ["backend"]


def test_a_json_list_of_labels_is_still_accepted(operator):
    response = operator.post("/admin/board/task/add/", add_form(labels='["ops", "db"]'))
    assert response.status_code == 302
    assert store.list_tasks().get(title="From admin").labels == ["ops", "db"]


def test_a_label_the_board_refuses_is_shown_on_the_field(operator):
    response = operator.post("/admin/board/task/add/", add_form(labels="ok, " + "x" * 300))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["labels"]
    assert not store.list_tasks().filter(title="From admin").exists()


def test_metadata_is_shown_indented_and_saved_as_an_object(operator):
    response = operator.post(
        "/admin/board/task/add/", add_form(metadata='{"repo": "api", "tries": [1, 2]}')
    )
    assert response.status_code == 302
    task = store.list_tasks().get(title="From admin")
    assert task.metadata == {"repo": "api", "tries": [1, 2]}
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert "{\n  &quot;repo&quot;: &quot;api&quot;," in page


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"repo": "api",}', "Not valid JSON: Expecting property name enclosed in double quotes"),
        ("{'repo': 'api'}", "(line 1, column 2)"),
        ('["not", "an", "object"]', "Must be a JSON object"),
    ],
)
def test_invalid_metadata_is_refused_with_its_reason_and_writes_nothing(operator, text, message):
    task = store.create_task(title="Keep me", metadata={"a": 1}).task
    response = operator.post(
        f"/admin/board/task/{task.id}/change/",
        change_form(task, title="Changed", metadata=text),
    )
    assert response.status_code == 200
    errors = " ".join(response.context["adminform"].form.errors["metadata"])
    assert message in errors
    if "Not valid JSON" in message or "line 1" in message:
        # Text that does not parse comes back as typed, to be fixed.
        assert text.replace('"', "&quot;").replace("'", "&#x27;") in response.content.decode()
    after = store.get_task(task.id)
    assert (after.title, after.metadata, after.revision) == ("Keep me", {"a": 1}, task.revision)


def test_the_changelist_shows_the_columns_that_fit(operator):
    store.create_task(title="A task with a title of ordinary length", labels=["ui"])
    assert TaskAdmin.list_display == (
        "title",
        "shown_status",
        "team",
        "assignee",
        "priority",
        "verdict",
        "updated_at",
    )
    page = operator.get("/admin/board/task/")
    assert page.status_code == 200
    assert "A task with a title of ordinary length" in page.content.decode()


def test_a_task_waiting_for_approval_reads_so_in_the_changelist_as_on_the_board(operator):
    # It read "Todo", where the board shows it in "Needs approval" and no worker takes it.
    waiting = store.create_task(title="Waits for a person", labels=["risk"]).task
    plain = store.create_task(title="Starts at once").task
    page = operator.get("/admin/board/task/").content.decode()

    def row(task) -> str:
        return page.split(f"/admin/board/task/{task.id}/change/", 1)[1].split("</tr>", 1)[0]

    assert "Todo · needs approval" in row(waiting)
    assert "needs approval" not in row(plain) and ">Todo<" in row(plain)


def test_view_on_site_opens_the_task_on_its_teams_board(operator):
    task = store.create_task(title="Seen from the admin").task
    page = operator.get(f"/admin/board/task/{task.id}/change/")
    assert "View on site" in page.content.decode()
    jump = operator.get(f"/admin/r/{_content_type_id()}/{task.id}/")
    assert jump.status_code == 302
    assert jump["Location"].endswith(f"/board/?team=default&task={task.id}")


def _content_type_id() -> int:
    from django.contrib.contenttypes.models import ContentType

    from board.models import Task

    return ContentType.objects.get_for_model(Task).id


def test_a_task_made_in_the_admin_names_a_repository_or_registers_its_path(
    operator, tmp_path, settings
):
    from core import repositories
    from tests.fixtures.gitrepos import make_repo

    settings.CLAWBOO_REPO_ROOTS = [tmp_path.resolve()]
    shop = repositories.register(team="default", path=str(make_repo(tmp_path / "shop")))
    operator.post("/admin/board/task/add/", add_form(title="named", repository=shop.id))
    assert store.list_tasks().get(title="named").repository_id == shop.id
    other = make_repo(tmp_path / "other")
    operator.post(
        "/admin/board/task/add/",
        add_form(title="by path", metadata=f'{{"repo_path": "{other}"}}'),
    )
    task = store.list_tasks().get(title="by path")
    assert repositories.get_repository(task.repository_id).path == str(other.resolve())


def test_a_tasks_page_offers_only_its_own_teams_repositories(operator, tmp_path, settings):
    # Another team's repository was in the menu, and refused when chosen.
    from core import registry, repositories
    from tests.fixtures.gitrepos import make_repo

    settings.CLAWBOO_REPO_ROOTS = [tmp_path.resolve()]
    registry.ensure_team("acme", "Acme")
    ours = repositories.register(team="default", path=str(make_repo(tmp_path / "ours")))
    theirs = repositories.register(team="acme", path=str(make_repo(tmp_path / "theirs")))
    task = store.create_task(title="t").task
    form = operator.get(f"/admin/board/task/{task.id}/change/").context["adminform"].form
    offered = [str(value) for value, _ in form.fields["repository"].choices if value]
    assert offered == [ours.id], (offered, theirs.id)


def test_staff_register_a_repository_in_the_admin_by_its_real_path(operator, tmp_path, settings):
    from core.models import Repository
    from tests.fixtures.gitrepos import make_repo

    settings.CLAWBOO_REPO_ROOTS = [tmp_path.resolve()]
    repo = make_repo(tmp_path / "shop")
    (tmp_path / "link").symlink_to(repo)
    form = {
        "id": "shop",
        "team": "default",
        "path": str(tmp_path / "link"),
        "remote": "",
        "base_branch": "main",
        "landing": "",
        "landing_mode": "direct",
        "install_cmd": "",
        "verify_cmd": "make test",
    }
    operator.post("/admin/clawboo/repository/add/", form)
    assert Repository.objects.get(pk="shop").path == str(repo.resolve())
    refused = operator.post(
        "/admin/clawboo/repository/add/", {**form, "id": "x", "path": str(tmp_path)}, follow=True
    )
    assert "Not saved" in refused.content.decode()
    assert not Repository.objects.filter(pk="x").exists()


def test_touches_are_typed_one_a_line_round_trip_and_a_bad_glob_is_shown_on_the_field(
    operator,
):
    response = operator.post(
        "/admin/board/task/add/", add_form(touches="src/**\ndocs/*.md, ./lib/")
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    task = store.list_tasks().get(title="From admin")
    assert (task.touches, task.scope) == (
        ["src/**", "docs/*.md", "lib"],
        ["src/**", "docs/*.md", "lib"],
    )
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert "src/**\ndocs/*.md\nlib</textarea>" in page
    # Saving unchanged writes nothing; editing the globs writes the new ones.
    same = operator.post(
        f"/admin/board/task/{task.id}/change/", change_form(task, touches="src/**\ndocs/*.md\nlib")
    )
    assert same.status_code == 302 and store.get_task(task.id).revision == task.revision
    operator.post(f"/admin/board/task/{task.id}/change/", change_form(task, touches="README.md"))
    assert store.get_task(task.id).touches == ["README.md"]
    refused = operator.post("/admin/board/task/add/", add_form(title="bad", touches="../etc"))
    assert refused.status_code == 200
    assert "step out of the repository" in str(refused.context["adminform"].form.errors["touches"])
    assert not store.list_tasks().filter(title="bad").exists()
