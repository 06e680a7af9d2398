"""REST views of the board (``/api/board/…``). Each view reads its body, checks team
access and calls :mod:`board.store`; errors map to HTTP in ``core.api.errors``."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from board import checks, store
from board.access import audited_override, scope_tasks, visible_task
from board.models import Task
from board.serializers import (
    ClaimedSerializer,
    CommentSerializer,
    ExecutionSerializer,
    OutcomeSerializer,
    OverrideSerializer,
    TaskCreateSerializer,
    TaskPatchSerializer,
    TaskSerializer,
)
from board.store.ready import status_filter
from board.transitions import Status, is_terminal
from core import events, server_commands
from core.api.access import act_as, act_as_assignee, can_see_team, require_team, team_ids
from core.api.bodies import json_object, query_bool, query_int
from core.api.idempotency import idempotent
from core.api.pagination import RecentTaskCursorPagination, TaskCursorPagination
from core.api.registry_views import AgentSerializer, agent_body
from core.api.schema import with_errors
from core.errors import Conflict, NotFound, ValidationFailed

# --- rendering -------------------------------------------------------------------


def task_body(task: Task) -> dict[str, Any]:
    return task.as_dict(depends_on=store.depends_on_ids(task.id))


def task_bodies(tasks: list[Task]) -> list[dict[str, Any]]:
    deps = store.depends_on_map([t.id for t in tasks])
    return [t.as_dict(depends_on=deps[t.id]) for t in tasks]


def outcome_body(outcome: store.WriteOutcome) -> dict[str, Any]:
    assert outcome.task is not None
    return {**outcome.as_dict(), "task": task_body(outcome.task)}


def _visible_ref(request: Request, task_id: Any, field: str) -> None:
    """A task named in a body: one the caller cannot see is refused exactly like
    one that does not exist (the data layer's own 400 for an unknown id)."""
    if isinstance(task_id, str):
        task = store.find_task(task_id) if checks.ID_PATTERN.match(task_id) else None
        if task is not None and not can_see_team(request.user, task.team_id):
            raise ValidationFailed(field, f"no task {task_id!r}")


_COMMON_TASK_ERRORS = ("not_found",)


# --- views -----------------------------------------------------------------------


# The filters the task list and the column counts share (query parameters).
_FILTER_PARAMETERS = [
    OpenApiParameter("team", str),
    OpenApiParameter("assignee", str),
    OpenApiParameter("label", str),
    OpenApiParameter("parent", str),
    OpenApiParameter(
        "verdict",
        str,
        enum=list(store.VERDICT_FILTERS),
        description="a stored verification verdict, or 'none' for unverified tasks",
    ),
    OpenApiParameter(
        "q", str, description="text in the title or description (any case), or the exact id"
    ),
    OpenApiParameter("dropped", bool, description="false: leave soft-deleted tasks out"),
]
ORDERS = ("priority", "recent")
# Cards in a column's first page: the live columns are work in hand, the terminal
# ones (done, cancelled) history, where the most recent few are what people want.
COLUMN_PAGE = 50
TERMINAL_PAGE = 25


def _task_filters(request: Request) -> dict[str, Any]:
    params = request.query_params
    dropped = params.get("dropped")
    return {
        "team": params.get("team"),
        "assignee": params.get("assignee"),
        "label": params.get("label"),
        "parent": params.get("parent"),
        "verdict": params.get("verdict"),
        "text": params.get("q"),
        "dropped": None if dropped is None else query_bool(dropped, "dropped"),
    }


class TaskListView(APIView):
    permission_classes = [IsAuthenticated]
    pagination_class = TaskCursorPagination

    @extend_schema(
        operation_id="board_tasks_list",
        parameters=[
            OpenApiParameter("status", str, enum=list(Status.values)),
            *_FILTER_PARAMETERS,
            OpenApiParameter("ready", bool),
            OpenApiParameter(
                "order",
                str,
                enum=list(ORDERS),
                description="priority (default): priority desc, then newest created; "
                "recent: most recently changed first (the board's done and cancelled "
                "columns)",
            ),
            OpenApiParameter("limit", int),
            OpenApiParameter("cursor", str),
        ],
        responses=with_errors({200: TaskSerializer(many=True)}, "validation_error"),
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        order = params.get("order", "priority")
        if order not in ORDERS:
            raise ValidationFailed("order", f"must be one of {', '.join(ORDERS)}")
        qs: QuerySet[Task] = store.list_tasks(
            status=params.get("status"),
            ready=query_bool(params.get("ready"), "ready"),
            **_task_filters(request),
        )
        qs = scope_tasks(request.user, qs)
        paginator = RecentTaskCursorPagination() if order == "recent" else self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(task_bodies(list(page or [])))

    @extend_schema(
        operation_id="board_tasks_create",
        request=TaskCreateSerializer,
        responses=with_errors(
            {201: TaskSerializer, 200: TaskSerializer},
            "validation_error",
            "forbidden",
            "conflict",
            "depth_exceeded",
            "too_many_children",
        ),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, TaskCreateSerializer().fields, required=("title",))
        require_team(request.user, body.get("team", "default"))
        if body.get("created_by_agent_id") is not None:
            act_as(request, body["created_by_agent_id"], "created_by_agent_id")
        _visible_ref(request, body.get("parent_task_id"), "parent_task_id")
        deps = body.get("depends_on")
        for dep in deps if isinstance(deps, list) else ():
            _visible_ref(request, dep, "depends_on")
        server_commands.check_task_commands(
            body.get("metadata"), operator=server_commands.is_operator(request.user)
        )
        result = store.create_task(**body, actor=request.user.get_username())
        return Response(task_body(result.task), status=201 if result.created else 200)


class TaskCountsView(APIView):
    """How many tasks each column holds, with the list's filters: the board's column
    headers, without reading the tasks."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_counts",
        parameters=_FILTER_PARAMETERS,
        responses=with_errors(
            {
                200: inline_serializer(
                    "TaskCounts",
                    {
                        "team": serializers.CharField(allow_null=True),
                        "counts": serializers.DictField(
                            child=serializers.IntegerField(),
                            help_text="every status, zeros included",
                        ),
                        "total": serializers.IntegerField(),
                    },
                )
            },
            "validation_error",
        ),
    )
    def get(self, request: Request) -> Response:
        filters = _task_filters(request)
        counts = store.count_by_status(scope_tasks(request.user, store.list_tasks(**filters)))
        return Response({"team": filters["team"], "counts": counts, "total": sum(counts.values())})


class BoardColumnsView(APIView):
    """The board's first view in one request: each column's first page in that
    column's order (live columns by priority, terminal ones most recently changed
    first), every column's total, and the event sequence they are as of. What it
    costs depends on the page sizes, not on how much history the team has."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_columns",
        parameters=[
            *_FILTER_PARAMETERS,
            OpenApiParameter("limit", int, description=f"cards per live column ({COLUMN_PAGE})"),
            OpenApiParameter(
                "terminal_limit",
                int,
                description=f"cards in done and in cancelled ({TERMINAL_PAGE}), newest first",
            ),
            OpenApiParameter(
                "counts",
                bool,
                description="false: leave the totals out (null), to ask /api/board/counts "
                "alongside; counting reads every row of the team, the pages do not",
            ),
        ],
        responses=with_errors(
            {
                200: inline_serializer(
                    "BoardColumns",
                    {
                        "team": serializers.CharField(allow_null=True),
                        "seq": serializers.IntegerField(
                            allow_null=True,
                            help_text="the team's event sequence read before the columns: "
                            "replay from here (websocket 'since') to miss nothing",
                        ),
                        "counts": serializers.DictField(
                            child=serializers.IntegerField(), allow_null=True
                        ),
                        "total": serializers.IntegerField(allow_null=True),
                        "columns": serializers.DictField(
                            child=inline_serializer(
                                "BoardColumn",
                                {
                                    "results": TaskSerializer(many=True),
                                    "next": serializers.URLField(allow_null=True),
                                },
                            ),
                            help_text="by status: the first page and the list URL of the next",
                        ),
                    },
                )
            },
            "validation_error",
        ),
    )
    def get(self, request: Request) -> Response:
        filters = _task_filters(request)
        params = request.query_params
        high = TaskCursorPagination.max_page_size
        sizes = {
            False: query_int(params.get("limit"), "limit", default=COLUMN_PAGE, low=1, high=high),
            True: query_int(
                params.get("terminal_limit"),
                "terminal_limit",
                default=TERMINAL_PAGE,
                low=1,
                high=high,
            ),
        }
        team = filters["team"]
        # First the head of the log: whatever commits after it arrives by replay.
        seq = events.latest_seq(team) if team and can_see_team(request.user, team) else None
        visible = scope_tasks(request.user, store.list_tasks(**filters))
        counted = params.get("counts") is None or query_bool(params.get("counts"), "counts")
        counts = store.count_by_status(visible) if counted else None
        own = ("limit", "terminal_limit", "cursor", "counts")
        query = {k: v for k, v in params.items() if k not in own}
        list_url = request.build_absolute_uri(reverse("tasks"))
        pages: dict[str, tuple[list[Task], str | None]] = {}
        for status in Status:
            terminal = is_terminal(status)
            pager = RecentTaskCursorPagination() if terminal else TaskCursorPagination()
            size = sizes[terminal]
            column_query = {**query, "status": status.value, "limit": size}
            if terminal:
                column_query["order"] = "recent"
            rows = pager.first_page(
                visible.filter(status_filter(status)),
                request,
                size,
                f"{list_url}?{urlencode(column_query)}",
            )
            pages[status.value] = (rows, pager.get_next_link())
        bodies = iter(task_bodies([t for rows, _ in pages.values() for t in rows]))
        columns = {
            status: {"results": [next(bodies) for _ in rows], "next": link}
            for status, (rows, link) in pages.items()
        }
        return Response(
            {
                "team": team,
                "seq": seq,
                "counts": counts,
                "total": None if counts is None else sum(counts.values()),
                "columns": columns,
            }
        )


class TaskDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_retrieve",
        responses=with_errors({200: TaskSerializer}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        return Response(task_body(visible_task(request.user, task_id)))

    @extend_schema(
        operation_id="board_tasks_update",
        request=TaskPatchSerializer,
        responses=with_errors(
            {200: TaskSerializer}, "not_found", "validation_error", "forbidden", "conflict"
        ),
    )
    def patch(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, TaskPatchSerializer().fields)
        if body.get("assignee_agent_id") is not None:
            act_as(request, body["assignee_agent_id"], "assignee_agent_id")
        server_commands.check_task_commands(
            body.get("metadata"), operator=server_commands.is_operator(request.user)
        )
        return Response(task_body(store.update_task(task_id, body)))


class TransitionView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_transition",
        request=inline_serializer(
            "Transition",
            {
                "to": serializers.ChoiceField(choices=Status.choices),
                "human_override": OverrideSerializer,
                "agent_id": serializers.CharField(
                    required=False,
                    help_text="Into in_progress only, and required there: the agent the "
                    "move claims the task for (its executor picks the claim up).",
                ),
                "lease_ms": serializers.IntegerField(required=False, min_value=1000),
            },
        ),
        responses=with_errors(
            {200: TaskSerializer},
            "not_found",
            "validation_error",
            "illegal_transition",
            "claim_required",
            "conflict",
            "verification_required",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(
            request, ("to", "human_override", "agent_id", "lease_ms"), required=("to",)
        )
        agent = body.get("agent_id")
        task = store.transition(
            task_id,
            body["to"],
            human_override=audited_override(request, body.get("human_override")),
            agent_id=None if agent is None else act_as(request, agent),
            lease_ms=body.get("lease_ms"),
            actor=request.user.get_username(),
        )
        return Response(task_body(task))


class ClaimView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_claim",
        request=inline_serializer(
            "Claim",
            {
                "agent_id": serializers.CharField(),
                "runtime": serializers.CharField(required=False),
                "lease_ms": serializers.IntegerField(required=False, min_value=1000),
            },
        ),
        responses=with_errors(
            {200: ClaimedSerializer},
            "not_found",
            "agent_paused",
            "not_routed",
            "limit_reached",
            "conflict",
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ("agent_id", "runtime", "lease_ms"), required=("agent_id",))
        agent = act_as(request, body["agent_id"])
        result = store.claim(task_id, agent, body.get("runtime"), lease_ms=body.get("lease_ms"))
        result.raise_for_outcome(task_id)
        assert result.task is not None
        return Response({"task": task_body(result.task), "ticket": result.ticket})


class ClaimNextView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_claim_next",
        request=inline_serializer(
            "ClaimNext",
            {
                "agent_id": serializers.CharField(),
                "runtime": serializers.CharField(required=False),
                "dispatcher": serializers.ChoiceField(
                    choices=["topological", "priority", "fifo"], required=False
                ),
                "label": serializers.CharField(required=False),
                "team": serializers.CharField(required=False),
                "lease_ms": serializers.IntegerField(required=False, min_value=1000),
            },
        ),
        responses=with_errors(
            {200: ClaimedSerializer, 204: None}, "agent_paused", "validation_error", "forbidden"
        ),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(
            request,
            ("agent_id", "runtime", "dispatcher", "label", "team", "lease_ms"),
            required=("agent_id",),
        )
        agent = act_as(request, body["agent_id"])
        team: str | list[str] | None
        if body.get("team") is not None:
            team = require_team(request.user, body["team"])
        else:
            team = team_ids(request.user)
        result = store.claim_next(
            agent,
            runtime=body.get("runtime"),
            dispatcher=body.get("dispatcher", "topological"),
            team=team,
            label=body.get("label"),
            lease_ms=body.get("lease_ms"),
        )
        if result is None:
            return Response(status=204)
        result.raise_for_outcome("")
        assert result.task is not None
        return Response({"task": task_body(result.task), "ticket": result.ticket})


def _raise_declined(outcome: store.WriteOutcome) -> None:
    if outcome.declined:
        raise Conflict(
            f"declined: {outcome.reason} (task is {outcome.status})",
            reason=outcome.reason,
            status=outcome.status,
        )


class HeartbeatView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_heartbeat",
        request=inline_serializer("Heartbeat", {"ticket": serializers.CharField()}),
        responses=with_errors(
            {200: inline_serializer("Lease", {"lease_until": serializers.DateTimeField()})},
            "not_found",
            "conflict",
            "validation_error",
            "forbidden",
        ),
    )
    def post(self, request: Request, task_id: str) -> Response:
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, ("ticket", "lease_ms"), required=("ticket",))
        outcome = store.renew_lease(task_id, body["ticket"], lease_ms=body.get("lease_ms"))
        _raise_declined(outcome)
        assert outcome.task is not None and outcome.task.lease_until is not None
        return Response({"lease_until": outcome.task.lease_until.isoformat()})


