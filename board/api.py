"""REST views of the board (``/api/board/…``). Each view reads its body, checks team
access and calls :mod:`board.store`; errors map to HTTP in ``core.api.errors``."""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from board import checks, store
from board.access import (
    agent_side_owns,
    audited_override,
    caller_agents,
    claimer,
    files_as,
    refuse_deciding_work_in_review,
    refuse_settling_its_own_run,
    refuse_unjudged_done,
    visible_task,
)
from board.models import Task, ToolApprovalState, ToolDecision, Verdict
from board.repository import run_repository
from board.runs import StepKind, StepStatus
from board.serializers import (
    ClaimedNextSerializer,
    ClaimedSerializer,
    CommentSerializer,
    ExecutionSerializer,
    OutcomeSerializer,
    OverrideSerializer,
    StepSerializer,
    TaskCreateSerializer,
    TaskPatchSerializer,
    TaskReadSerializer,
    TaskSerializer,
)
from board.store import steps as steps_store
from board.store.ready import status_filter
from board.transitions import Status, is_terminal
from core import authors, events, registry, roles, runlogs, server_commands
from core.api.access import (
    act_as,
    act_as_assignee,
    acting_name,
    can_see_team,
    govern_agent,
    require_person,
    require_team,
    scoped,
    team_ids,
    visible_agent,
)
from core.api.auth import run_task
from core.api.bodies import json_object, query_bool, query_int
from core.api.idempotency import idempotent
from core.api.pagination import RecentTaskCursorPagination, TaskCursorPagination
from core.api.permissions import RoleTable, StaffOnly, operation, principal
from core.api.registry_views import AgentSerializer, agent_body
from core.api.schema import with_errors
from core.checks import check_text
from core.errors import NotFound, ValidationFailed

# --- rendering -------------------------------------------------------------------


def task_body(task: Task) -> dict[str, Any]:
    return task.as_dict(depends_on=store.depends_on_ids(task.id))


def claimed_body(result: store.ClaimResult) -> dict[str, Any]:
    """A claim's answer: the task, its ticket, and the repository its run uses."""
    assert result.task is not None
    return {
        "task": task_body(result.task),
        "ticket": result.ticket,
        "repository": result.repository.as_body(),
    }


def task_bodies(tasks: list[Task]) -> list[dict[str, Any]]:
    deps = store.depends_on_map([t.id for t in tasks])
    return [t.as_dict(depends_on=deps[t.id]) for t in tasks]


def outcome_body(outcome: store.WriteOutcome) -> dict[str, Any]:
    assert outcome.task is not None
    return {**outcome.as_dict(), "task": task_body(outcome.task)}


def _visible_ref(request: Request, task_id: Any, field: str) -> Task | None:
    """A task named in a body, if there is one: one the caller cannot see is refused
    exactly like one that does not exist (the data layer's own 400 for an unknown id)."""
    if not isinstance(task_id, str) or not checks.ID_PATTERN.match(task_id):
        return None
    task = store.find_task(task_id)
    if task is not None and not can_see_team(request.user, task.team_id):
        roles.refuse_withheld(request.user, f"task {task_id!r}")
        raise ValidationFailed(field, f"no task {task_id!r}")
    return task


def _default_team(request: Request, parent: Task | None) -> str:
    """The team of a task filed without one: its parent's (a tree never crosses
    teams), else that of the one agent the credential acts as (its key sees no other
    team), else ``default``."""
    if parent is not None:
        return parent.team_id
    agents = caller_agents(request.auth)
    if len(agents) == 1:
        agent = registry.find_agent(next(iter(agents)))
        if agent is not None:
            return agent.team_id
    return store.DEFAULT_TEAM


def _visible_refs(request: Request, task_ids: list[str], field: str) -> None:
    """:func:`_visible_ref` for a list of ids, in one query."""
    found = store.find_tasks(task_ids)
    for task_id in task_ids:
        task = found.get(task_id)
        if task is not None and not can_see_team(request.user, task.team_id):
            raise ValidationFailed(field, f"no task {task_id!r}")


def _staff_repo_path(request: Request, body: dict[str, Any], team: Any, task: Task | None) -> None:
    """A staff caller's ``metadata.repo_path`` keeps working: it resolves to (or
    registers) the team's repository, which the task then names. Anyone else's path
    is the data layer's to judge: only a registered repository's exact path."""
    metadata = body.get("metadata")
    raw = metadata.get("repo_path") if isinstance(metadata, dict) else None
    if raw is None or "repository" in body or not server_commands.is_operator(request.user):
        return
    if task is not None and raw == (task.metadata or {}).get("repo_path"):
        return  # unchanged
    if not isinstance(team, str):
        return  # the data layer names the bad team
    body["repository"] = server_commands.repository_at(
        request.user, team, raw, "metadata.repo_path"
    ).id


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
    OpenApiParameter("routine", str, description="the id of the routine whose fires to list"),
    OpenApiParameter("dropped", bool, description="false: leave soft-deleted tasks out"),
]
ORDERS = ("priority", "recent")
APPROVAL_VIEWS = ("waiting", "not_waiting")
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
        "routine": params.get("routine"),
        "dropped": None if dropped is None else query_bool(dropped, "dropped"),
    }


