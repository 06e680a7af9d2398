"""Lists of the tables that only grow (the event log, runs, heartbeats, comments,
deliveries, tool calls, routine fires): paged without counting the whole table.

Django's changelist counts the listed rows on every page load (``COUNT(*)``), to
number its page links and to say how many there are; on a log of millions of rows
each page of a hundred paid a full scan. Here the count stops a few pages past the
one shown, so its cost is bounded by the page asked for, never by the table:

- the page links reach :data:`PAGES_AHEAD` pages past the page shown (each one
  holds rows: the count saw them), so paging forward keeps going to the last row;
- past that, the list says "more than N"; for the unfiltered list on PostgreSQL, the
  planner's estimate of the table's rows (``pg_class.reltuples``, kept by
  autovacuum), "about N".
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import PAGE_VAR
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property

# How many pages past the one shown the count looks: the page links a person clicks
# (Django shows the last two numbers) hold rows the count has seen.
PAGES_AHEAD = 10


class CappedCountPaginator(Paginator):
    """Counts at most ``(page + PAGES_AHEAD) * per_page + 1`` rows, with
    ``SELECT COUNT(*) FROM (… LIMIT n)``: ``exact`` says whether that was all of
    them; ``shown_count`` is what the list says about how many there are."""

    def __init__(self, object_list: Any, per_page: int, *args: Any, page: int = 1) -> None:
        super().__init__(object_list, per_page, *args)
        self.rows: QuerySet[Any] = object_list
        self.cap = (max(page, 1) + PAGES_AHEAD) * int(per_page)

    @cached_property
    def count(self) -> int:
        return int(self.rows[: self.cap + 1].count())

    @property
    def exact(self) -> bool:
        return self.count <= self.cap

    @cached_property
    def shown_count(self) -> str:
        if self.exact:
            return f"{self.count:,}"
        estimate = self._table_estimate()
        if estimate is not None and estimate > self.cap:
            return f"about {estimate:,}"
        return f"more than {self.cap:,}"

    def _table_estimate(self) -> int | None:
        """PostgreSQL's estimate of the table's rows, for the unfiltered list only
        (a filter's share of them is not known without counting); None elsewhere,
        or before the table was first analysed (reltuples -1)."""
        query = self.rows.query
        connection = connections[self.rows.db]
        if query.where or connection.vendor != "postgresql":
            return None
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                [connection.ops.quote_name(self.rows.model._meta.db_table)],
            )
            row = cursor.fetchone()
        return int(row[0]) if row and row[0] is not None and row[0] >= 0 else None


# The furthest page a count reaches for: a forged ?p=10**20 would ask the database
# for a LIMIT past 64 bits. Past it, the changelist answers the page as it answers
# any page beyond the last.
PAGE_MAX = 10_000_000


def page_asked(request: HttpRequest) -> int:
    try:
        return min(max(int(request.GET.get(PAGE_VAR, 1)), 1), PAGE_MAX)
    except (TypeError, ValueError):
        return 1  # the changelist answers a bad page number itself


class GrowingTableAdmin(admin.ModelAdmin):
    """A list of an append-only table: no whole-table count (Django's second count,
    of the unfiltered table, is off too), page links that stay on rows, and the
    number of rows said as exact, "more than N" or PostgreSQL's "about N"
    (templates/admin/pagination.html)."""

    show_full_result_count = False
    paginator = CappedCountPaginator
    # Django's "Show counts" beside the filters counts each choice over the table.
    show_facets = admin.ShowFacets.NEVER

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: Any,
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> CappedCountPaginator:
        return CappedCountPaginator(
            queryset, per_page, orphans, allow_empty_first_page, page=page_asked(request)
        )
