"""Domain refusals. Each has one ``code``; the API maps codes to HTTP in one place
(``core.api.errors``). Raising one of these inside a write means nothing was written.
"""

from __future__ import annotations

from typing import Any


class ClawbooError(Exception):
    """Base of every refusal the product explains to its caller."""

    code = "error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra

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
