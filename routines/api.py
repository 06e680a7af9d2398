"""REST views of routines and the unified scheduler surface (``shared/API.md``
"Routines and schedules"). Each view reads its body, checks team access and calls
:mod:`routines.store` or the :class:`~routines.schedules.ScheduleMultiplexer`;
refusals map to HTTP in ``core.api.errors`` (nothing is written on any 4xx).

Team scoping follows the board: a user sees and writes the routines of their own
teams only (another team's routine is a 404, creating in another team a 403). The
gateway's own-life cron is not team work: anyone may read it, only staff write it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import roles, server_commands
from core.api.access import act_as, can_see_team, require_team, team_ids
from core.api.bodies import OpenBody, json_object
from core.api.idempotency import idempotent
from core.api.schema import with_errors
from core.errors import Forbidden
from routines import store
from routines.errors import RoutineNotFound, ScheduleNotFound
from routines.models import CatchUp, Routine, RoutineStatus
from routines.schedules import (
    ROUTINE_SOURCE,
    ClawbooRoutineScheduleSource,
    Domain,
    Manageability,
    OpenClawGatewayCronScheduleSource,
    ScheduleMultiplexer,
)

# --- shapes (documentation) ----------------------------------------------------


class RoutineTaskTemplateSerializer(serializers.Serializer):
    title = serializers.CharField(required=False)
    description = serializers.CharField(required=False)
    kind = serializers.ChoiceField(choices=list(store.TEMPLATE_KINDS), required=False)
    priority = serializers.IntegerField(required=False)
    repository = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="id of a registered repository of the routine's team (another team's: 400)",
    )
    repo_path = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="staff: resolves to (or registers) the team's repository; anyone else: "
        "exactly a registered repository's path, else 400",
    )
    model = serializers.CharField(required=False, allow_null=True)
    max_node_cents = serializers.IntegerField(required=False, allow_null=True)
    team_task_id = serializers.CharField(
        required=False, allow_null=True, help_text="bind to an existing task (one-shot only)"
    )
    verify_cmd = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="the verify command judging each fire's change (staff, or allowlisted)",
    )
    touches = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        allow_null=True,
        help_text="repository-relative path globs each fire's task changes (its scope: "
        "no claim starts it while overlapping work of its repository is in flight)",
    )


class RoutineSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField(
        help_text="how people tell it apart: its task's title, schedule and the start "
        "of its id ('Tidy the notes · 0 9 * * * · e20e65')"
    )
    agent_id = serializers.CharField()
    team = serializers.CharField()
    cron_spec = serializers.CharField()
    timezone = serializers.CharField()
    task_template = RoutineTaskTemplateSerializer(required=False)
    bound_task_id = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=RoutineStatus.choices)
    next_run_at = serializers.DateTimeField(allow_null=True)
    next_run_at_ms = serializers.IntegerField(allow_null=True)
    last_run_at = serializers.DateTimeField(allow_null=True)
    last_run_at_ms = serializers.IntegerField(allow_null=True)
    scheduled_by = serializers.CharField()
    last_error = serializers.CharField(allow_null=True)
    catch_up = serializers.ChoiceField(choices=CatchUp.choices)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class RoutineCreateSerializer(serializers.Serializer):
    agent_id = serializers.CharField()
    team = serializers.CharField()
    cron_spec = serializers.CharField(help_text="5/6-field cron or once@<ISO-8601>")
    timezone = serializers.CharField(required=False, default="UTC")
    task_template = RoutineTaskTemplateSerializer(required=False)
    catch_up = serializers.ChoiceField(choices=CatchUp.choices, required=False)


class RoutinePatchSerializer(serializers.Serializer):
    agent_id = serializers.CharField(required=False)
    cron_spec = serializers.CharField(required=False)
    timezone = serializers.CharField(required=False)
    task_template = RoutineTaskTemplateSerializer(required=False)
    catch_up = serializers.ChoiceField(choices=CatchUp.choices, required=False)


_SCHEDULE_ROW_FIELDS: dict[str, serializers.Field] = {
    "id": serializers.CharField(help_text="<source>:<native id>"),
    "source": serializers.CharField(),
    "domain": serializers.ChoiceField(choices=list(get_args(Domain))),
    "manageability": serializers.ChoiceField(choices=list(get_args(Manageability))),
    "name": serializers.CharField(),
    "spec": serializers.CharField(),
    "timezone": serializers.CharField(allow_null=True),
    "enabled": serializers.BooleanField(),
    "status": serializers.CharField(),
    "agent_id": serializers.CharField(allow_null=True),
    "team": serializers.CharField(allow_null=True),
    "next_run_at_ms": serializers.IntegerField(allow_null=True),
    "last_run_at_ms": serializers.IntegerField(allow_null=True),
    "last_error": serializers.CharField(allow_null=True),
}
ScheduleRowSerializer = inline_serializer("ScheduleRow", _SCHEDULE_ROW_FIELDS)
SchedulesSerializer = inline_serializer(
    "Schedules",
    {
        "sources": inline_serializer(
            "ScheduleSourceStatus",
            {
                "name": serializers.CharField(),
                "domain": serializers.CharField(),
                "manageability": serializers.CharField(),
                "status": serializers.ChoiceField(choices=["ok", "degraded"]),
                "error": serializers.CharField(required=False),
            },
            many=True,
        ),
        "schedules": inline_serializer("ScheduleRow", _SCHEDULE_ROW_FIELDS, many=True),
    },
)


class SchedulePatchSerializer(OpenBody, RoutinePatchSerializer):
    """A routine's patch (or pause/resume), or the gateway's cron.update patch."""

    action = serializers.ChoiceField(choices=["pause", "resume"], required=False)


class ScheduleCreateSerializer(OpenBody, RoutinePatchSerializer):
    """'clawboo-routine': the body of a routine create (agent_id, team and cron_spec
    required); 'openclaw-gateway-cron': the gateway's cron.add params, passed through."""

    # Like TaskSerializer.context: the metaclass moves the field off the class.
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="'clawboo-routine' (body of a routine create) or "
        "'openclaw-gateway-cron' (the gateway's cron.add params)"
    )
    domain = serializers.ChoiceField(choices=list(get_args(Domain)), required=False)
    team = serializers.CharField(required=False)


