"""Shapes for the OpenAPI document (drf-spectacular): the error envelope and the
error responses of an operation. A request body's serializer is also its gate
(``core.api.bodies.json_object``: its keys); the data layers check the values."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from drf_spectacular.views import SCHEMA_KWARGS, SpectacularAPIView
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api.query import building_schema
from core.api.status import HTTP_STATUS


class ErrorSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="Machine-readable code, e.g. 'illegal_transition'.")
    detail = serializers.CharField(help_text="One human sentence.")
    field = serializers.CharField(required=False)
    reason = serializers.CharField(required=False)
    status = serializers.CharField(required=False)
    allowed = serializers.ListField(child=serializers.CharField(), required=False)


def errors(*codes: str) -> dict[int, OpenApiResponse]:
    """Error responses for ``extend_schema(responses=...)``, grouped by HTTP status."""
    by_status: dict[int, list[str]] = {}
    for code in ("unauthenticated", "rate_limited", *codes):
        by_status.setdefault(HTTP_STATUS[code], []).append(code)
    return {
        status: OpenApiResponse(ErrorSerializer, description="error: " + " | ".join(names))
        for status, names in sorted(by_status.items())
    }


def with_errors(success: dict[int, Any], *codes: str) -> dict[int, Any]:
    return {**success, **errors(*codes)}


# ``/api/schema/``: drf-spectacular's view, one generation at a time in a process (its
# generator is not safe across threads; the query-parameter table,
# :func:`core.api.query.declared`, runs it too). Its docstring and schema stay the
# library's: the document describes this operation as it describes the original.
class SchemaView(SpectacularAPIView):
    @extend_schema(**SCHEMA_KWARGS)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with building_schema():
            return super().get(request, *args, **kwargs)
