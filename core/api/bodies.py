"""Reading request bodies: a JSON object with known keys, or a 400 naming the field.

Each body is declared once, as a DRF serializer: the view hands it to
``extend_schema(request=...)`` for the OpenAPI document and to :func:`json_object`
for the gate, so the keys the schema lists and the keys the view accepts are the
same object's (tests/api/test_request_bodies.py holds every operation to it). The
serializer names the keys and which are required; the data layers check the values.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.request import Request

from core.errors import ValidationFailed

# A body declaration: a serializer class or instance (``inline_serializer`` makes
# instances), or None for an operation that takes no body.
BodySpec = type[serializers.Serializer] | serializers.Serializer | None


class OpenBody(serializers.Serializer):
    """A body whose declared keys are the ones Clawboo reads; any others pass through
    to a source that checks its own (the gateway's cron parameters)."""


def body_fields(spec: BodySpec) -> dict[str, serializers.Field]:
    """The declared keys of a body, by name."""
    if spec is None:
        return {}
    instance = spec() if isinstance(spec, type) else spec
    return dict(instance.fields)


def required_keys(spec: BodySpec) -> list[str]:
    return [name for name, field in body_fields(spec).items() if field.required]


def is_open(spec: BodySpec) -> bool:
    instance = spec() if isinstance(spec, type) else spec
    return isinstance(instance, OpenBody)


def json_object(request: Request, spec: BodySpec) -> dict[str, Any]:
    """The request's JSON object, its keys checked against ``spec``: an unknown key or
    a missing required one is a 400 naming it. No body at all reads as ``{}`` (DRF
    gives an empty dict, or an empty QueryDict for a form type); a body that is JSON
    but no object, a literal ``null`` too, is a 400 on ``body`` (a wrong type)."""
    data = request.data
    if hasattr(data, "dict") and not data:
        data = {}
    if not isinstance(data, dict):
        raise ValidationFailed("body", "must be a JSON object")
    fields = body_fields(spec)
    if not is_open(spec):
        for key in data:
            if key not in fields:
                raise ValidationFailed(str(key), "unknown field")
    for key in required_keys(spec):
        if key not in data:
            raise ValidationFailed(key, "is required")
    return dict(data)


def query_bool(value: str | None, field: str) -> bool:
    if value is None:
        return False
    lowered = value.strip().lower()
    if lowered in {"true", "1", "yes"}:
        return True
    if lowered in {"false", "0", "no", ""}:
        return False
    raise ValidationFailed(field, "must be true or false")


def query_int(value: str | None, field: str, *, default: int, low: int = 0, high: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValidationFailed(field, "must be an integer") from None
    if not low <= number <= high:
        raise ValidationFailed(field, f"must be between {low} and {high}")
    return number
