"""Cursor pagination answering ``{"results": [...], "next": <url or null>}``."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from core.errors import ValidationFailed

CURSOR_MAX = 200
POSITION = re.compile(r"\A-?[0-9]{1,7}\Z")  # a task priority (±1,000,000)


class TaskCursorPagination(CursorPagination):
    ordering = ("-priority", "-created_at", "id")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def decode_cursor(self, request: Any) -> Any:
        raw = request.query_params.get(self.cursor_query_param)
        if raw is not None and len(raw) > CURSOR_MAX:
            raise ValidationFailed("cursor", "is not a cursor this server issued")
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise ValidationFailed("cursor", "is not a cursor this server issued") from None
        # DRF decodes any base64 it is given; the position lands in a query on the
        # ordering's first field (an integer priority), so check it is one.
        if cursor is not None and cursor.position is not None:
            if not POSITION.match(str(cursor.position)):
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
