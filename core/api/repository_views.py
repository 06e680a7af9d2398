"""``/api/repositories``: the repositories registered to teams.

Staff register, edit and delete them; a member reads their own teams'. A member's
write is refused (403) before its body is looked at, so the answer says nothing
about the path it names; another team's repository answers as an unknown one.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import repositories
from core.api.access import scoped, visible
from core.api.bodies import json_object
from core.api.idempotency import idempotent
from core.api.permissions import RoleTable, StaffWrites
from core.api.schema import with_errors
from core.models import Repository

_LANDING = serializers.ChoiceField(
    choices=["", *repositories.LANDINGS],
    required=False,
    help_text="how approved work lands: squash or merge ('' = the repository's git config "
    "clawboo.landing, else CLAWBOO_LANDING)",
)


_FORGE_WRITE: dict[str, Any] = {
    "kind": serializers.ChoiceField(choices=list(repositories.FORGE_KINDS)),
    "api_url": serializers.CharField(
        help_text="the forge's API root: https://api.github.com, or https://<host>/api/v1"
    ),
    "repo": serializers.CharField(help_text="owner/name on the forge"),
    "token": serializers.CharField(
        help_text="write-only: the API token the server acts with (answers show "
        "'********'; sending '********' back keeps it)"
    ),
    "webhook_secret": serializers.CharField(
        required=False, help_text="write-only: the secret the forge signs webhooks with"
    ),
    "merge_method": serializers.ChoiceField(
        choices=list(repositories.MERGE_METHODS), required=False
    ),
    "required_checks": serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="the checks that decide (empty: every check on the head commit)",
    ),
}
_FORGE = inline_serializer(
    "RepositoryForge",
    _FORGE_WRITE,
    required=False,
    allow_null=True,
    help_text="where this repository's pull requests are opened (landing_mode: "
    "pull_request); null removes it",
)
_FORGE_BODY = inline_serializer(
    "RepositoryForgeBody",
    {**_FORGE_WRITE, "webhook_url": serializers.CharField()},
    allow_null=True,
)


def _fields(create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "path": serializers.CharField(
            required=create,
            help_text="absolute path of the repository's top level, inside CLAWBOO_REPO_ROOTS "
            "when set; symlinks and '..' are resolved and the real path is stored",
        ),
        "remote": serializers.CharField(required=False, allow_blank=True),
        "base_branch": serializers.CharField(
            required=False, allow_blank=True, help_text="where approved work lands by default"
        ),
        "landing": _LANDING,
        "landing_mode": serializers.ChoiceField(
            choices=list(repositories.LANDING_MODES),
            required=False,
            help_text="how approved work reaches the base: direct (each approval lands on "
            "its own), queue (the repository's merge queue) or pull_request (through the "
            "repository's forge)",
        ),
        "install_cmd": serializers.CharField(required=False, allow_blank=True),
        "verify_cmd": serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="the default verification command of the repository's tasks",
        ),
        "forge": _FORGE,
    }
    if create:
        return {
            "id": serializers.CharField(
                required=False, help_text="default: made from the directory's name"
            ),
            "team": serializers.CharField(),
            **fields,
        }
    return fields


_BODY: dict[str, Any] = {
    **_fields(True),
    "id": serializers.CharField(),
    "forge": _FORGE_BODY,
    "created_at": serializers.DateTimeField(),
    "updated_at": serializers.DateTimeField(),
}
RepositorySerializer = inline_serializer("Repository", _BODY)
RepositoryListSerializer = inline_serializer("Repository", _BODY, many=True)
RepositoryCreateSerializer = inline_serializer("RepositoryCreate", _fields(True))
RepositoryPatchSerializer = inline_serializer("RepositoryPatch", _fields(False))


def _visible(request: Request, repo_id: str) -> Repository:
    return visible(request.user, Repository.objects.all(), repo_id, "repository")


class RepositoryView(APIView):
    """The repository views' base: their writes are staff's, refused before the body
    is read (:class:`~core.api.permissions.StaffWrites`), after the repository the
    path names (another team's answers as a missing one)."""

    permission_classes = [RoleTable, StaffWrites]
    staff_writes = "a repository"
    staff_refusal = "only staff register, change or remove repositories"

    def written_row(self, request: Request, repo_id: str) -> Repository:
        return _visible(request, repo_id)


class RepositoriesView(RepositoryView):
    @extend_schema(
        operation_id="repositories_list",
        parameters=[OpenApiParameter("team", str)],
        responses=with_errors({200: RepositoryListSerializer}),
    )
    def get(self, request: Request) -> Response:
        repos = scoped(request.user, Repository.objects.all())
        team = request.query_params.get("team")
        if team:
            repos = repos.filter(team_id=team)
        return Response([repositories.as_dict(r) for r in repos.order_by("team_id", "id")])

    @extend_schema(
        operation_id="repositories_create",
        request=RepositoryCreateSerializer,
        responses=with_errors(
            {201: RepositorySerializer}, "validation_error", "forbidden", "conflict"
        ),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, RepositoryCreateSerializer)
        return Response(repositories.as_dict(repositories.register(**body)), status=201)


class RepositoryDetailView(RepositoryView):
    @extend_schema(
        operation_id="repositories_retrieve",
        responses=with_errors({200: RepositorySerializer}, "not_found"),
    )
    def get(self, request: Request, repo_id: str) -> Response:
        return Response(repositories.as_dict(_visible(request, repo_id)))

    @extend_schema(
        operation_id="repositories_update",
        request=RepositoryPatchSerializer,
        responses=with_errors(
            {200: RepositorySerializer}, "not_found", "forbidden", "validation_error", "conflict"
        ),
    )
    def patch(self, request: Request, repo_id: str) -> Response:
        _visible(request, repo_id)
        body = json_object(request, RepositoryPatchSerializer)
        return Response(repositories.as_dict(repositories.update(repo_id, body)))

    @extend_schema(
        operation_id="repositories_destroy",
        responses=with_errors({204: None}, "not_found", "forbidden"),
    )
    def delete(self, request: Request, repo_id: str) -> Response:
        _visible(request, repo_id)
        repositories.delete(repo_id)
        return Response(status=204)
