"""REST views of a task's workspace and of worktree GC (``shared/API.md`` Workspaces)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from board.access import visible_task
from core.api.bodies import json_object
from core.api.idempotency import idempotent
from core.api.schema import with_errors
from worktrees import service

WorkspaceSerializer = inline_serializer(
    "Workspace",
    {
        "task_id": serializers.CharField(),
        "repo_path": serializers.CharField(),
        "worktree_path": serializers.CharField(),
        "branch": serializers.CharField(),
        "base_sha": serializers.CharField(),
        "base_commit": serializers.CharField(),
        "status": serializers.ChoiceField(choices=["active", "archived", "stale"]),
        "resume_state": serializers.DictField(required=False),
    },
)
_ANY = inline_serializer("WorkspaceResult", {"result": serializers.CharField(required=False)})


class WorkspaceView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(
        operation_id="board_tasks_workspace_create",
        request=inline_serializer(
            "Provision",
            {
                "repo_path": serializers.CharField(),
                "base_ref": serializers.CharField(required=False),
                "base_sha": serializers.CharField(required=False),
            },
        ),
        responses=with_errors(
            {201: WorkspaceSerializer},
            "not_found",
            "validation_error",
            "not_file_mutating",
            "conflict",
        ),
    )
    @idempotent
    def post(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        body = json_object(request, ("repo_path", "base_ref", "base_sha"), required=("repo_path",))
        ws = service.provision_task_workspace(
            task_id, body["repo_path"], base_ref=body.get("base_ref"), base_sha=body.get("base_sha")
        )
        return Response(service.workspace_as_dict(ws), status=201)

    @extend_schema(
        operation_id="board_tasks_workspace_retrieve",
        responses=with_errors({200: WorkspaceSerializer}, "not_found"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        visible_task(request.user, task_id)
        return Response(_jsonable(service.workspace_state(task_id)))


def _jsonable(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if hasattr(value, "__dataclass_fields__"):
        from dataclasses import asdict

        return asdict(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "pk") and hasattr(value, "_meta"):
        return service.workspace_as_dict(value)
    return value


def _operation(name: str, fn: Any, *, body: bool = False) -> type[APIView]:
    class OperationView(APIView):
        permission_classes = [IsAuthenticated]

        @extend_schema(
            operation_id=f"board_tasks_workspace_{name}",
            request=inline_serializer(f"Handoff{name.title()}", {}) if body else None,
            responses=with_errors({200: _ANY}, "not_found", "conflict", "validation_error"),
        )
        @idempotent
        def post(self, request: Request, task_id: str) -> Response:
            visible_task(request.user, task_id)
            if body:
                result = fn(task_id, request.data)
            else:
                json_object(request, ())
                result = fn(task_id)
            return Response(_jsonable(result))

    OperationView.__name__ = f"Workspace{name.title()}View"
    return OperationView


WorkspacePauseView = _operation("pause", service.pause)
WorkspaceResumeView = _operation("resume", service.resume)
WorkspaceCompleteView = _operation("complete", service.complete)
WorkspaceReviewView = _operation("review", service.review)
WorkspaceHandoffView = _operation("handoff", service.write_handoff, body=True)


class GcView(APIView):
    permission_classes = [IsAuthenticated, IsAdminUser]

    @extend_schema(
        operation_id="worktrees_gc",
        request=inline_serializer(
            "Gc",
            {
                "max_age_hours": serializers.FloatField(required=False, min_value=0),
                "keep": serializers.IntegerField(required=False, min_value=0),
            },
        ),
        responses=with_errors(
            {
                200: inline_serializer(
                    "GcResult",
                    {
                        "reaped": serializers.ListField(),
                        "skipped": serializers.ListField(),
                        "failures": serializers.ListField(),
                    },
                )
            },
            "forbidden",
            "validation_error",
        ),
    )
    def post(self, request: Request) -> Response:
        body = json_object(request, ("max_age_hours", "keep"))
        return Response(
            _jsonable(
                service.gc(max_age_hours=body.get("max_age_hours", 72), keep=body.get("keep", 25))
            )
        )