class ScheduleRoutineCreateSerializer(RoutineCreateSerializer):
    """A schedules create in the routine source: a routine create, closed."""

    source = serializers.CharField()  # type: ignore[assignment]
    domain = serializers.ChoiceField(choices=list(get_args(Domain)), required=False)


_SCHEDULE_WRITE_ERRORS = (
    "validation_error",
    "forbidden",
    "observe_only",
    "not_found",
    "conflict",
    "illegal_transition",
    "ownership_conflict",
    "bound_recurring",
    "domain_violation",
    "gateway_unavailable",
)

# --- access ----------------------------------------------------------------------


def visible_routine(user: Any, routine_id: str) -> Routine:
    """The routine, or 404 when it does not exist *or* its team is not the user's."""
    routine = Routine.objects.select_related("agent").filter(pk=routine_id).first()
    if routine is None:
        raise RoutineNotFound(routine_id)
    if not can_see_team(user, routine.team_id):
        roles.refuse_withheld(user, f"routine {routine_id!r}")
        raise RoutineNotFound(routine_id)
    return routine


def schedule_multiplexer(user: Any) -> ScheduleMultiplexer:
    """The two sources as this user sees them (routines scoped to their teams)."""
    return ScheduleMultiplexer(
        [ClawbooRoutineScheduleSource(team=team_ids(user)), OpenClawGatewayCronScheduleSource()]
    )


def check_may_create(request: Any, team: Any, agent_id: Any, template: Any = None) -> None:
    """Who may create a routine: a member of its team (else 400, as if no such team)
    who may act as its agent (a routine fires as its agent: its owner or staff, 403),
    and, for a template naming a verify command, staff or an allowlisted command (the
    gate runs it on the server). The one rule for the API, the routines page and
    anything else that creates."""
    require_team(request.user, team)
    act_as(request, agent_id)
    _check_template_commands(request, template)


def _check_template_commands(request: Any, template: Any) -> None:
    server_commands.check_task_commands(template, request.user)


