"""Input checks shared by every app's data layer: each returns the clean value or
raises :class:`ValidationFailed` naming the field, before anything is written.
The constants are SPEC §10's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from core.errors import ValidationFailed

TEXT_MAX = 20_000
ID_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


def check_id(value: Any, field: str = "id") -> str:
    if not isinstance(value, str) or not ID_PATTERN.match(value) or ".." in value:
        raise ValidationFailed(
            field,
            "must be 1-128 characters: a letter or digit, then letters, digits, '.', '_' "
            "or '-' (no '..')",
        )
    return value


def check_text(value: Any, field: str, *, limit: int = TEXT_MAX, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValidationFailed(field, "must be a string" + (" and not empty" if required else ""))
    if len(value) > limit:
        raise ValidationFailed(field, f"must be at most {limit} characters")
    return value


def check_int(value: Any, field: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed(field, "must be an integer")
    if not low <= value <= high:
        raise ValidationFailed(field, f"must be between {low} and {high}")
    return value


def check_object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed(field, "must be a JSON object")
    return value


def unknown_keys(given: Iterable[str], allowed: Iterable[str], where: str) -> None:
    extra = sorted(set(given) - set(allowed))
    if extra:
        raise ValidationFailed(extra[0], f"unknown field in {where}")
