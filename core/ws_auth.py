"""Websocket authentication: ``?token=<key>`` for scripts, or the session cookie.

A browser always sends ``Origin`` and sends the cookie along whoever opens the
socket, so the origin check guards cookie sessions, where it matters: a session
counts only when ``Origin`` is one of the allowed hosts. A token is a credential
the client holds itself and needs no ``Origin`` (every non-browser client sends
none). Whoever is left unauthenticated is closed with 4401 by the consumer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from channels.middleware import BaseMiddleware
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import validate_host


@database_sync_to_async
def _user_for_token(key: str) -> tuple[Any, Any] | None:
    from core.api.auth import user_and_token

    return user_and_token(key)


def origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the handshake's ``Origin`` names one of ``ALLOWED_HOSTS``."""
    origin = dict(scope.get("headers") or []).get(b"origin")
    if not origin:
        return False
    host = urlparse(origin.decode("latin-1")).hostname
    if not host:
        return False
    allowed = settings.ALLOWED_HOSTS or (
        ["localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else []
    )
    return validate_host(host if ":" not in host else f"[{host}]", allowed)


class TokenOrOriginCheckedSession(BaseMiddleware):
    """Runs inside the session stack: keep the session user only for an allowed
    ``Origin``; a valid ``?token=`` takes precedence either way."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        key = _token_of(scope)
        found = await _user_for_token(key) if key else None
        if found is not None:
            scope = {**scope, "user": found[0], "auth": found[1]}
        elif not origin_allowed(scope):
            scope = {**scope, "user": AnonymousUser()}
        return await super().__call__(scope, receive, send)


def _token_of(scope: dict[str, Any]) -> str:
    params = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return (params.get("token") or [""])[-1]


def still_standing(scope: dict[str, Any]) -> Any:
    """Who a socket's credential names *now*, or None: the key of ``?token=`` looked
    up again (a machine token revoked, an agent's key deleted, its user deactivated:
    None), or the session read again from its store (signed out, expired, its
    password changed: None). A socket opened with a credential keeps no more than the
    credential does (GOVERNANCE §6); :class:`core.consumers.BoardConsumer` asks."""
    if scope.get("auth") is not None:
        found = _user_and_token(_token_of(scope))
        return None if found is None else found[0]
    session = scope.get("session")
    key = getattr(session, "session_key", None)
    if not key:
        return None
    from importlib import import_module
    from types import SimpleNamespace

    from django.contrib.auth import get_user

    store = import_module(settings.SESSION_ENGINE).SessionStore(key)
    user = get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    return user if user.is_authenticated else None


def _user_and_token(key: str) -> tuple[Any, Any] | None:
    from core.api.auth import user_and_token

    return user_and_token(key) if key else None


def auth_stack(inner: Any) -> Any:
    return AuthMiddlewareStack(TokenOrOriginCheckedSession(inner))
