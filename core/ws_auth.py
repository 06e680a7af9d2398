"""Websocket authentication: the session cookie, or ``?token=<key>`` for scripts."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware


@database_sync_to_async
def _user_for_token(key: str) -> Any:
    from rest_framework.authtoken.models import Token

    token = Token.objects.select_related("user").filter(key=key).first()
    if token is None or not token.user.is_active:
        return None
    return token.user


class TokenAuthMiddleware(BaseMiddleware):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        key = (params.get("token") or [""])[-1]
        if key:
            user = await _user_for_token(key)
            if user is not None:
                scope = {**scope, "user": user}
        return await super().__call__(scope, receive, send)


def auth_stack(inner: Any) -> Any:
    # Session auth fills scope["user"]; a valid ?token= then takes precedence.
    return AuthMiddlewareStack(TokenAuthMiddleware(inner))
