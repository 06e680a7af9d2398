"""One rule for query strings under /api/: an operation takes the query parameters
its OpenAPI schema declares, and no other.

The table is the schema itself (drf-spectacular reads each view's ``extend_schema``
parameters, its paginator's and its path's), so declaring a filter is what admits
it and a filter nobody declared cannot be half-there. A name the operation does not
declare is ``400 validation_error`` naming it and listing the ones it takes: a
misspelt or unsupported filter (``GET /api/agents?teem=x``) must not answer an
unfiltered list that reads as filtered. Every parameter takes one value, so one given
twice (``?team=a&team=b``) is refused too: the view would read only the last, and
the answer would read as filtered by both. ``format`` is DRF's renderer override, which
every view takes (``core.api.renderers.ContentNegotiation`` refuses a bad one).
A path the schema does not describe (the schema's own view) is left to its view.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from core.errors import ValidationFailed

EVERYWHERE = frozenset({"format"})
_NAME_SHOWN = 60
# One build at a time: the board's first load sends its first requests at once, each in
# its own thread (ASGI), and drf-spectacular's first look at an extension for a package
# that is not installed (django-oauth-toolkit's) is not safe across threads: the
# threads that lost the race answered 500 ("Could not load the board").
_BUILDING = threading.RLock()


def building_schema() -> threading.RLock:
    """Held by whoever runs drf-spectacular's generator in this process: this table's
    build and the ``/api/schema/`` view (:class:`core.api.schema.SchemaView`)."""
    return _BUILDING


def declared() -> dict[str, frozenset[str]]:
    """``"GET /api/agents"`` → the query parameters the schema declares for it.

    Built once per process from the same generator ``/api/schema/`` serves (well
    under a second); the urlconf it walks is fixed for the life of the process."""
    with _BUILDING:
        return _table()


@functools.cache
def _table() -> dict[str, frozenset[str]]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    table: dict[str, frozenset[str]] = {}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            names = (p["name"] for p in operation.get("parameters", ()) if p.get("in") == "query")
            table[f"{method.upper()} {path}"] = frozenset(names)
    return table


def check_declared(method: str, path: str, names: Any) -> None:
    """Refuse a query parameter the operation ``method path`` (the schema's path,
    ``/api/agents/{agent_id}``) does not declare. ``HEAD`` is its ``GET``."""
    wanted = [str(name) for name in names if name not in EVERYWHERE]
    if not wanted:
        return
    key = f"{'GET' if method == 'HEAD' else method} {path}"
    allowed = declared().get(key)
    if allowed is None:
        return
    for name in wanted:
        if hasattr(names, "getlist") and len(names.getlist(name)) > 1:
            raise ValidationFailed(
                re.sub(r"\s", " ", name)[:_NAME_SHOWN], "is given more than once: give it once"
            )
        if name not in allowed:
            takes = ", ".join(sorted(allowed)) or "none"
            shown = re.sub(r"\s", " ", name)[:_NAME_SHOWN]
            raise ValidationFailed(
                shown,
                f"is not a query parameter of {key} (it takes: {takes})",
                allowed=sorted(allowed),
            )
