"""The API's one permission check: a signed-in caller, and for every write the
roles table (:mod:`core.roles`) read before the view runs, so before the body is
read and before anything is written; then the query string, which may name only the
parameters the operation declares (:mod:`core.api.query`). DRF runs it from
``APIView.initial``; it is the project's default, and a view that asks for more
(staff) lists it first."""

from __future__ import annotations

import re
from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from core import roles
from core.api.auth import run_task
from core.api.query import check_declared

_CONVERTER = re.compile(r"<(?:[^>:]+:)?([^>]+)>")


def _path(request: Any) -> str:
    """``/api/board/tasks/{task_id}/approve``: the OpenAPI path of the route matched."""
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", "") or ""
    return "/" + _CONVERTER.sub(r"{\1}", route)


def operation(request: Any) -> str:
    """``"POST /api/board/tasks/{task_id}/approve"``: the request's method and the
    OpenAPI path of the route it matched (the table's key)."""
    return f"{request.method} {_path(request)}"


def _admits_anonymous(method: str, path: str) -> bool:
    row = roles.TABLE.get(f"{method} {path}")
    return row is not None and "anonymous" in row.admits


def principal(request: Any) -> roles.Principal:
    return roles.principal_of(getattr(request, "user", None), getattr(request, "auth", None))


class StaffOnly(BasePermission):
    """Staff's own operations (reconcile the board, collect worktrees): a person
    holding staff's powers for this write (core.roles.staff_power: staff, with the
    model permission the roles table names). A staff person without it is refused
    naming it; anyone else meets DRF's 403."""

    def has_permission(self, request: Any, view: Any) -> bool:
        user = getattr(request, "user", None)
        roles.refuse_withheld(user, "a staff operation")
        return roles.staff_power(user)


class RoleTable(BasePermission):
    """Signed in; a write (any method but GET/HEAD/OPTIONS) only as the table says."""

    def has_permission(self, request: Any, view: Any) -> bool:
        user = getattr(request, "user", None)
        lacks = not hasattr(view, request.method.lower())
        if not (user and user.is_authenticated):
            # DRF answers 401 (the token class names the realm), unless the table
            # opens the operation to anonymous callers (the login exchange, a forge's
            # webhook). A method such a path lacks is DRF's 405, as for anyone: the
            # path is public, and so are the methods it takes.
            path = _path(request)
            if lacks:
                return any(_admits_anonymous(m, path) for m in view.allowed_methods)
            admitted = _admits_anonymous(request.method, path)
            if admitted:
                check_declared(request.method, path, request.query_params)
            return admitted
        if lacks:
            return True  # a method the view lacks, which DRF answers 405
        if request.method in SAFE_METHODS:
            roles.bind_staff_power(user, None)
            if getattr(request.auth, "principal_kind", None) == "reviewer":
                match = getattr(request, "resolver_match", None)
                task = (getattr(match, "kwargs", None) or {}).get("task_id")
                roles.check_read(principal(request), _path(request), task, run_task(request.auth))
        else:
            who, verb = principal(request), operation(request)
            roles.check(who, verb, body=lambda: request.data)
            roles.bind_staff_power(user, verb if who.kind == "person" else None)
            match = getattr(request, "resolver_match", None)
            task = (getattr(match, "kwargs", None) or {}).get("task_id")
            roles.check_run_scope(who, verb, run_task(request.auth), task)
        check_declared(request.method, _path(request), request.query_params)
        return True