class TaskListView(APIView):
    pagination_class = TaskCursorPagination

    @extend_schema(
        operation_id="board_tasks_list",
        parameters=[
            OpenApiParameter("status", str, enum=list(Status.values)),
            *_FILTER_PARAMETERS,
            OpenApiParameter("ready", bool),
            OpenApiParameter(
                "approval",
                str,
                enum=list(APPROVAL_VIEWS),
                description="waiting: only tasks waiting for a person's approval (the "
                "board's Needs approval column); not_waiting: leave them out",
            ),
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
        order = checks.check_choice(params.get("order", "priority"), "order", ORDERS)
        qs: QuerySet[Task] = store.list_tasks(
            status=params.get("status"),
            ready=query_bool(params.get("ready"), "ready"),
            **_task_filters(request),
        )
        approval = params.get("approval")
        if approval is not None:
            checks.check_choice(approval, "approval", APPROVAL_VIEWS)
            waiting = store.awaiting_filter()
            qs = qs.filter(waiting) if approval == "waiting" else qs.exclude(waiting)
        qs = scoped(request.user, qs)
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
        body = json_object(request, TaskCreateSerializer)
        parent = _visible_ref(request, body.get("parent_task_id"), "parent_task_id")
        if "team" not in body:
            body["team"] = _default_team(request, parent)
        team = require_team(request.user, body["team"])
        named = body.get("created_by_agent_id")
        if named is not None:
            # First: an agent of a team the caller cannot see is refused as an unknown
            # one, before files_as would name the team it is of.
            act_as(request, named, "created_by_agent_id")
        # The agent side files work as one of its agents, so it waits for a person's
        # approval (GOVERNANCE §5, §6: delegation).
        body["created_by_agent_id"] = files_as(
            principal(request), caller_agents(request.auth), team, named
        )
        if body["created_by_agent_id"] is not None and named is None:
            act_as(request, body["created_by_agent_id"], "created_by_agent_id")
        if parent is not None:
            # A subtask spends its parent's tree (child limit, cap budget): the agent
            # side files one under its own agents' tasks only (GOVERNANCE §6).
            agent_side_owns(request, parent, "file a subtask under")
        deps = body.get("depends_on")
        if isinstance(deps, list):
            _visible_refs(request, checks.check_id_list(deps, "depends_on"), "depends_on")
        checks.check_not_a_fire(body.get("id"), body.get("metadata"))
        server_commands.check_task_commands(body.get("metadata"), request.user)
        _staff_repo_path(request, body, team, None)
        result = store.create_task(
            **body,
            actor=acting_name(request),
            agent_side=principal(request).agent_side,
            # act_as found its filer in the registry, above.
            registered=True,
        )
        return Response(task_body(result.task), status=201 if result.created else 200)


def column_counts(qs: QuerySet[Task]) -> dict[str, int]:
    """Every column's total: the statuses, and "needs_approval" (the tasks waiting
    for a person, counted there and not in their status's column)."""
    counts = store.count_by_status(qs)
    waiting = store.count_awaiting(qs)
    for status, n in waiting.items():
        counts[status] -= n
    return {store.NEEDS_APPROVAL: sum(waiting.values()), **counts}


class TaskCountsView(APIView):
    """How many tasks each column holds, with the list's filters: the board's column
    headers, without reading the tasks."""

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
        counts = column_counts(scoped(request.user, store.list_tasks(**filters)))
        return Response({"team": filters["team"], "counts": counts, "total": sum(counts.values())})


class ScopeWaitsView(APIView):
    """Why each of a team's ready tasks waits for its paths (issue 43): the task of
    its repository in progress or waiting to land whose scope overlaps its own. The
    board's cards say it ("waiting: touches src/** like task X in progress")."""

    @extend_schema(
        operation_id="board_scope_waits",
        parameters=[OpenApiParameter("team", str, required=True)],
        responses=with_errors(
            {
                200: inline_serializer(
                    "ScopeWaits",
                    {
                        "team": serializers.CharField(),
                        "waits": serializers.DictField(
                            child=serializers.DictField(),
                            help_text="task id -> {task, status, touches, theirs, detail}: "
                            "the task holding its paths, that task's status, the two "
                            "globs that overlap and the sentence",
                        ),
                    },
                )
            },
            "validation_error",
        ),
    )
    def get(self, request: Request) -> Response:
        team = require_team(request.user, request.query_params.get("team"))
        waits = store.scope_holds([team])
        return Response({"team": team, "waits": {k: v.as_dict() for k, v in waits.items()}})


def columns_schema(**side: serializers.Field) -> Any:
    """The schema of ``GET /api/board/columns``, with ``side``: the side reads a view
    standing above the board folds in (the merge queues, :mod:`worktrees.api`)."""
    return extend_schema(
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
                        "scope_waits": serializers.DictField(
                            child=serializers.DictField(),
                            help_text="GET /api/board/scope-waits' waits, of the team "
                            "(no team: the caller's teams)",
                        ),
                        "stalled_runs": ExecutionSerializer(
                            many=True, help_text="GET /api/board/runs/stalled, of the team"
                        ),
                        **side,
                    },
                )
            },
            "validation_error",
        ),
    )


def side_teams(request: Request, team: str | None) -> list[str] | None:
    """Whose side reads the columns' answer carries: the team asked (none when the
    caller cannot see it, as its columns are empty), else the caller's teams
    (None: staff, every team)."""
    if team is None:
        return team_ids(request.user)
    return [team] if can_see_team(request.user, team) else []


