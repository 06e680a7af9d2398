"""The API's one permission check: a signed-in caller, and for every write the
roles table (:mod:`core.roles`) read before the view runs, so before the body is
read and before anything is written. DRF runs it from ``APIView.initial``; it is
the project's default, and a view that asks for more (staff) lists it first."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from core import roles

_CONVERTER = re.compile(r"<(?:[^>:]+:)?([^>]+)>")


def operation(request: Any) -> str:
    """``"POST /api/board/tasks/{task_id}/approve"``: the request's method and the
    OpenAPI path of the route it matched (the table's key)."""
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", "") or ""
    path = _CONVERTER.sub(r"{\1}", route)
    return f"{request.method} /{path}"


def principal(request: Any) -> roles.Principal:
    return roles.principal_of(getattr(request, "user", None), getattr(request, "auth", None))


class RoleTable(BasePermission):
    """Signed in; a write (any method but GET/HEAD/OPTIONS) only as the table says."""

    def has_permission(self, request: Any, view: Any) -> bool:
        user = getattr(request, "user", None)
        if not (user and user.is_authenticated):
            # DRF answers 401 (the token class names the realm), unless the table
            # opens the operation to anonymous callers (the login exchange).
            row = roles.TABLE.get(operation(request))
            return row is not None and "anonymous" in row.admits
        if request.method in SAFE_METHODS or not hasattr(view, request.method.lower()):
            return True  # a read; or a method the view lacks, which DRF answers 405
        roles.check(principal(request), operation(request), body=lambda: request.data)
        return True
