"""Cursor pagination answering ``{"results": [...], "next": <url or null>}``."""

from __future__ import annotations

import re
from typing import Any

from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from core.api.bodies import query_int
from core.errors import ValidationFailed

CURSOR_MAX = 200
POSITION = re.compile(r"\A-?[0-9]{1,7}\Z")  # a task priority (±1,000,000)


class TaskCursorPagination(CursorPagination):
    """Pages in the board's order: priority desc, then newest first."""

    ordering: Any = ("-priority", "-created_at", "id")
    page_size = 50
    page_size_query_param: str | None = "limit"
    max_page_size = 500

    def position_is_valid(self, position: str) -> bool:
        return bool(POSITION.match(position))

    def get_page_size(self, request: Any) -> int:
        # DRF would answer the default page for a bad ``limit`` and cut a big one to
        # the most: a script would get another page size than it asked, and no error.
        if self.page_size_query_param is None:
            return int(self.page_size)
        return query_int(
            request.query_params.get(self.page_size_query_param),
            self.page_size_query_param,
            default=int(self.page_size),
            low=1,
            high=self.max_page_size,
        )

    def first_page(self, queryset: Any, request: Any, size: int, next_base: str) -> list[Any]:
        """The first ``size`` rows of ``queryset`` in this order, for a response that
        carries several lists; :meth:`get_next_link` then names the next page on
        ``next_base`` (the absolute URL of the list endpoint, with the query that
        lists these rows). The request's own ``limit`` and ``cursor`` are not read."""
        self.page_size_query_param = None
        self.page_size = size
        self.first_only = True
        page: list[Any] | None = self.paginate_queryset(queryset, request)
        self.base_url = next_base
        return list(page or [])

    def decode_cursor(self, request: Any) -> Any:
        if getattr(self, "first_only", False):
            return None
        raw = request.query_params.get(self.cursor_query_param)
        if raw is not None and len(raw) > CURSOR_MAX:
            raise ValidationFailed("cursor", "is not a cursor this server issued")
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationFailed("cursor", "is not a cursor this server issued") from None
        # DRF decodes any base64 it is given; the position lands in a query on the
        # ordering's first field, so check it is a value of that field.
        if cursor is not None and cursor.position is not None:
            if not self.position_is_valid(str(cursor.position)):
                raise ValidationFailed("cursor", "is not a cursor this server issued")
        return cursor

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"results": data, "next": self.get_next_link()})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {
                "results": schema,
                "next": {"type": "string", "nullable": True, "format": "uri"},
            },
        }


class RecentTaskCursorPagination(TaskCursorPagination):
    """Pages most recently changed first: the order of the board's terminal columns
    (done, cancelled), where the newest history is what people look for."""

    ordering = ("-updated_at", "-id")

    def position_is_valid(self, position: str) -> bool:
        try:
            return parse_datetime(position) is not None
        except ValueError:  # well-formed but impossible (month 13)
            return False
