"""Input checks shared by every app's data layer: each returns the clean value or
raises :class:`ValidationFailed` naming the field, before anything is written.
The constants are SPEC §10's.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from core.errors import ValidationFailed

TEXT_MAX = 20_000
ID_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# JSON values nest at most this deep: far past any real payload, well inside what
# PostgreSQL's jsonb, SQLite's JSON functions and Python's recursion all accept.
JSON_DEPTH_MAX = 32
# What neither database can store in text: NUL (PostgreSQL refuses it; SQLite keeps
# it and truncates it in C), and UTF-16 surrogates, which cannot be UTF-8 at all
# (a lone one stored on SQLite breaks every later read of its row).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class FieldLimit:
    """The most a free-text or JSON field keeps, in characters (a JSON value: its
    compact JSON text), and what happens to more: ``refuse`` (400
    ``validation_error`` naming the field and the limit, nothing written), or
    ``keep_tail`` / ``keep_head`` (its last / first characters are stored)."""

    chars: int
    over: Literal["refuse", "keep_tail", "keep_head"]


# The free-text and JSON fields the body limit (2 MiB) alone bounded, one row each
# (docs/API.md, "Field limits"). The cuts are SPEC §10's evidence tail and the step
# and log bounds docs/API.md states; the refusals are this table's own choice: a
# task's metadata and input, and an agent's settings, hold commands, paths and ids,
# so a description's size (TEXT_MAX) is far past any real one, and more was kept
# whole, read back by every page and run that shows the task or starts the agent.
FIELD_LIMITS: dict[str, FieldLimit] = {
    "metadata": FieldLimit(TEXT_MAX, "refuse"),
    "input": FieldLimit(TEXT_MAX, "refuse"),
    "settings": FieldLimit(TEXT_MAX, "refuse"),
    "evidence": FieldLimit(4_000, "keep_tail"),
    "step.detail": FieldLimit(4_000, "keep_head"),
    "step.arguments": FieldLimit(8_000, "keep_head"),
    "run.log": FieldLimit(64_000, "keep_tail"),
}


def field_limit(name: str) -> int:
    """The characters :data:`FIELD_LIMITS` keeps of ``name``."""
    return FIELD_LIMITS[name].chars


def check_size(value: Any, field: str) -> Any:
    """``value`` when its compact JSON text is within ``field``'s refusing row of
    :data:`FIELD_LIMITS`; else 400 naming the field and the limit."""
    limit = FIELD_LIMITS[field]
    assert limit.over == "refuse", field
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))
    if size > limit.chars:
        raise ValidationFailed(
            field, f"must be at most {limit.chars:,} characters as JSON (this is {size:,})"
        )
    return value


def check_choice(value: Any, field: str, choices: Iterable[str]) -> str:
    """``value`` when it is one of ``choices`` (compared in a list, so an unhashable
    value is refused like any other); else 400 naming them."""
    allowed = list(choices)
    if value not in allowed:
        raise ValidationFailed(field, f"must be one of {', '.join(allowed)}")
    return str(value)


def unstorable_text(value: str) -> str | None:
    """What is wrong with a string neither database can store, or None."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    return "contains a NUL character" if found.group() == "\x00" else "contains a lone surrogate"


# Joins an emoji sequence (a label may be "👩‍💻"): invisible, but changes nothing a reader
# compares.
_ZERO_WIDTH_JOINER = "\u200d"


def invisible_in_label(value: str) -> str | None:
    """A label's first character no reader sees (a control, a format character such
    as a zero-width space or a bidi mark, a line or paragraph separator) as
    ``U+XXXX``, or None. Labels are compared, not read: "gpu\u200b" looks like "gpu"
    on the board and never matches an agent's "gpu", and a label of one such
    character is an empty pill. Tasks' and agents' labels follow this one rule."""
    for char in value:
        if char != _ZERO_WIDTH_JOINER and unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            return f"U+{ord(char):04X}"
    return None


def check_storable(value: Any, field: str) -> Any:
    """``value`` if every string in it (keys too) is storable text, every number is
    finite and it nests at most :data:`JSON_DEPTH_MAX` deep; else ValidationFailed
    naming the path (``metadata.notes[2]``). Iterative: no recursion to exhaust."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            problem = unstorable_text(item)
            if problem:
                raise ValidationFailed(path, problem)
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                raise ValidationFailed(path, "must be a finite number")
        elif isinstance(item, dict | list):
            if depth >= JSON_DEPTH_MAX:
                raise ValidationFailed(path, f"nests deeper than {JSON_DEPTH_MAX} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    name = str(key)
                    problem = unstorable_text(name)
                    if problem:
                        raise ValidationFailed(path, f"a key {problem}")
                    stack.append((child, f"{path}.{name}", depth + 1))
            else:
                for index, child in enumerate(item):
                    stack.append((child, f"{path}[{index}]", depth + 1))
    return value


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
    problem = unstorable_text(value)
    if problem:
        raise ValidationFailed(field, problem)
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
    return check_storable(value, field)


def is_command_argv(value: Any) -> TypeGuard[list[str]]:
    """A ``command`` agent's ``settings.argv``: the program and its arguments (no shell),
    a non-empty list of strings. The registry checks it when an agent is saved, the
    executor again before a run (a row saved before that check, or by another path)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def unknown_keys(given: Iterable[str], allowed: Iterable[str], where: str) -> None:
    extra = sorted(set(given) - set(allowed))
    if extra:
        raise ValidationFailed(extra[0], f"unknown field in {where}")
