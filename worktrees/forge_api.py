"""``POST /api/repositories/{repo_id}/forge/webhook``: a forge's deliveries.

Anonymous (the forge holds no Clawboo key; its row in the roles table admits
anonymous callers), but every delivery's HMAC-SHA256 signature is checked with
the repository's webhook secret before anything is read or written: a forged or
missing signature answers ``401 bad_signature``. A verified delivery only says
which pull request to look at; what happened is asked of the forge itself, after
the answer, by a django-q2 worker (:func:`worktrees.pull_requests.take_delivery`).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.bodies import OpenBody, json_object
from core.api.schema import with_errors
from worktrees import pull_requests


class ForgeDelivery(OpenBody):
    """The keys the server reads of a delivery (the rest of the vendor's payload
    passes through unread): which pull request, check run or commit it is about."""

    action = serializers.CharField(required=False)
    number = serializers.IntegerField(required=False)
    pull_request = serializers.DictField(required=False)
    check_run = serializers.DictField(required=False)
    sha = serializers.CharField(required=False)


class ForgeWebhookView(APIView):
    authentication_classes: list[Any] = []

    @extend_schema(
        operation_id="repositories_forge_webhook",
        description=(
            "A GitHub or Gitea/Forgejo webhook delivery for the repository's forge "
            "(events: pull_request, pull_request_review, check_run, status). Signed with "
            "the forge's webhook secret: GitHub `X-Hub-Signature-256: sha256=<hex>`, "
            "Gitea `X-Gitea-Signature: <hex>` (HMAC-SHA256 of the raw body). A bad "
            "signature is 401 with nothing written; a good one queues a refresh from the "
            "forge of each task whose pull request it names (`tasks`), answered before "
            "the forge is asked."
        ),
        request=ForgeDelivery,
        responses=with_errors(
            {
                200: inline_serializer(
                    "ForgeDeliveryTaken",
                    {
                        "event": serializers.CharField(),
                        "tasks": serializers.ListField(child=serializers.CharField()),
                    },
                )
            },
            "bad_signature",
        ),
    )
    def post(self, request: Request, repo_id: str) -> Response:
        raw = request._request.body  # the signed bytes, before any parsing
        event = pull_requests.verify_delivery(repo_id, request.headers, raw)
        payload = json_object(request, ForgeDelivery)
        return Response(pull_requests.take_delivery(repo_id, event, payload))


class ContractForgeWebhookView(ForgeWebhookView):
    """The same endpoint at the path API.md names, answering as API.md says: 204, no
    body (a forge reads only the status)."""

    @extend_schema(
        operation_id="repositories_forge_webhook_2",
        description=(
            "The forge webhook at the contract's path: the same delivery, signature and "
            "effect as `POST /api/repositories/{repo_id}/forge/webhook`, answered 204."
        ),
        request=ForgeDelivery,
        responses=with_errors({204: None}, "bad_signature"),
    )
    def post(self, request: Request, repo_id: str) -> Response:
        super().post(request, repo_id)
        return Response(status=204)