class ReleaseView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_release",
        request=inline_serializer("Release", {"ticket": serializers.CharField(required=False)}),
        responses=with_errors(
            {200: TaskSerializer},
            "not_found",
            "conflict",
            "illegal_transition",
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, ("ticket",))
        outcome = store.release(task_id, ticket=body.get("ticket"))
        _raise_declined(outcome)
        assert outcome.task is not None
        return Response(task_body(outcome.task))


_SETTLE_FIELDS = ("ticket", "if_allowed", "refuse_when_parked")


class CompleteView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_complete",
        request=inline_serializer(
            "Complete",
            {
                "output": serializers.JSONField(required=False),
                "ticket": serializers.CharField(required=False),
                "if_allowed": serializers.BooleanField(required=False),
                "refuse_when_parked": serializers.BooleanField(required=False),
                "human_override": OverrideSerializer,
            },
        ),
        responses=with_errors(
            {200: OutcomeSerializer},
            "not_found",
            "illegal_transition",
            "verification_required",
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, ("output", "human_override", *_SETTLE_FIELDS))
        outcome = store.complete(
            task_id,
            body.get("output"),
            ticket=body.get("ticket"),
            if_allowed=body.get("if_allowed", False),
            refuse_when_parked=body.get("refuse_when_parked", False),
            human_override=audited_override(request, body.get("human_override")),
        )
        return Response(outcome_body(outcome))


class FailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_fail",
        request=inline_serializer(
            "Fail",
            {
                "error": serializers.CharField(),
                "ticket": serializers.CharField(required=False),
                "if_allowed": serializers.BooleanField(required=False),
                "refuse_when_parked": serializers.BooleanField(required=False),
            },
        ),
        responses=with_errors(
            {200: OutcomeSerializer},
            "not_found",
            "illegal_transition",
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, ("error", *_SETTLE_FIELDS), required=("error",))
        outcome = store.fail(
            task_id,
            body["error"],
            ticket=body.get("ticket"),
            if_allowed=body.get("if_allowed", False),
            refuse_when_parked=body.get("refuse_when_parked", False),
        )
        return Response(outcome_body(outcome))


class VerdictView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_verdict",
        request=inline_serializer(
            "VerdictBody",
            {
                "verdict": serializers.ChoiceField(choices=["pass", "fail", "completed_with_debt"]),
                "evidence": serializers.CharField(required=False),
            },
        ),
        responses=with_errors({200: TaskSerializer}, "not_found", "validation_error", "conflict"),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ("verdict", "evidence"), required=("verdict",))
        return Response(
            task_body(store.set_verdict(task_id, body["verdict"], body.get("evidence")))
        )


class DepsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_deps_create",
        request=inline_serializer("Dependency", {"depends_on": serializers.CharField()}),
        responses=with_errors(
            {201: TaskSerializer, 200: TaskSerializer}, "not_found", "cycle", "validation_error"
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ("depends_on",), required=("depends_on",))
        dep = body["depends_on"]
        if isinstance(dep, str):
            visible_task(request.user, dep)
        created = store.link(task_id, dep)
        return Response(task_body(store.get_task(task_id)), status=201 if created else 200)


