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
            raise ParseError("JSON parse error - nested too deeply") from None
        except ValueError as exc:  # includes UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None
        if isinstance(data, dict):  # name the field as the client sent it
            check_storable(list(data), "body")
            for key, value in data.items():
                check_storable(value, str(key))
            return data
        return check_storable(data, "body")