class BoardColumnsView(APIView):
    """The board's first view in one request: each column's first page in that
    column's order (live columns by priority, terminal ones most recently changed
    first), every column's total, and the event sequence they are as of. What it
    costs depends on the page sizes, not on how much history the team has.

    Beside the columns, what the cards and panels show about them (the side reads,
    each also its own endpoint for agents and the CLI): why ready tasks wait for
    their paths and which runs stalled -- so the first view is two requests, this and
    the counts. Each is one or two queries whatever the team's size."""

    def side_reads(self, request: Request, teams: list[str] | None) -> dict[str, Any]:
        waits = store.scope_holds(teams)
        return {
            "scope_waits": {task_id: hold.as_dict() for task_id, hold in waits.items()},
            "stalled_runs": [run.as_dict() for run in steps_store.stalled_runs(teams)],
        }

    @columns_schema()
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
        visible = scoped(request.user, store.list_tasks(**filters))
        counted = params.get("counts") is None or query_bool(params.get("counts"), "counts")
        counts = column_counts(visible) if counted else None
        own = ("limit", "terminal_limit", "cursor", "counts")
        query = {k: v for k, v in params.items() if k not in own}
        list_url = request.build_absolute_uri(reverse("tasks"))
        # Each column: its key, its rows, whether it is terminal, and the list query of
        # its next page (around the limit). First the tasks waiting for a person's
        # approval, in the board's order; their status columns leave them out.
        waiting = store.awaiting_filter()
        specs: list[tuple[str, QuerySet[Task], bool, dict[str, str], dict[str, str]]] = [
            (store.NEEDS_APPROVAL, visible.filter(waiting), False, {"approval": "waiting"}, {})
        ]
        for status in Status:
            column, head = visible.filter(status_filter(status)), {"status": status.value}
            if is_terminal(status):
                specs.append((status.value, column, True, head, {"order": "recent"}))
            else:
                tail = {"approval": "not_waiting"}
                specs.append((status.value, column.exclude(waiting), False, head, tail))
        pages: dict[str, tuple[list[Task], str | None]] = {}
        for key, rows, terminal, head, tail in specs:
            pager = RecentTaskCursorPagination() if terminal else TaskCursorPagination()
            size = sizes[terminal]
            next_base = f"{list_url}?{urlencode({**query, **head, 'limit': size, **tail})}"
            pages[key] = (pager.first_page(rows, request, size, next_base), pager.get_next_link())
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
                **self.side_reads(request, side_teams(request, team)),
            }
        )


