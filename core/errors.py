"""Domain refusals. Each has one ``code``; the API maps codes to HTTP in one place
(``core.api.errors``). Raising one of these inside a write means nothing was written.
"""

from __future__ import annotations

import re
from typing import Any

# A refusal quotes what it refuses ("no team 'x'"): a word of the caller's longer
# than this is shown cut, so a megabyte sent as an id is not a megabyte sent back
# (nor one logged). Ids are at most 128 characters, so none is ever cut.
WORD_SHOWN_MAX = 200
_LONG_WORD = re.compile(rf"\S{{{WORD_SHOWN_MAX + 1},}}")


def shortened(text: str) -> str:
    """``text`` with every run of non-space longer than :data:`WORD_SHOWN_MAX` cut to
    its first 100 characters and an ellipsis (a quoted value keeps its closing quote)."""
    return _LONG_WORD.sub(lambda m: f"{m.group()[:100]}…{m.group()[-1:]}", text)


class ClawbooError(Exception):
    """Base of every refusal the product explains to its caller."""

    code = "error"

    def __init__(self, detail: str, **extra: Any) -> None:
        detail = shortened(detail)
        super().__init__(detail)
        self.detail = detail
        self.extra: dict[str, Any] = {
            key: shortened(value) if isinstance(value, str) else value
            for key, value in extra.items()
        }

    def as_dict(self) -> dict[str, Any]:
        return {"error": self.code, "detail": self.detail, **self.extra}


class ValidationFailed(ClawbooError):
    """Bad input: names the offending field."""

    code = "validation_error"

    def __init__(self, field: str, detail: str, **extra: Any) -> None:
        super().__init__(f"{field}: {detail}", field=field, **extra)
        self.field = field


class NotFound(ClawbooError):
    code = "not_found"


class Conflict(ClawbooError):
    code = "conflict"


class Forbidden(ClawbooError):
    code = "forbidden"


class RateLimited(ClawbooError):
    code = "rate_limited"
