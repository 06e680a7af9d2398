"""``POST /api/auth/token``: a person's own API key for their username and password.

What ``clawboo login`` asks for, so a person gets the key ``create_agent_token
<user>`` would print without an operator's shell. The key is the user's one key
(created on first use); a wrong name, a wrong password, an inactive user and a
user without a usable password all answer the same ``401 unauthenticated``, so the
answer tells nothing about which accounts exist. The per-client rate limit applies
(by address, the caller being anonymous).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import authenticate
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.authtoken.models import Token
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import storage
from core.api.bodies import json_object
from core.api.schema import with_errors
from core.errors import ValidationFailed

BODY = inline_serializer(
    "TokenRequest",
    {"username": serializers.CharField(), "password": serializers.CharField()},
)
FIELDS = ("username", "password")


def personal_key(user: Any) -> str:
    """The user's own key, created with its first use (as ``create_agent_token``)."""
    token, _ = storage.write(lambda: Token.objects.get_or_create(user=user))
    return str(token.key)


class TokenView(APIView):
    # No session and no key needed (that is what it hands out; its row in the roles
    # table admits anonymous callers); no CSRF either: it changes nothing a cookie
    # could be abused for.
    authentication_classes: list[Any] = []

    def get_authenticate_header(self, request: Request) -> str:
        # A refusal is a 401 (with the scheme the key is then used with), not DRF's
        # 403 for a view without authentication classes.
        return "Token"

    @extend_schema(
        operation_id="auth_token",
        request=BODY,
        responses=with_errors(
            {
                200: inline_serializer(
                    "TokenAnswer",
                    {"token": serializers.CharField(), "username": serializers.CharField()},
                )
            },
            "validation_error",
        ),
    )
    def post(self, request: Request) -> Response:
        body = json_object(request, BODY)
        for field in FIELDS:
            if not isinstance(body[field], str):
                raise ValidationFailed(field, "must be a string")
        user = authenticate(request._request, username=body["username"], password=body["password"])
        if user is None or not user.is_active:
            raise exceptions.AuthenticationFailed("wrong username or password")
        return Response({"token": personal_key(user), "username": user.get_username()})