class DepDetailView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_deps_destroy", responses=with_errors({204: None}, "not_found")
    )
    def delete(self, request: Request, task_id: str, dep_id: str) -> Response:
        visible_task(request.user, task_id)
        store.unlink(task_id, dep_id)
        return Response(status=204)


class CancelDependentsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_cancel_dependents",
        request=None,
        responses=with_errors(
            {200: inline_serializer("Cancelled", {"cancelled": TaskSerializer(many=True)})},
            "not_found",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        json_object(request, ())
        return Response({"cancelled": task_bodies(store.cancel_dependents(task_id))})


class CommentsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_comments_list",
        responses=with_errors({200: CommentSerializer(many=True)}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        return Response([_comment(c) for c in store.list_comments(task_id)])

    @extend_schema(
        operation_id="board_tasks_comments_create",
        request=inline_serializer(
            "NewComment",
            {
                "body": serializers.CharField(max_length=20_000),
                "author": serializers.CharField(required=False),
            },
        ),
        responses=with_errors(
            {201: CommentSerializer}, "not_found", "validation_error", "forbidden"
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ("body", "author"), required=("body",))
        # Audit: a comment is the authenticated user's, or an agent's they may act as.
        who = request.user.get_username()
        author = body.get("author")
        if author is None or author == who:
            author = who
        else:
            act_as(request, author, "author")
        return Response(_comment(store.add_comment(task_id, body["body"], author)), status=201)


def _comment(comment: Any) -> dict[str, Any]:
    return {
        "id": comment.id,
        "task_id": comment.task_id,
        "author": comment.author,
        "body": comment.body,
        "created_at": comment.created_at.isoformat(),
    }


class ExecutionsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_executions",
        responses=with_errors({200: ExecutionSerializer(many=True)}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        return Response([e.as_dict() for e in store.list_executions(task_id)])


class ReconcileView(APIView):
    permission_classes = [IsAuthenticated, IsAdminUser]

    @extend_schema(
        operation_id="board_reconcile",
        request=inline_serializer(
            "Reconcile", {"pass": serializers.ChoiceField(choices=["orphans", "stale"])}
        ),
        responses=with_errors(
            {
                200: inline_serializer(
                    "Released", {"released": serializers.ListField(child=serializers.CharField())}
                )
            },
            "forbidden",
            "validation_error",
        ),
    )
    def post(self, request: Request) -> Response:
        body = json_object(request, ("pass",), required=("pass",))
        which = body["pass"]
        if which == "orphans":
            released = store.reconcile_orphans()
        elif which == "stale":
            released = store.release_stale()
        else:
            raise ValidationFailed("pass", "must be 'orphans' or 'stale'")
        return Response({"released": released})


# --- an agent's pause and resume (GOVERNANCE §2) ----------------------------------


def _team_agent(request: Request, agent_id: str) -> Any:
    """An agent of one of the caller's teams; anyone else's answers as unknown."""
    from core.models import Agent

    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None or not can_see_team(request.user, agent.team_id):
        raise NotFound(f"agent {agent_id!r} does not exist")
    return agent


class AgentPauseView(APIView):
    """A person pauses an agent: it claims nothing by any door until resumed, and the
    work it had claimed but not started goes back to todo."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="agents_pause",
        request=inline_serializer("AgentPause", {"reason": serializers.CharField(required=False)}),
        responses=with_errors({200: AgentSerializer}, "not_found", "validation_error"),
    )
    def post(self, request: Request, agent_id: str) -> Response:
        _team_agent(request, agent_id)
        body = json_object(request, ("reason",))
        reason = body.get("reason")
        who = request.user.get_username()
        agent, _ = store.pause_agent(agent_id, reason or f"paused by {who}", by=who)
        return Response(agent_body(agent))


class AgentResumeView(APIView):
    """A person resumes a paused agent; its breaker's count starts over."""

    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="agents_resume",
        request=inline_serializer("AgentResume", {"reason": serializers.CharField(required=False)}),
        responses=with_errors({200: AgentSerializer}, "not_found", "validation_error"),
    )
    def post(self, request: Request, agent_id: str) -> Response:
        _team_agent(request, agent_id)
        json_object(request, ("reason",))
        agent = store.resume_agent(agent_id, by=request.user.get_username())
        return Response(agent_body(agent))