class TaskDetailView(APIView):
    @extend_schema(
        operation_id="board_tasks_retrieve",
        responses=with_errors({200: TaskReadSerializer}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        task = visible_task(request.user, task_id)
        # Read only: an agent's own repo_path registers on a run, not on a read.
        where = run_repository(task, register=False)
        return Response({**task_body(task), "run_repository": where.as_read_body()})

    @extend_schema(
        operation_id="board_tasks_update",
        request=TaskPatchSerializer,
        responses=with_errors(
            {200: TaskSerializer}, "not_found", "validation_error", "forbidden", "conflict"
        ),
    )
    def patch(self, request: Request, task_id: str) -> Response:
        task = visible_task(request.user, task_id)
        body = json_object(request, TaskPatchSerializer)
        if_revision = body.pop("if_revision", None)
        if body.get("assignee_agent_id") is not None:
            act_as(request, body["assignee_agent_id"], "assignee_agent_id")
        checks.check_not_a_fire(None, body.get("metadata"), task.metadata)
        server_commands.check_task_commands(
            body.get("metadata"), request.user, before=task.metadata or {}
        )
        _staff_repo_path(request, body, task.team_id, task)
        updated = store.update_task(task_id, body, if_revision=if_revision, registered=True)
        return Response(task_body(updated))


TransitionBody = inline_serializer(
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
)


class TransitionView(APIView):
    @extend_schema(
        operation_id="board_tasks_transition",
        request=TransitionBody,
        responses=with_errors(
            {200: TaskSerializer},
            "not_found",
            "validation_error",
            "illegal_transition",
            "claim_required",
            "approval_required",
            "conflict",
            "verification_required",
            "landing_underway",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        task = visible_task(request.user, task_id)
        body = json_object(request, TransitionBody)
        if principal(request).agent_side:
            refuse_settling_its_own_run(run_task(request.auth), task.id)
            _agent_side_move(request, task, body["to"])
        agent = body.get("agent_id")
        task = store.transition(
            task_id,
            body["to"],
            human_override=audited_override(request, body.get("human_override")),
            agent_id=None if agent is None else act_as(request, agent),
            lease_ms=body.get("lease_ms"),
            actor=acting_name(request),
        )
        return Response(task_body(task))


def _agent_side_move(request: Request, task: Any, to: Any) -> None:
    """The agent side moves only its own work (GOVERNANCE §6): a claim from ``todo``
    (the claim statement's gate: route, limits, budgets, approval) or a task its own
    agent holds in progress to ``in_review`` or ``blocked``. Taking back a blocked or
    reviewed task is a person's: a run stopped at its ceiling is never retried by
    itself (§3), and work in review is a person's to send back or turn down. The table
    (``core.roles``) has already refused ``done``, ``todo``, ``backlog`` and
    ``cancelled``."""
    if to == task.status:
        return  # a no-op, as for anyone
    if to == Status.IN_PROGRESS and task.status != Status.TODO:
        roles.refuse_agent_side(principal(request), f"{operation(request)} from {task.status}")
    if to != Status.IN_PROGRESS:
        refuse_deciding_work_in_review(principal(request), task, operation(request))
        if task.assignee_agent_id is None or task.status != Status.IN_PROGRESS:
            roles.refuse_agent_side(
                principal(request), f"{operation(request)} of work no agent of yours holds"
            )
        act_as_assignee(request, task)
        if to == Status.IN_REVIEW:
            refuse_unjudged_done(principal(request), task, "move to review")


ApprovalDecisionBody = inline_serializer(
    "ApprovalDecision",
    {
        "decision": serializers.ChoiceField(choices=list(store.APPROVAL_DECISIONS)),
        "reason": serializers.CharField(required=False, max_length=2_000),
        "revision": serializers.IntegerField(
            required=False,
            help_text="the task revision you read: refused (409) if it changed since",
        ),
    },
)


class TaskApprovalView(APIView):
    """A person's decision on a task's approval before work (GOVERNANCE §5): any
    member of the task's team, with their own credential (an agent's key: 403)."""

    @extend_schema(
        operation_id="board_tasks_approval",
        request=ApprovalDecisionBody,
        responses=with_errors(
            {200: TaskSerializer}, "not_found", "validation_error", "forbidden", "conflict"
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        by = require_person(request)
        body = json_object(request, ApprovalDecisionBody)
        task = store.decide_approval(
            task_id,
            body["decision"],
            by=by,
            reason=body.get("reason"),
            revision=body.get("revision"),
        )
        return Response(task_body(task))


_TOOL_APPROVAL_FIELDS: dict[str, Any] = {
    "id": serializers.CharField(),
    "task_id": serializers.CharField(),
    "team": serializers.CharField(),
    "agent_id": serializers.CharField(),
    "tool": serializers.CharField(),
    "arguments": serializers.DictField(help_text="secret-looking values masked (***)"),
    "state": serializers.ChoiceField(choices=ToolApprovalState.values),
    "decision": serializers.ChoiceField(choices=ToolDecision.values, allow_null=True),
    "decided_by": serializers.CharField(allow_null=True),
    "decided_at": serializers.DateTimeField(allow_null=True),
    "created_at": serializers.DateTimeField(),
    "expires_at": serializers.DateTimeField(help_text="no answer by then is a deny"),
}
_TOOL_APPROVAL = inline_serializer("ToolApproval", _TOOL_APPROVAL_FIELDS)
_TOOL_APPROVALS = inline_serializer("ToolApproval", _TOOL_APPROVAL_FIELDS, many=True)


ToolApprovalDecisionBody = inline_serializer(
    "ToolApprovalDecision",
    {"decision": serializers.ChoiceField(choices=ToolDecision.values)},
)


def _visible_tool_approval(request: Request, approval_id: str) -> Any:
    found = store.list_approvals(teams=team_ids(request.user), state=None).filter(pk=approval_id)
    row = found.first()
    if row is None:
        if store.list_approvals(teams=None, state=None).filter(pk=approval_id).exists():
            roles.refuse_withheld(request.user, f"approval {approval_id!r}")
        raise NotFound(f"approval {approval_id!r} does not exist", approval_id=approval_id)
    return row


class ToolApprovalsView(APIView):
    """Tool calls of running agents waiting for a person (GOVERNANCE §5)."""

    @extend_schema(
        operation_id="approvals_list",
        parameters=[
            OpenApiParameter(
                "state",
                str,
                enum=[*ToolApprovalState.values, "any"],
                description="pending (default): the calls waiting now",
            ),
            OpenApiParameter("task", str),
            OpenApiParameter("team", str),
        ],
        responses=with_errors({200: _TOOL_APPROVALS}, "validation_error"),
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        state = params.get("state", ToolApprovalState.PENDING)
        teams = team_ids(request.user)
        if params.get("team") is not None:
            teams = [require_team(request.user, params["team"])]
        rows = store.list_approvals(
            teams=teams, state=None if state == "any" else state, task=params.get("task")
        )
        return Response([row.as_dict() for row in rows[:500]])


class ToolApprovalDetailView(APIView):
    @extend_schema(
        operation_id="approvals_decide",
        request=ToolApprovalDecisionBody,
        responses=with_errors(
            {200: _TOOL_APPROVAL}, "not_found", "validation_error", "forbidden", "conflict"
        ),
    )
    def post(self, request: Request, approval_id: str) -> Response:
        _visible_tool_approval(request, approval_id)
        by = require_person(request)
        body = json_object(request, ToolApprovalDecisionBody)
        return Response(store.decide_tool_call(approval_id, body["decision"], by=by).as_dict())


ClaimBody = inline_serializer(
    "Claim",
    {
        "agent_id": serializers.CharField(
            required=False,
            help_text="the agent that claims; optional with a credential that acts as one "
            "agent (its key, a run's credential, a machine token of one agent)",
        ),
        "runtime": serializers.CharField(required=False),
        "lease_ms": serializers.IntegerField(required=False, min_value=1000),
    },
)


class ClaimView(APIView):
    @extend_schema(
        operation_id="board_tasks_claim",
        request=ClaimBody,
        responses=with_errors(
            {200: ClaimedSerializer},
            *store.CLAIM_REFUSALS,
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ClaimBody)
        agent = act_as(request, claimer(request, body.get("agent_id")))
        result = store.claim(
            task_id, agent, body.get("runtime"), lease_ms=body.get("lease_ms"), registered=True
        )
        result.raise_for_outcome(task_id)
        return Response(claimed_body(result))


ClaimNextBody = inline_serializer(
    "ClaimNext",
    {
        "agent_id": serializers.CharField(
            required=False,
            help_text="the agent that claims; optional with a credential that acts as one "
            "agent (its key, a run's credential, a machine token of one agent)",
        ),
        "runtime": serializers.CharField(required=False),
        "dispatcher": serializers.ChoiceField(choices=list(store.DISPATCH_ORDER), required=False),
        "label": serializers.CharField(required=False),
        "team": serializers.CharField(required=False),
        "lease_ms": serializers.IntegerField(required=False, min_value=1000),
        "open_run": serializers.BooleanField(
            required=False,
            help_text="open the claimed task's run in the claim's own write; the answer's "
            "`execution` is the run, as POST …/executions answers it",
        ),
    },
)


class ClaimNextView(APIView):
    @extend_schema(
        operation_id="board_claim_next",
        request=ClaimNextBody,
        responses=with_errors(
            {200: ClaimedNextSerializer, 204: None},
            *store.CLAIM_NEXT_REFUSALS,
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, ClaimNextBody)
        agent = act_as(request, claimer(request, body.get("agent_id")))
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
            open_run=_flag(body.get("open_run", False), "open_run"),
            registered=True,
        )
        if result is None:
            return Response(status=204)
        result.raise_for_outcome("")
        answer = claimed_body(result)
        if result.execution is not None:
            answer["execution"] = result.execution.as_dict()
        return Response(answer)


def _flag(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationFailed(field, "must be true or false")
    return value


HeartbeatBody = inline_serializer(
    "Heartbeat",
    {
        "ticket": serializers.CharField(),
        "lease_ms": serializers.IntegerField(required=False, min_value=1000),
    },
)


class HeartbeatView(APIView):
    @extend_schema(
        operation_id="board_tasks_heartbeat",
        request=HeartbeatBody,
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
        body = json_object(request, HeartbeatBody)
        outcome = store.renew_lease(task_id, body["ticket"], lease_ms=body.get("lease_ms"))
        task = outcome.raise_if_declined()
        assert task.lease_until is not None
        return Response({"lease_until": task.lease_until.isoformat()})


ReleaseBody = inline_serializer("Release", {"ticket": serializers.CharField(required=False)})


class ReleaseView(APIView):
    @extend_schema(
        operation_id="board_tasks_release",
        request=ReleaseBody,
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
        refuse_settling_its_own_run(run_task(request.auth), task_id)
        body = json_object(request, ReleaseBody)
        outcome = store.release(task_id, ticket=body.get("ticket"))
        return Response(task_body(outcome.raise_if_declined()))


CompleteBody = inline_serializer(
    "Complete",
    {
        "output": serializers.JSONField(required=False),
        "ticket": serializers.CharField(required=False),
        "if_allowed": serializers.BooleanField(required=False),
        "refuse_when_parked": serializers.BooleanField(required=False),
        "human_override": OverrideSerializer,
    },
)


class CompleteView(APIView):
    @extend_schema(
        operation_id="board_tasks_complete",
        request=CompleteBody,
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
        task = visible_task(request.user, task_id)
        refuse_deciding_work_in_review(principal(request), task, operation(request))
        act_as_assignee(request, task)
        refuse_settling_its_own_run(run_task(request.auth), task.id)
        refuse_unjudged_done(principal(request), task)
        body = json_object(request, CompleteBody)
        outcome = store.complete(
            task_id,
            body.get("output"),
            ticket=body.get("ticket"),
            if_allowed=body.get("if_allowed", False),
            refuse_when_parked=body.get("refuse_when_parked", False),
            human_override=audited_override(request, body.get("human_override")),
        )
        return Response(outcome_body(outcome))


FailBody = inline_serializer(
    "Fail",
    {
        "error": serializers.CharField(),
        "ticket": serializers.CharField(required=False),
        "if_allowed": serializers.BooleanField(required=False),
        "refuse_when_parked": serializers.BooleanField(required=False),
    },
)


class FailView(APIView):
    @extend_schema(
        operation_id="board_tasks_fail",
        request=FailBody,
        responses=with_errors(
            {200: OutcomeSerializer},
            "not_found",
            "illegal_transition",
            "validation_error",
            "forbidden",
            "landing_underway",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        task = visible_task(request.user, task_id)
        refuse_deciding_work_in_review(principal(request), task, operation(request))
        act_as_assignee(request, task)
        refuse_settling_its_own_run(run_task(request.auth), task_id)
        body = json_object(request, FailBody)
        outcome = store.fail(
            task_id,
            body["error"],
            ticket=body.get("ticket"),
            if_allowed=body.get("if_allowed", False),
            refuse_when_parked=body.get("refuse_when_parked", False),
            # A remote worker's fail after the run it closed failed for its agent:
            # back to todo, as a local run's task goes (GOVERNANCE §2).
            retry=store.failed_for_its_agent(task_id),
        )
        return Response(outcome_body(outcome))


VerdictBody = inline_serializer(
    "VerdictBody",
    {
        "verdict": serializers.ChoiceField(choices=Verdict.choices),
        "evidence": serializers.CharField(required=False),
    },
)


class VerdictView(APIView):
    @extend_schema(
        operation_id="board_tasks_verdict",
        request=VerdictBody,
        responses=with_errors({200: TaskSerializer}, "not_found", "validation_error", "conflict"),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, VerdictBody)
        # A person's verdict (the table keeps the verb for people) says whose it is.
        verdict = store.set_verdict(
            task_id, body["verdict"], body.get("evidence"), by=request.user.get_username()
        )
        return Response(task_body(verdict))


DependencyBody = inline_serializer("Dependency", {"depends_on": serializers.CharField()})


class DepsView(APIView):
    @extend_schema(
        operation_id="board_tasks_deps_create",
        request=DependencyBody,
        responses=with_errors(
            {201: TaskSerializer, 200: TaskSerializer},
            "not_found",
            "cycle",
            "validation_error",
            "forbidden",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        # The rule is the waiting task's: a dependency makes it wait (and voids a
        # person's approval of it), so only its own agents' side may add one.
        agent_side_owns(request, visible_task(request.user, task_id), "add a dependency to")
        body = json_object(request, DependencyBody)
        dep = body["depends_on"]
        if isinstance(dep, str):
            visible_task(request.user, dep)
        created = store.link(task_id, dep)
        return Response(task_body(store.get_task(task_id)), status=201 if created else 200)


class DepDetailView(APIView):
    @extend_schema(
        operation_id="board_tasks_deps_destroy", responses=with_errors({204: None}, "not_found")
    )
    def delete(self, request: Request, task_id: str, dep_id: str) -> Response:
        visible_task(request.user, task_id)
        store.unlink(task_id, dep_id)
        return Response(status=204)


class CancelDependentsView(APIView):
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
        json_object(request, None)
        return Response({"cancelled": task_bodies(store.cancel_dependents(task_id))})


CommentBody = inline_serializer(
    "NewComment",
    {
        "body": serializers.CharField(max_length=20_000),
        "author": serializers.CharField(required=False),
    },
)


class CommentsView(APIView):
    @extend_schema(
        operation_id="board_tasks_comments_list",
        responses=with_errors({200: CommentSerializer(many=True)}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        comments = [c.as_dict() for c in store.list_comments(task_id)]
        return Response(authors.with_shown_authors(comments))

    @extend_schema(
        operation_id="board_tasks_comments_create",
        request=CommentBody,
        responses=with_errors(
            {201: CommentSerializer}, "not_found", "validation_error", "forbidden"
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        # A comment is read into the task's agent's context: the agent side writes
        # one on its own agents' tasks only.
        agent_side_owns(request, visible_task(request.user, task_id), "comment on")
        body = json_object(request, CommentBody)
        # Audit: a comment is the authenticated user's (through an agent's key: that
        # agent's), or an agent's they may act as.
        who = acting_name(request)
        author = body.get("author")
        if author is None or author == who:
            author = who
        else:
            act_as(request, author, "author")
        said = store.add_comment(
            task_id, body["body"], author, agent_side=principal(request).agent_side
        )
        return Response(authors.with_shown_authors([said.as_dict()])[0], status=201)


OpenExecutionBody = inline_serializer(
    "OpenExecution",
    {
        "ticket": serializers.CharField(),
        "runtime": serializers.CharField(required=False),
    },
)


class ExecutionsView(APIView):
    @extend_schema(
        operation_id="board_tasks_executions",
        responses=with_errors({200: ExecutionSerializer(many=True)}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        return Response([{**e.as_dict(), "run": n} for n, e in store.numbered_executions(task_id)])

    @extend_schema(
        operation_id="board_tasks_executions_open",
        request=OpenExecutionBody,
        responses=with_errors(
            {201: ExecutionSerializer}, "not_found", "conflict", "validation_error", "forbidden"
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        """A worker that runs its claim elsewhere (``clawboo worker``) opens the run's
        execution here, as the local executor does in-process: only for the claim the
        ticket names, and only one running execution per task."""
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, OpenExecutionBody)
        runtime = body.get("runtime")
        if runtime is not None and not isinstance(runtime, str):
            raise ValidationFailed("runtime", "must be a string")
        execution = store.open_execution(task_id, body["ticket"], runtime=runtime)
        return Response(execution.as_dict(), status=201)


# A remote run's log arrives in chunks of at most this many lines and bytes.
LOG_CHUNK_LINES = 2000
LOG_CHUNK_BYTES = 256 * 1024

LogChunkBody = inline_serializer(
    "LogChunk",
    {
        "ticket": serializers.CharField(),
        "offset": serializers.IntegerField(
            min_value=0, help_text="the log's size as the last chunk's answer gave it (0 first)"
        ),
        "lines": inline_serializer(
            "LogLine",
            {
                "stream": serializers.ChoiceField(choices=["stdout", "stderr"]),
                "line": serializers.CharField(allow_blank=True),
            },
            many=True,
        ),
    },
)
LogAppended = inline_serializer(
    "LogAppended",
    {
        "size": serializers.IntegerField(help_text="the log's size now: the next offset"),
        "written": serializers.BooleanField(help_text="false: this chunk was written before"),
        "full": serializers.BooleanField(help_text="the log reached its bound; send no more"),
    },
)


def _log_lines(value: Any) -> list[tuple[str, str]]:
    if not isinstance(value, list) or len(value) > LOG_CHUNK_LINES:
        raise ValidationFailed("lines", f"a list of at most {LOG_CHUNK_LINES} lines")
    lines, size = [], 0
    for n, item in enumerate(value):
        stream = item.get("stream") if isinstance(item, dict) else None
        line = item.get("line") if isinstance(item, dict) else None
        if stream not in ("stdout", "stderr") or not isinstance(line, str):
            raise ValidationFailed(f"lines[{n}]", '{"stream": "stdout"|"stderr", "line": text}')
        size += len(line)
        if size > LOG_CHUNK_BYTES:
            raise ValidationFailed("lines", f"a chunk of at most {LOG_CHUNK_BYTES} characters")
        lines.append((stream, line))
    return lines


class ExecutionLogView(APIView):
    """The whole output of one execution (core.runlogs), as a text download."""

    @extend_schema(
        operation_id="board_tasks_executions_log",
        responses={
            (200, "text/plain"): OpenApiTypes.STR,
            **with_errors({}, "not_found"),
        },
    )
    def get(self, request: Request, task_id: str, execution_id: str) -> HttpResponse:
        task = visible_task(request.user, task_id)
        # A str in the path (not <int:>), so an anonymous caller is told 401 before
        # anything about the path is judged.
        run = checks.execution_number(execution_id)
        if run is None or not store.list_executions(task_id).filter(pk=run).exists():
            raise NotFound(f"task {task_id!r} has no execution {execution_id}")
        if not runlogs.exists(task.team_id, task.id, run):
            raise NotFound(f"execution {execution_id} has no log (none kept, or pruned)")
        text = runlogs.read(task.team_id, task.id, run)
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = (
            f'attachment; filename="{task_id}-execution-{execution_id}.log"'
        )
        return response

    @extend_schema(
        operation_id="board_tasks_executions_log_append",
        request=LogChunkBody,
        responses=with_errors(
            {200: LogAppended}, "not_found", "conflict", "validation_error", "forbidden"
        ),
    )
    def post(self, request: Request, task_id: str, execution_id: str) -> Response:
        """A remote run's next lines, appended to the same file a local run writes
        (``core.runlogs``): the card's live view and the download read it unchanged.
        Only while the run is open, and only with its claim's ticket."""
        task = visible_task(request.user, task_id)
        act_as_assignee(request, task)
        body = json_object(request, LogChunkBody)
        run = store.claimed_execution(
            task_id, checks.execution_number(execution_id), body["ticket"]
        )
        offset = body["offset"]
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationFailed("offset", "must be a non-negative integer")
        appended = runlogs.append(task.team_id, task.id, run.id, _log_lines(body["lines"]), offset)
        return Response({"size": appended.size, "written": appended.written, "full": appended.full})


_STEP_FIELDS: dict[str, Any] = {
    "kind": serializers.ChoiceField(choices=StepKind.values),
    "name": serializers.CharField(),
    "status": serializers.ChoiceField(choices=StepStatus.values, required=False),
    "arguments": serializers.DictField(required=False),
    "detail": serializers.CharField(required=False, allow_blank=True),
    "started_at": serializers.FloatField(
        required=False, allow_null=True, help_text="seconds since the epoch"
    ),
    "duration_ms": serializers.IntegerField(required=False, allow_null=True, min_value=0),
    "tokens_in": serializers.IntegerField(required=False, allow_null=True, min_value=0),
    "tokens_out": serializers.IntegerField(required=False, allow_null=True, min_value=0),
    "cost_millicents": serializers.IntegerField(required=False, allow_null=True, min_value=0),
    "model": serializers.CharField(required=False, allow_null=True),
}
StepsBody = inline_serializer(
    "StepsReport",
    {
        "ticket": serializers.CharField(),
        "steps": inline_serializer("StepReport", _STEP_FIELDS, many=True),
    },
)
StalledBody = inline_serializer(
    "RunStalled",
    {
        "ticket": serializers.CharField(),
        "silent_s": serializers.FloatField(min_value=0, help_text="how long the run said nothing"),
    },
)


def _run_of(task_id: str, execution_id: str) -> int:
    run = checks.execution_number(execution_id)
    if run is None:
        raise NotFound(f"task {task_id!r} has no execution {execution_id}")
    return run


class ExecutionStepsView(APIView):
    """A run's steps (its trace): read by whoever sees the task; reported by the
    worker running it (one format, ``board.store.steps``)."""

    @extend_schema(
        operation_id="board_tasks_executions_steps",
        responses=with_errors({200: StepSerializer(many=True)}, "not_found"),
    )
    def get(self, request: Request, task_id: str, execution_id: str) -> Response:
        visible_task(request.user, task_id)
        rows = steps_store.list_steps(task_id, _run_of(task_id, execution_id))
        return Response([step.as_dict() for step in rows])

    @extend_schema(
        operation_id="board_tasks_executions_steps_report",
        request=StepsBody,
        responses=with_errors(
            {200: StepSerializer(many=True)}, "not_found", "conflict", "validation_error",
            "forbidden",
        ),
    )  # fmt: skip
    def post(self, request: Request, task_id: str, execution_id: str) -> Response:
        """A remote run's next steps, written as a local run's: only while the run is
        open, and only with its claim's ticket. Answers the steps written."""
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, StepsBody)
        run = store.claimed_execution(task_id, _run_of(task_id, execution_id), body["ticket"])
        rows = steps_store.record_steps(run.id, body.get("steps") or [])
        return Response([step.as_dict() for step in rows])


_TRACE_RUN: dict[str, Any] = {
    "task_id": serializers.CharField(),
    "task_title": serializers.CharField(),
    "depth": serializers.IntegerField(help_text="0: the task; 1: its child; ..."),
    "run": serializers.IntegerField(help_text="the run's number on its task"),
    "role": serializers.ChoiceField(choices=["run", "review"]),
    "execution": ExecutionSerializer(),
    "steps": StepSerializer(many=True),
    "steps_truncated": serializers.BooleanField(
        help_text="some of this run's steps are left out (a trace carries at most 2,000, "
        "newest runs first); its steps endpoint has them all"
    ),
}


class TaskTraceView(APIView):
    @extend_schema(
        operation_id="board_tasks_trace",
        responses=with_errors(
            {200: inline_serializer("TraceRun", _TRACE_RUN, many=True)}, "not_found"
        ),
    )
    def get(self, request: Request, task_id: str) -> Response:
        """The task's trace: its runs (attempts, fix rounds, the critic's review)
        and its subtasks', oldest first, each with its steps -- the board's
        waterfall."""
        visible_task(request.user, task_id)
        return Response(steps_store.trace_of(task_id))


class StalledRunsView(APIView):
    @extend_schema(
        operation_id="board_runs_stalled",
        parameters=[OpenApiParameter("team", str)],
        responses=with_errors({200: ExecutionSerializer(many=True)}, "validation_error"),
    )
    def get(self, request: Request) -> Response:
        """The running runs marked ``stalled`` (the cards show it), of the caller's
        teams or of ``team``."""
        teams = team_ids(request.user)
        if request.query_params.get("team") is not None:
            teams = [require_team(request.user, request.query_params["team"])]
        return Response([row.as_dict() for row in steps_store.stalled_runs(teams)])


class ExecutionStalledView(APIView):
    @extend_schema(
        operation_id="board_tasks_executions_stalled",
        request=StalledBody,
        responses=with_errors(
            {200: inline_serializer("Stalled", {"marked": serializers.BooleanField()})},
            "not_found", "conflict", "validation_error", "forbidden",
        ),
    )  # fmt: skip
    def post(self, request: Request, task_id: str, execution_id: str) -> Response:
        """A remote run said nothing for ``CLAWBOO_STALL_MS``: marked ``stalled`` and
        notified once (``marked`` false: it was already)."""
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, StalledBody)
        run = store.claimed_execution(task_id, _run_of(task_id, execution_id), body["ticket"])
        silent = body.get("silent_s")
        # An integer past a float's range (10**400) is as wrong as a negative one.
        if (
            isinstance(silent, bool)
            or not isinstance(silent, int | float)
            or not 0 <= silent <= sys.float_info.max
        ):
            raise ValidationFailed("silent_s", "a non-negative number of seconds")
        return Response({"marked": steps_store.mark_stalled(run.id, float(silent))})


ReconcileBody = inline_serializer(
    "Reconcile", {"pass": serializers.ChoiceField(choices=list(store.RECOVERY_PASSES))}
)


class ReconcileView(APIView):
    permission_classes = [RoleTable, StaffOnly]

    @extend_schema(
        operation_id="board_reconcile",
        request=ReconcileBody,
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
        body = json_object(request, ReconcileBody)
        which = checks.check_choice(body["pass"], "pass", store.RECOVERY_PASSES)
        return Response({"released": store.RECOVERY_PASSES[which].run()})


# --- an agent's pause and resume (GOVERNANCE §2) ----------------------------------


AgentPauseBody = inline_serializer(
    "AgentPause", {"reason": serializers.CharField(required=False, max_length=2000)}
)
AgentResumeBody = inline_serializer(
    "AgentResume", {"reason": serializers.CharField(required=False, max_length=2000)}
)


class AgentPauseView(APIView):
    """A person pauses an agent: it claims nothing by any door until resumed, and the
    work it had claimed but not started goes back to todo."""

    @extend_schema(
        operation_id="agents_pause",
        request=AgentPauseBody,
        responses=with_errors({200: AgentSerializer}, "not_found", "validation_error"),
    )
    def post(self, request: Request, agent_id: str) -> Response:
        visible_agent(request.user, agent_id)
        if principal(request).agent_side:
            act_as(request, agent_id)  # the agent side pauses its own agents only
        body = json_object(request, AgentPauseBody)
        reason = body.get("reason")
        who = acting_name(request)
        agent, _ = store.pause_agent(agent_id, reason or f"paused by {who}", by=who)
        return Response(agent_body(agent, staff=server_commands.is_operator(request.user)))


class AgentResumeView(APIView):
    """Its owner or staff resume a paused agent (the rule editing it holds to); its
    breaker's count starts over."""

    @extend_schema(
        operation_id="agents_resume",
        request=AgentResumeBody,
        responses=with_errors({200: AgentSerializer}, "not_found", "validation_error", "forbidden"),
    )
    def post(self, request: Request, agent_id: str) -> Response:
        # As editing it (GOVERNANCE §6): its owner or staff, not any member of its team.
        govern_agent(request, agent_id)
        body = json_object(request, AgentResumeBody)
        # A resume keeps no reason, but one sent is held to pause's rule: a megabyte
        # or a number is a 400, not taken in silence.
        check_text(body.get("reason"), "reason", limit=registry.REASON_MAX)
        agent = store.resume_agent(agent_id, by=request.user.get_username())
        return Response(agent_body(agent, staff=server_commands.is_operator(request.user)))
