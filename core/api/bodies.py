"""Reading request bodies: a JSON object with known keys, or a 400 naming the field."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.request import Request

from core.errors import ValidationFailed


def json_object(
    request: Request, allowed: Iterable[str], *, required: Iterable[str] = ()
) -> dict[str, Any]:
    data = request.data
    if data is None or (hasattr(data, "dict") and not data):
        data = {}
    if not isinstance(data, dict):
        raise ValidationFailed("body", "must be a JSON object")
    allowed_set = set(allowed)
    for key in data:
        if key not in allowed_set:
            raise ValidationFailed(str(key), "unknown field")
    for key in required:
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
