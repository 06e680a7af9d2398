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
from core.errors import Forbidden

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


class StaffWrites(BasePermission):
    """Writes only staff make, on rows members read (budgets, repositories): a person
    without staff's powers for this write (core.roles.staff_power) is refused here, in
    ``APIView.initial`` -- after the roles table (list it after :class:`RoleTable`)
    and before the handler reads the body -- so a caller who may not write meets the
    same 403 whatever it sent, and learns nothing of what a body should be.

    The view says what it refuses with: ``staff_refusal`` (the detail) and
    ``staff_writes`` (what, for a staff person the permission is withheld from); and
    ``written_row(request, **path)``, the row the path names, looked up first so one
    the caller cannot see answers 404 exactly as a missing one."""

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS or not hasattr(view, request.method.lower()):
            return True
        find = getattr(view, "written_row", None)
        if find is not None and view.kwargs:
            find(request, **view.kwargs)
        user = getattr(request, "user", None)
        if not roles.staff_power(user):
            roles.refuse_withheld(user, view.staff_writes)
            raise Forbidden(view.staff_refusal)
        return True


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
            match = getattr(request, "resolver_match", None)
            task = (getattr(match, "kwargs", None) or {}).get("task_id")
            row = roles.TABLE.get(verb)
            if row is not None and who.kind in row.admits:
                # A run's credential on a task not its run's is refused for the path,
                # before the body is read to name a people verb: whatever it sent.
                roles.check_run_scope(who, verb, run_task(request.auth), task)
            roles.check(who, verb, body=lambda: request.data)
            roles.bind_staff_power(user, verb if who.kind == "person" else None)
        check_declared(request.method, _path(request), request.query_params)
        return True
