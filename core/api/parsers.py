"""The API's JSON parser: a body is refused (400, naming the field) before any view
sees it when it holds what neither database can store — NUL, lone surrogates,
non-finite numbers (``NaN``, ``1e400``) — or nests deeper than the bound."""

from __future__ import annotations

import codecs
import json
import math
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.checks import check_storable


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


# What :mod:`json` says, in words a person reads (its message's start -> ours); a
# message not listed is shown as json wrote it.
JSON_WORDS: tuple[tuple[str, str], ...] = (
    ("Expecting value", "expected a value"),
    ("Expecting property name enclosed in double quotes", "expected a name in double quotes"),
    ("Expecting ',' delimiter", "expected a comma"),
    ("Expecting ':' delimiter", "expected a colon"),
    ("Extra data", "unexpected text after the end of the JSON"),
    ("Unterminated string", "a string is not closed"),
    ("Invalid control character", "a control character inside a string"),
    ("Invalid \\escape", "an unknown backslash escape"),
    ("Invalid \\uXXXX escape", "an unknown \\u escape"),
    ("Illegal trailing comma", "a comma before the closing bracket"),
)
NOT_JSON = "The request body is not valid JSON"


def not_json(exc: ValueError) -> str:
    """The refusal's words for a body :func:`loads` could not read."""
    if isinstance(exc, json.JSONDecodeError):
        words = next((ours for theirs, ours in JSON_WORDS if exc.msg.startswith(theirs)), exc.msg)
        return f"{NOT_JSON}: {words} at line {exc.lineno}, column {exc.colno}."
    if isinstance(exc, UnicodeDecodeError):
        return f"{NOT_JSON}: it is not UTF-8 text (byte {exc.start + 1} is not)."
    return f"{NOT_JSON}: {exc}."


def loads(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, no number that overflows a float."""
    return json.loads(text, parse_constant=_constant, parse_float=_finite)


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = loads(text)
        except RecursionError:
            raise ParseError(f"{NOT_JSON}: it nests too deeply.") from None
        except ValueError as exc:  # includes UnicodeDecodeError
            raise ParseError(not_json(exc)) from None
        if isinstance(data, dict):  # name the field as the client sent it
            check_storable(list(data), "body")
            for key, value in data.items():
                check_storable(value, str(key))
            return data
        return check_storable(data, "body")