def staff_template_path(request: Any, team_id: str, body: dict[str, Any]) -> None:
    """A staff caller's ``task_template.repo_path`` resolves to (or registers) the
    team's repository, which the template then names; anyone else's path is the data
    layer's to judge (only a registered repository's exact path)."""
    template = body.get("task_template")
    if not isinstance(template, dict) or not server_commands.is_operator(request.user):
        return
    raw = template.get("repo_path")
    if raw is None or template.get("repository") is not None:
        return
    found = server_commands.repository_at(request.user, team_id, raw, "task_template.repo_path")
    body["task_template"] = {**template, "repository": found.id, "repo_path": found.path}


def check_may_edit(request: Any, routine_id: str, changes: dict[str, Any]) -> Routine:
    """Who may edit a routine: one who sees its team (else 404); handing it to another
    agent needs the right to act as that agent. Pause, resume and run-now need only
    the first half."""
    routine = visible_routine(request.user, routine_id)
    if "agent_id" in changes:
        act_as(request, changes["agent_id"])
    template = changes.get("task_template")
    if isinstance(template, dict) and template.get("verify_cmd") != (
        routine.task_template or {}
    ).get("verify_cmd"):
        _check_template_commands(request, template)
    return routine


def check_schedule_access(user: Any, mux: ScheduleMultiplexer, schedule_id: str) -> None:
    """Routine rows follow team scoping (404 outside it); other sources are not team
    work, so only staff write them. The one rule for the API and the routines page."""
    name, _, native = schedule_id.partition(":")
    if name == ROUTINE_SOURCE:
        visible_routine(user, native)
    elif not roles.staff_power(user):
        mux.source(name)  # unknown source → 404 before 403
        roles.refuse_withheld(user, f"schedules of source {name!r}")
        raise Forbidden(f"only staff may change schedules of source {name!r}")


# --- routine views -----------------------------------------------------------------


class RoutineListView(APIView):
    @extend_schema(
        operation_id="routines_list",
        parameters=[
            OpenApiParameter("team", str),
            OpenApiParameter("status", str, enum=list(RoutineStatus.values)),
        ],
        responses=with_errors({200: RoutineSerializer(many=True)}, "validation_error"),
    )
    def get(self, request: Request) -> Response:
        teams = team_ids(request.user)
        wanted = request.query_params.get("team")
        if wanted is not None:
            teams = [wanted] if teams is None or wanted in teams else []
        routines = store.list_routines(team=teams, status=request.query_params.get("status"))
        return Response([r.as_dict() for r in routines])

    @extend_schema(
        operation_id="routines_create",
        request=RoutineCreateSerializer,
        responses=with_errors(
            {201: RoutineSerializer},
            "validation_error",
            "bound_recurring",
            "forbidden",
            "ownership_conflict",
            "conflict",
        ),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, RoutineCreateSerializer)
        check_may_create(request, body["team"], body["agent_id"], body.get("task_template"))
        staff_template_path(request, body["team"], body)
        routine = store.create_routine(**body)
        return Response(routine.as_dict(), status=201)


class RoutineDetailView(APIView):
    @extend_schema(
        operation_id="routines_retrieve",
        responses=with_errors({200: RoutineSerializer}, "not_found"),
    )
    def get(self, request: Request, routine_id: str) -> Response:
        return Response(visible_routine(request.user, routine_id).as_dict())

    @extend_schema(
        operation_id="routines_update",
        request=RoutinePatchSerializer,
        responses=with_errors(
            {200: RoutineSerializer},
            "not_found",
            "validation_error",
            "forbidden",
            "bound_recurring",
            "conflict",
            "ownership_conflict",
        ),
    )
    def patch(self, request: Request, routine_id: str) -> Response:
        routine = visible_routine(request.user, routine_id)
        body = json_object(request, RoutinePatchSerializer)
        check_may_edit(request, routine_id, body)
        staff_template_path(request, routine.team_id, body)
        return Response(store.update_routine(routine_id, body).as_dict())

    @extend_schema(
        operation_id="routines_destroy",
        responses=with_errors({204: None}, "not_found"),
    )
    def delete(self, request: Request, routine_id: str) -> Response:
        visible_routine(request.user, routine_id)
        store.delete_routine(routine_id)
        return Response(status=204)


