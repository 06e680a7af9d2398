"""The board's column reads are index walks: a page of one column, in its order, and
every column's count, whatever the size of the team's history."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Count

from board import store
from core.api.pagination import RecentTaskCursorPagination, TaskCursorPagination

pytestmark = pytest.mark.django_db


def plan(qs) -> str:
    if connection.vendor == "postgresql":
        # A table this small is cheaper to read whole and sort; with those priced
        # out the plan shows whether an index can serve the query in its order.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE tasks")
            for setting in ("seqscan", "bitmapscan", "sort"):
                cursor.execute(f"SET LOCAL enable_{setting} = off")
        return qs.explain()
    return qs.explain()


def column(status: str, recent: bool):
    ordering = (RecentTaskCursorPagination if recent else TaskCursorPagination).ordering
    qs = store.list_tasks(team="default", status=status, dropped=False)
    return qs.order_by(*ordering)[:51]


@pytest.fixture
def history(default_team):
    for i in range(30):
        task = store.create_task(title=f"t{i}", priority=i % 3).task
        if i % 3 == 0:
            store.transition(task.id, "cancelled")
    store.create_task(title="later", status="backlog")


def test_a_terminal_column_page_walks_the_recent_index_without_sorting(history):
    found = plan(column("cancelled", recent=True))
    assert "tasks_board_recent_idx" in found, found
    assert "TEMP B-TREE" not in found.upper() and "Sort" not in found, found


def test_an_active_column_page_walks_the_column_index_without_sorting(history):
    found = plan(column("todo", recent=False))
    assert "tasks_board_column_idx" in found or "tasks_ready" in found, found
    assert "TEMP B-TREE" not in found.upper() and "Sort" not in found, found


def test_the_counts_are_one_group_by_over_an_index(history):
    qs = store.list_tasks(team="default", dropped=False).order_by().values_list("status")
    found = plan(qs.annotate(n=Count("pk")))
    if connection.vendor == "sqlite":  # PostgreSQL picks by its statistics (bench/)
        assert "COVERING INDEX tasks_board_column_idx" in found, found
    assert store.count_by_status(store.list_tasks(team="default", dropped=False)) == {
        "backlog": 1,
        "todo": 20,
        "in_progress": 0,
        "in_review": 0,
        "blocked": 0,
        "done": 0,
        "cancelled": 10,
    }
