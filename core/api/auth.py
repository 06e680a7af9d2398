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


# A run's credential (boardmcp.credentials) starts so; another authentication class
# of the API takes it.
RUN_KEY_PREFIX = "clawboo-run-"


def bound_agent(auth: Any) -> str | None:
    """The one agent a request's credential may act as, or None (no such binding):
    an agent's key, or a run's credential (which says so itself)."""
    if isinstance(auth, AgentToken):
        return auth.agent_id
    bound = getattr(auth, "bound_agent_id", None)
    return bound if isinstance(bound, str) else None


def bound_agents(auth: Any) -> frozenset[str] | None:
    """The agents a machine token may act as, or None (not a machine token)."""
    if not isinstance(auth, MachineToken):
        return None
    from core.machines import bound_agent_ids

    return bound_agent_ids(auth)


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if len(header) == 2 and header[1].startswith(RUN_KEY_PREFIX.encode()):
            return None  # a run's credential: boardmcp.credentials.RunAuthentication
        return super().authenticate(request)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        found = user_and_token(key)
        if found is None:
            raise exceptions.AuthenticationFailed("invalid token")
        return found
