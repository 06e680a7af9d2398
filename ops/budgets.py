"""Budgets over the API: which team a scope belongs to, and the REST views.

Budgets are an operator's: staff write them; a member reads their own teams'
budgets (a write is 403); another team's budget, or a scope in another team,
answers exactly as one that does not exist. The figures and the pause live in
:mod:`board.store.spend` (the claim reads them); this module only resolves a
scope (team, agent, routine, task tree) to the team that owns it, which needs the
registry and the routines, above the board.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from board.models import BUDGET_STATUSES, Budget, BudgetMode, BudgetScope, BudgetWindow
from board.store import now, spend
from core import roles
from core.api.access import can_see_team, team_ids
from core.api.bodies import json_object
from core.api.permissions import RoleTable, StaffWrites
from core.api.schema import with_errors
from core.checks import check_choice
from core.errors import ValidationFailed
from ops.budget_scopes import scope_team


def visible_scope_team(user: Any, scope: Any, scope_id: Any) -> str:
    """The scope's team, if the user may see it; else 400 naming ``scope_id``."""
    check_choice(scope, "scope", BudgetScope.values)
    team = scope_team(scope, scope_id)
    if team is not None and not can_see_team(user, team):
        roles.refuse_withheld(user, f"{scope} {scope_id!r}")
    if team is None or not can_see_team(user, team):
        raise ValidationFailed("scope_id", f"no {scope} {scope_id!r}")
    return team


WRITTEN_BY_STAFF = "budgets are written by staff; members read their own teams'"
# A member who meets a paused cap (the board, the Usage page, `clawboo budget resume`)
# is told who may lift it and what else ends the pause.
RESUMED_BY_STAFF = (
    "a budget is resumed by staff with the permission to change budgets:"
    " ask one, or wait for its next window"
)


def visible_budget(user: Any, budget_id: Any) -> Budget:
    return spend.get_budget(budget_id, team_ids(user))


class BudgetView(APIView):
    """The budget views' base: what their writes are refused with (core.api.permissions.
    StaffWrites): staff only, checked before the body is read, after the budget the
    path names (another team's answers as a missing one)."""

    permission_classes = [RoleTable, StaffWrites]
    staff_writes = "a budget"
    staff_refusal = WRITTEN_BY_STAFF

    def written_row(self, request: Request, budget_id: str) -> Budget:
        return visible_budget(request.user, budget_id)


RESUME_BUDGET = "POST /api/budgets/{budget_id}/resume"


def may_resume_budgets(request: Request) -> bool:
    """For a read (the board's spend chips): whether :class:`BudgetView` would admit
    this caller for a resume, asked as the resume is (staff's powers bound for
    :data:`RESUME_BUDGET`, then unbound as a read leaves them). The agent side never
    governs a budget (GOVERNANCE §6), whoever its key's owner is."""
    user = request.user
    if roles.principal_of(user, getattr(request, "auth", None)).agent_side:
        return False
    roles.bind_staff_power(user, RESUME_BUDGET)
    try:
        return roles.staff_power(user)
    finally:
        roles.bind_staff_power(user, None)


def read_body(budget: Budget, may_resume: bool) -> dict[str, Any]:
    return {**budget.as_dict(now()), "may_resume": may_resume}


class BudgetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    team = serializers.CharField()
    scope = serializers.ChoiceField(choices=BudgetScope.values)
    scope_id = serializers.CharField()
    window = serializers.ChoiceField(choices=BudgetWindow.values)
    limit_cents = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=BudgetMode.values)
    spent_cents = serializers.IntegerField()
    status = serializers.ChoiceField(choices=BUDGET_STATUSES)
    window_start = serializers.DateTimeField()
    pause_at_cents = serializers.IntegerField(
        allow_null=True, help_text="after a resume: the spend at which the cap pauses again"
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class BudgetReadSerializer(BudgetSerializer):
    may_resume = serializers.BooleanField(
        help_text="whether you may resume it (and write budgets): staff holding the "
        "budget change permission, the rule POST /api/budgets/{id}/resume holds to; "
        "a member and the agent side never"
    )


BudgetCreateBody = inline_serializer(
    "BudgetCreate",
    {
        "scope": serializers.ChoiceField(choices=BudgetScope.values),
        "scope_id": serializers.CharField(),
        "window": serializers.ChoiceField(choices=BudgetWindow.values),
        "limit_cents": serializers.IntegerField(min_value=1),
        "mode": serializers.ChoiceField(choices=BudgetMode.values, required=False),
    },
)
BudgetUpdateBody = inline_serializer(
    "BudgetUpdate",
    {
        "scope": serializers.ChoiceField(choices=BudgetScope.values, required=False),
        "scope_id": serializers.CharField(required=False),
        "window": serializers.ChoiceField(choices=BudgetWindow.values, required=False),
        "limit_cents": serializers.IntegerField(min_value=1, required=False),
        "mode": serializers.ChoiceField(choices=BudgetMode.values, required=False),
    },
)
BudgetResumeBody = inline_serializer(
    "BudgetResume",
    {"grace_cents": serializers.IntegerField(min_value=1, required=False)},
)


class BudgetListView(BudgetView):
    @extend_schema(
        operation_id="budgets_list",
        parameters=[
            OpenApiParameter("team", str, required=False),
            OpenApiParameter("scope", str, required=False),
            OpenApiParameter("scope_id", str, required=False),
        ],
        responses=with_errors({200: BudgetReadSerializer(many=True)}, "validation_error"),
    )
    def get(self, request: Request) -> Response:
        filters = {
            name: request.query_params[name]
            for name in ("scope", "scope_id")
            if request.query_params.get(name)
        }
        team = request.query_params.get("team")
        if team:
            filters["team_id"] = team
        budgets = spend.list_budgets(team_ids(request.user), **filters)
        may_resume = may_resume_budgets(request)
        return Response([read_body(b, may_resume) for b in budgets])

    @extend_schema(
        operation_id="budgets_create",
        request=BudgetCreateBody,
        responses=with_errors({201: BudgetSerializer}, "validation_error", "forbidden"),
    )
    def post(self, request: Request) -> Response:
        body = json_object(request, BudgetCreateBody)
        team = visible_scope_team(request.user, body["scope"], body["scope_id"])
        budget = spend.create_budget(team, body)
        return Response(budget.as_dict(now()), status=201)


class BudgetDetailView(BudgetView):
    @extend_schema(
        operation_id="budgets_read",
        responses=with_errors({200: BudgetReadSerializer}, "not_found"),
    )
    def get(self, request: Request, budget_id: str) -> Response:
        budget = visible_budget(request.user, budget_id)
        return Response(read_body(budget, may_resume_budgets(request)))

    @extend_schema(
        operation_id="budgets_update",
        request=BudgetUpdateBody,
        responses=with_errors(
            {200: BudgetSerializer}, "validation_error", "forbidden", "not_found"
        ),
    )
    def patch(self, request: Request, budget_id: str) -> Response:
        budget = visible_budget(request.user, budget_id)
        body = json_object(request, BudgetUpdateBody)
        team = None
        if "scope" in body or "scope_id" in body:
            team = visible_scope_team(
                request.user, body.get("scope", budget.scope), body.get("scope_id", budget.scope_id)
            )
        updated = spend.update_budget(budget.pk, body, team)
        return Response(updated.as_dict(now()))

    @extend_schema(
        operation_id="budgets_delete",
        responses=with_errors({204: None}, "forbidden", "not_found"),
    )
    def delete(self, request: Request, budget_id: str) -> Response:
        budget = visible_budget(request.user, budget_id)
        spend.delete_budget(budget.pk)
        return Response(status=204)


class BudgetResumeView(BudgetView):
    staff_refusal = RESUMED_BY_STAFF

    @extend_schema(
        operation_id="budgets_resume",
        request=BudgetResumeBody,
        responses=with_errors(
            {200: BudgetSerializer}, "validation_error", "forbidden", "not_found"
        ),
    )
    def post(self, request: Request, budget_id: str) -> Response:
        budget = visible_budget(request.user, budget_id)
        body = json_object(request, BudgetResumeBody)
        resumed = spend.resume_budget(budget.pk, body.get("grace_cents"))
        return Response(resumed.as_dict(now()))
