"""Every page of the operator console that lists rows reads them in a fixed number of
queries: a list of five hundred agents costs what a list of one does."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from board import store
from board.store import spend, tool_approvals
from core import admin_lists, beats, machines, registry, repositories
from core.models import Event, Team
from ops import notify
from ops.models import NotificationChannel
from routines import store as routines
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db


def seed(n: int, root: Path) -> None:
    """One of each row an operator lists, through the product's own writers, for a
    team ``t{n}``: an owned agent that is the team's reviewer, a repository, a task
    with a comment, a failed run and a tool call waiting, two budgets, a routine, a
    machine token, a heartbeat and a notification channel with a delivery."""
    owner = get_user_model().objects.create_user(f"owner{n}", password="x")
    team = registry.create_team(f"t{n}", f"Team {n}")
    agent = registry.create_agent(
        id=f"a{n}",
        display_name=f"Agent {n}",
        team=team.pk,
        runtime="command",
        settings={"argv": ["true"]},
        owner=owner,
    )
    registry.update_team(team.pk, reviewer_agent=agent.pk, members=[owner])
    repo = repositories.register(team=team.pk, path=str(make_repo(root / f"r{n}")), id=f"r{n}")
    task = store.create_task(id=f"task{n}", title=f"Task {n}", team=team.pk, repository=repo.pk)
    store.add_comment(task.task.id, "a note", owner.username)
    claimed = store.claim(task.task.id, agent.pk)
    run = store.open_execution(task.task.id, claimed.ticket)
    store.close_execution(run.id, "failed", error="exited with code 3", error_class="auth")
    tool_approvals.ask(task.task.id, agent.pk, "Bash", {"command": "ls"})
    for scope, scope_id in (("agent", agent.pk), ("team", team.pk)):
        spend.create_budget(
            team.pk,
            {"scope": scope, "scope_id": scope_id, "window": "day", "limit_cents": 100},
        )
    routines.create_routine(
        agent_id=agent.pk, team=team.pk, cron_spec="0 9 * * *", task_template={"title": "r"}
    )
    machines.mint(f"host{n}", [agent.pk])
    beats.beat(f"part{n}")
    channel = notify.save_channel(
        NotificationChannel(
            team=team,
            name=f"hook{n}",
            kind="webhook",
            url="https://example.com/h",
            reasons=["blocked"],
        )
    )
    event = team.events.order_by("-seq").first()
    notify.record_deliveries(event, "blocked", [channel])


def queries_per_list(client) -> dict[str, int]:
    counts: dict[str, int] = {}
    for model in admin.site._registry:
        opts = model._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        with CaptureQueriesContext(connection) as seen:
            page = client.get(url)
        assert page.status_code == 200, url
        counts[url] = len(seen.captured_queries)
    return counts


def test_no_list_in_the_console_reads_a_row_at_a_time(admin_client, settings, tmp_path):
    settings.CLAWBOO_REPO_ROOTS = [str(tmp_path)]
    seed(0, tmp_path)
    one = queries_per_list(admin_client)
    for n in range(1, 4):
        seed(n, tmp_path)
    four = queries_per_list(admin_client)
    grew = {url: (one[url], four[url]) for url in one if four[url] != one[url]}
    assert grew == {}


@pytest.mark.parametrize(
    ("url", "table"),
    [
        ("/admin/clawboo/event/", "events"),
        ("/admin/board/executionprocess/", "execution_processes"),
    ],
)
def test_the_log_lists_page_newest_first_by_their_primary_key(
    admin_client, settings, tmp_path, url, table
):
    """The event log and the runs grow with every board write and every run: ordered
    by a date no index holds, each page sorted the whole table to show a hundred."""
    settings.CLAWBOO_REPO_ROOTS = [str(tmp_path)]
    for n in range(2):
        seed(n, tmp_path)
    with CaptureQueriesContext(connection) as seen:
        page = admin_client.get(url)
    [listing] = [
        q["sql"] for q in seen.captured_queries if q["sql"].startswith(f'SELECT "{table}"."id"')
    ]
    assert listing.split("ORDER BY")[1].split("LIMIT")[0].strip() == f'"{table}"."id" DESC'
    shown = [row.pk for row in page.context["cl"].result_list]
    assert shown == sorted(shown, reverse=True) and len(shown) >= 2


# The lists of the tables that only grow (core.admin_lists.GrowingTableAdmin).
GROWING = [
    ("/admin/clawboo/event/", "events"),
    ("/admin/board/executionprocess/", "execution_processes"),
    ("/admin/clawboo/heartbeat/", "heartbeats"),
    ("/admin/board/taskcomment/", "task_comments"),
    ("/admin/ops/notificationdelivery/", "notification_deliveries"),
    ("/admin/board/toolapproval/", "tool_approvals"),
    ("/admin/routines/routinefire/", "routine_fires"),
    ("/admin/background_queue/successfuljob/", "django_q_task"),
    ("/admin/background_queue/failedjob/", "django_q_task"),
]


def whole_table_counts(queries: list[dict[str, str]], table: str) -> list[str]:
    """The COUNTs that read every row of ``table``: a count of a LIMITed subquery
    reads at most its limit."""
    return [
        q["sql"]
        for q in queries
        if "COUNT(" in q["sql"].upper() and f'"{table}"' in q["sql"] and "LIMIT" not in q["sql"]
    ]


@pytest.mark.parametrize(("url", "table"), GROWING)
def test_a_growing_tables_list_never_counts_the_whole_table(
    admin_client, settings, tmp_path, url, table
):
    """Django's paginator counted every row of the log on each page load (and again
    with no filter, for "N total"): a full scan of a table that only grows."""
    settings.CLAWBOO_REPO_ROOTS = [str(tmp_path)]
    seed(0, tmp_path)
    for query in ("", "?q=task0"):
        with CaptureQueriesContext(connection) as seen:
            page = admin_client.get(url + query)
        assert page.status_code == 200
        assert whole_table_counts(seen.captured_queries, table) == []


def many_events(n: int) -> list[int]:
    """``n`` events of the default team, newest first by id (the list's order)."""
    team = Team.objects.get(pk="default")
    at = timezone.now()
    Event.objects.bulk_create(
        Event(team=team, seq=10_000 + i, kind="probe", payload={}, created_at=at) for i in range(n)
    )
    return list(Event.objects.order_by("-id").values_list("id", flat=True))


@pytest.fixture
def small_pages(monkeypatch):
    """Pages of 2 rows, counted 2 pages ahead: the paging of a big log, on 25 rows."""
    monkeypatch.setattr(admin.site._registry[Event], "list_per_page", 2)
    monkeypatch.setattr(admin_lists, "PAGES_AHEAD", 2)


def test_the_event_log_pages_forward_and_back_over_every_row(admin_client, small_pages):
    ids = many_events(25)
    seen: list[int] = []
    page_number = 1
    while True:
        page = admin_client.get(f"/admin/clawboo/event/?p={page_number}")
        assert page.status_code == 200, page_number
        cl = page.context["cl"]
        rows = [row.pk for row in cl.result_list]
        assert rows, page_number
        seen += rows
        links = [n for n in cl.paginator.get_elided_page_range(page_number) if n != "…"]
        # Every page number linked holds rows; previous is linked from every page but
        # the first, next from every page but the last.
        assert max(links) == cl.paginator.num_pages
        assert (page_number - 1 in links) == (page_number > 1)
        if page_number + 1 not in links:
            break
        page_number += 1
    assert seen == ids
    assert page_number == 13
    assert "25 events" in page.content.decode()
    # The last linked page from the first page holds rows, and says there are more.
    first = admin_client.get("/admin/clawboo/event/")
    last_linked = first.context["cl"].paginator.num_pages
    assert last_linked == 4 and "more than 6 events" in first.content.decode()
    assert admin_client.get(f"/admin/clawboo/event/?p={last_linked}").context["cl"].result_list


def test_a_filtered_log_says_more_than_what_it_counted(admin_client, small_pages):
    many_events(25)
    page = admin_client.get("/admin/clawboo/event/?kind__exact=probe")
    assert "more than 6 events" in page.content.decode()
    few = admin_client.get("/admin/clawboo/event/?kind__exact=task_created")
    assert few.context["cl"].paginator.exact


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reltuples is PostgreSQL's")
def test_the_unfiltered_log_on_postgresql_says_the_planners_estimate(admin_client, small_pages):
    many_events(25)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE events")
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'events'")
        [estimate] = cursor.fetchone()
    page = admin_client.get("/admin/clawboo/event/")
    assert f"about {estimate:,} events" in page.content.decode()


def test_select_all_past_the_count_says_every_row_not_the_count(admin_client, monkeypatch):
    """Its action acts on every row the filters keep: "Select all 7 heartbeats"
    under a count that stopped at 7 would delete thousands."""
    from core.models import Heartbeat

    monkeypatch.setattr(admin.site._registry[Heartbeat], "list_per_page", 2)
    monkeypatch.setattr(admin_lists, "PAGES_AHEAD", 2)
    at = timezone.now()
    Heartbeat.objects.bulk_create(
        Heartbeat(part="workers", instance=f"h:{i}", host="h", pid=i, started_at=at, beat_at=at)
        for i in range(25)
    )
    page = admin_client.get("/admin/clawboo/heartbeat/").content.decode()
    assert "Select all heartbeats (more than 6)" in page
    assert "Select all 7" not in page


@pytest.mark.parametrize("page", ["99999999999999999999", "-3", "abc", "0"])
def test_a_page_number_past_any_table_is_answered_not_a_server_error(admin_client, page):
    many_events(3)
    response = admin_client.get(f"/admin/clawboo/event/?p={page}")
    assert response.status_code in (200, 302)
