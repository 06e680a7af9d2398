"""Shapes for the OpenAPI document (drf-spectacular): the error envelope and the
error responses of an operation. A request body's serializer is also its gate
(``core.api.bodies.json_object``: its keys); the data layers check the values."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from core.api.errors import HTTP_STATUS


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