def _routine_action(name: str, act: Callable[[str], Routine]) -> type[APIView]:
    class RoutineActionView(APIView):
        """POST with no body: one ledger move; an illegal one is 409 ``illegal_transition``."""

        @extend_schema(
            operation_id=f"routines_{name}",
            request=None,
            responses=with_errors(
                {200: RoutineSerializer}, "not_found", "validation_error", "illegal_transition"
            ),
        )
        def post(self, request: Request, routine_id: str) -> Response:
            visible_routine(request.user, routine_id)
            json_object(request, None)
            return Response(act(routine_id).as_dict())

    RoutineActionView.__name__ = f"Routine{name.title().replace('_', '')}View"
    return RoutineActionView


RoutinePauseView = _routine_action("pause", store.pause_routine)
RoutineResumeView = _routine_action("resume", store.resume_routine)
RoutineRunNowView = _routine_action("run_now", store.run_routine_now)


# --- schedule views ----------------------------------------------------------------


class ScheduleListView(APIView):
    @extend_schema(operation_id="schedules_list", responses=with_errors({200: SchedulesSerializer}))
    def get(self, request: Request) -> Response:
        # Always 200: a down source is reported degraded inside the body.
        return Response(schedule_multiplexer(request.user).read())

    @extend_schema(
        operation_id="schedules_create",
        request=ScheduleCreateSerializer,
        responses=with_errors({201: ScheduleRowSerializer}, *_SCHEDULE_WRITE_ERRORS),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        mux = schedule_multiplexer(request.user)
        data = request.data if isinstance(request.data, dict) else None
        source_name = data.get("source") if data is not None else None
        if source_name == ROUTINE_SOURCE:
            body = json_object(request, ScheduleRoutineCreateSerializer)
            check_may_create(request, body["team"], body["agent_id"], body.get("task_template"))
            staff_template_path(request, body["team"], body)
        else:
            body = json_object(request, ScheduleCreateSerializer)
            if not isinstance(source_name, str):
                raise ScheduleNotFound(str(source_name))
            mux.source(source_name)  # unknown source → 404 before 403
            if not roles.staff_power(request.user):
                roles.refuse_withheld(request.user, f"schedules of source {source_name!r}")
                raise Forbidden(f"only staff may create schedules in source {source_name!r}")
        body.pop("source")
        return Response(mux.create(source_name, body).as_dict(), status=201)


class ScheduleDetailView(APIView):
    @extend_schema(
        operation_id="schedules_update",
        request=SchedulePatchSerializer,
        responses=with_errors({200: ScheduleRowSerializer}, *_SCHEDULE_WRITE_ERRORS),
    )
    def patch(self, request: Request, schedule_id: str) -> Response:
        mux = schedule_multiplexer(request.user)
        check_schedule_access(request.user, mux, schedule_id)
        body = json_object(request, SchedulePatchSerializer)
        if "agent_id" in body:
            act_as(request, body["agent_id"])
        return Response(mux.update(schedule_id, body).as_dict())

    @extend_schema(
        operation_id="schedules_destroy",
        responses=with_errors({204: None}, *_SCHEDULE_WRITE_ERRORS),
    )
    def delete(self, request: Request, schedule_id: str) -> Response:
        mux = schedule_multiplexer(request.user)
        check_schedule_access(request.user, mux, schedule_id)
        mux.delete(schedule_id)
        return Response(status=204)


class ScheduleRunView(APIView):
    @extend_schema(
        operation_id="schedules_run",
        request=None,
        responses=with_errors(
            {200: inline_serializer("ScheduleRun", {"id": serializers.CharField(required=False)})},
            *_SCHEDULE_WRITE_ERRORS,
        ),
    )
    def post(self, request: Request, schedule_id: str) -> Response:
        mux = schedule_multiplexer(request.user)
        check_schedule_access(request.user, mux, schedule_id)
        json_object(request, None)
        return Response(mux.run(schedule_id))
