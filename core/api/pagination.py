"""Cursor pagination answering ``{"results": [...], "next": <url or null>}``."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response

from core.errors import ValidationFailed


class TaskCursorPagination(CursorPagination):
    ordering = ("-priority", "-created_at", "id")
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def decode_cursor(self, request: Any) -> Any:
        try:
            return super().decode_cursor(request)
        except NotFound:
            raise ValidationFailed("cursor", "is not a cursor this server issued") from None

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
