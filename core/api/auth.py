"""``Authorization: Token <key>``: a user's key (DRF's ``Token``) or a key bound to
one agent (:class:`core.models.AgentToken`), which authenticates as the agent's
owner and may act as that agent only (``request.auth.agent_id``)."""

from __future__ import annotations

import binascii
import os
from typing import Any

from rest_framework import authentication, exceptions

from core.models import AgentToken

KEY_LENGTH = 40


def new_key() -> str:
    return binascii.hexlify(os.urandom(KEY_LENGTH // 2)).decode()


def user_and_token(key: str) -> tuple[Any, Any] | None:
    """(user, token row) for a key of either kind, or None (unknown key or inactive user)."""
    from rest_framework.authtoken.models import Token

    # Checked before the lookup: a NUL or a surrogate would break the query itself.
    if not key or len(key) > KEY_LENGTH or not (key.isascii() and key.isprintable()):
        return None
    found: Any = AgentToken.objects.select_related("user").filter(key=key).first()
    if found is None:
        found = Token.objects.select_related("user").filter(key=key).first()
    if found is None or not found.user.is_active:
        return None
    return found.user, found


def bound_agent(auth: Any) -> str | None:
    """The one agent a request's credential may act as, or None (no such binding)."""
    return auth.agent_id if isinstance(auth, AgentToken) else None


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        found = user_and_token(key)
        if found is None:
            raise exceptions.AuthenticationFailed("invalid token")
        return found
