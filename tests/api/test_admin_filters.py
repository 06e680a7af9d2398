"""The event kind, task assignee, run runtime and tool filters build their menus from an
enum or a small table, never from a DISTINCT over the table they list."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board import store
from core import registry
from tests.board.states import task_in

pytestmark = pytest.mark.django_db

LISTED = {
    "/admin/clawboo/event/": ("events", "kind"),
    "/admin/board/task/": ("tasks", "assignee_agent_id"),
    "/admin/board/executionprocess/": ("execution_processes", "runtime"),
}


@pytest.fixture
def operator(client, default_team):
    registry.create_agent(
        id="ada", display_name="Ada", team="default", runtime="command", settings={"argv": ["t"]}
    )
    task, ticket = task_in("in_progress")
    run = store.open_execution(task.id, ticket, runtime="command")
    store.close_execution(run.id, "succeeded")
    store.create_task(title="nobody's")
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def menu(page, title: str) -> list[str]:
    [spec] = [s for s in page.context["cl"].filter_specs if s.title == title]
    return [choice["display"] for choice in spec.choices(page.context["cl"])][1:]


@pytest.mark.parametrize(("url", "column"), LISTED.items())
def test_a_filter_menu_reads_no_distinct_over_the_whole_listed_table(operator, url, column):
    table, field = column
    with CaptureQueriesContext(connection) as seen:
        assert operator.get(url).status_code == 200
    whole = re.compile(rf'SELECT DISTINCT "{table}"."{field}"( AS "{field}")? FROM "{table}"')
    scans = [q["sql"] for q in seen.captured_queries if whole.search(q["sql"])]
    assert [sql for sql in scans if "LIMIT" not in sql] == []


def test_the_menus_offer_the_enum_and_the_registry_and_still_filter(operator):
    tasks = operator.get("/admin/board/task/")
    assert menu(tasks, "assignee") == ["ada"]
    mine = operator.get("/admin/board/task/?assignee_agent_id__exact=ada")
    assert [t.assignee_agent_id for t in mine.context["cl"].result_list] == ["ada"]

    runs = operator.get("/admin/board/executionprocess/")
    assert menu(runs, "runtime")[:3] == ["Command", "Claude Code", "Codex"]
    assert (
        len(
            operator.get("/admin/board/executionprocess/?runtime__exact=command")
            .context["cl"]
            .result_list
        )
        == 1
    )
    assert (
        not operator.get("/admin/board/executionprocess/?runtime__exact=codex")
        .context["cl"]
        .result_list
    )

    events = operator.get("/admin/clawboo/event/")
    kinds = menu(events, "kind")
    assert "added" in kinds and "claimed" in kinds and kinds == sorted(kinds)
    created = operator.get("/admin/clawboo/event/?kind__exact=claimed")
    assert {e.kind for e in created.context["cl"].result_list} == {"claimed"}


def test_the_tool_menu_offers_the_waiting_and_granted_tools_without_a_scan(operator):
    """Tool approvals: the menu is the pending calls' tools and the standing grants',
    not a DISTINCT over the whole audit; a tool decided once long ago still filters."""
    task = store.list_tasks(status="in_progress")[0]
    store.decide_tool_call(
        store.ask_tool_call(task.id, "ada", "Write", {}, "toolu_1").id, "deny", by="op"
    )
    store.decide_tool_call(
        store.ask_tool_call(task.id, "ada", "Edit", {}, "toolu_2").id, "allow_always", by="op"
    )
    store.ask_tool_call(task.id, "ada", "Bash", {"command": "ls"}, "toolu_3")
    with CaptureQueriesContext(connection) as seen:
        page = operator.get("/admin/board/toolapproval/")
    assert page.status_code == 200
    whole = re.compile(r'SELECT DISTINCT "tool_approvals"."tool"')
    assert [q["sql"] for q in seen.captured_queries if whole.search(q["sql"])] == []
    assert menu(page, "tool") == ["Bash", "Edit"]
    denied = operator.get("/admin/board/toolapproval/?tool__exact=Write").context["cl"]
    assert [row.tool for row in denied.result_list] == ["Write"]


@pytest.mark.parametrize("url", ["/admin/board/taskcomment/", "/admin/ops/notificationdelivery/"])
def test_comments_and_deliveries_are_browsed_by_fixed_date_spans(operator, url):
    """A date hierarchy read the whole table's first and last dates, then its distinct
    days, months or years, on every load; the fixed spans read nothing to offer."""
    task = store.list_tasks(status="in_progress")[0]
    store.add_comment(task.id, "a note", "op")
    with CaptureQueriesContext(connection) as seen:
        page = operator.get(url)
    assert page.status_code == 200 and "Past 7 days" in page.content.decode()
    dates = [q["sql"] for q in seen.captured_queries if "created_at" in q["sql"]]
    assert [sql for sql in dates if "MIN(" in sql or "DISTINCT" in sql] == []
    today = operator.get(url, {"created_at__gte": store.now().replace(hour=0, minute=0)})
    assert today.status_code == 200


def test_the_label_menu_offers_the_newest_tasks_labels_whatever_their_priority(operator):
    """The menu sampled 2000 tasks in the model's order, highest priority first: a
    label carried only by low-priority tasks was never offered, however new."""
    from board.admin import LABELS_FROM_NEWEST
    from board.models import Task

    old = store.now() - dt.timedelta(days=30)
    rows = [
        Task(id=f"old{n}", team_id="default", title="urgent", labels=["urgent"], priority=9)
        for n in range(LABELS_FROM_NEWEST)
    ]
    rows[0].labels, rows[0].title = ["legacy"], "legacy"
    for n, row in enumerate(rows):
        row.created_at = row.updated_at = old + dt.timedelta(seconds=n)
    Task.objects.bulk_create(rows)
    store.create_task(title="new", labels=["docs"], priority=0)
    assert menu(operator.get("/admin/board/task/"), "label") == ["docs", "urgent"]
    # A label in a link that the newest tasks do not carry: shown as chosen, and filtered.
    chosen = operator.get("/admin/board/task/?label=legacy")
    assert "legacy" in menu(chosen, "label")
    assert [t.title for t in chosen.context["cl"].result_list] == ["legacy"]
