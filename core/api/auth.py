"""``Authorization: Token <key>``: a user's key (DRF's ``Token``) or a key bound to
one agent (:class:`core.models.AgentToken`), which authenticates as the agent's
owner and may act as that agent only (``request.auth.agent_id``), or a worker host's
machine key (:class:`core.models.MachineToken`, stored hashed), which acts as the
agents it is bound to only."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions

from core.machines import KEY_LENGTH
from core.models import AgentToken, MachineToken


def user_and_token(key: str) -> tuple[Any, Any] | None:
    """(user, token row) for a key of either kind, or None (unknown key or inactive user)."""
    from rest_framework.authtoken.models import Token

    # Checked before the lookup: a NUL or a surrogate would break the query itself.
    if not key or len(key) > KEY_LENGTH or not (key.isascii() and key.isprintable()):
        return None
    found: Any = AgentToken.objects.select_related("user").filter(key=key).first()
    if found is None:
        found = Token.objects.select_related("user").filter(key=key).first()
    if found is None:
        from core.machines import by_key

        found = by_key(key)
    if found is None or not found.user.is_active:
        return None
    return found.user, found


def bound_agent(auth: Any) -> str | None:
    """The one agent a request's credential may act as, or None (no such binding)."""
    return auth.agent_id if isinstance(auth, AgentToken) else None


def bound_agents(auth: Any) -> frozenset[str] | None:
    """The agents a machine token may act as, or None (not a machine token)."""
    if not isinstance(auth, MachineToken):
        return None
    from core.machines import bound_agent_ids

    return bound_agent_ids(auth)


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        found = user_and_token(key)
        if found is None:
            raise exceptions.AuthenticationFailed("invalid token")
        return found
