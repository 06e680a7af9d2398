"""The general per-client HTTP limit: ``CLAWBOO_HTTP_RATE_LIMIT`` requests per 60 s.

One budget per client, shared by the REST API (a DRF throttle) and the MCP server
(:func:`wait_for`, called before the SDK sees a request): a person's token spends the
same budget on either door, and an agent's key or run credential its agent's
(:func:`client_of`), never its owner's.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle


def user_client(user_pk: Any) -> str:
    return f"user:{user_pk}"


def agent_client(agent_id: str) -> str:
    return f"agent:{agent_id}"


def client_of(user: Any, auth: Any) -> str:
    """Whose budget a request spends. A credential bound to one agent (its key, a
    run's credential) authenticates as the agent's owner, yet spends the agent's own
    budget, as a run's credential does over MCP: an agent that floods the API never
    locks its person out of pausing it or denying what it asks (GOVERNANCE §6).
    Anyone else spends their user's (a person's; a machine token's service user)."""
    from core.api.auth import bound_agent

    bound = bound_agent(auth)
    return agent_client(bound) if bound is not None else user_client(user.pk)


class ClientRateThrottle(SimpleRateThrottle):
    scope = "client"

    def get_rate(self) -> str | None:
        limit = int(settings.CLAWBOO_HTTP_RATE_LIMIT)
        return f"{limit}/min" if limit > 0 else None

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.rate is None:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str:
        if request.user and request.user.is_authenticated:
            ident = client_of(request.user, request.auth)
        else:
            ident = f"ip:{self.get_ident(request)}"
        return f"clawboo-throttle:{ident}"


class _NamedClientThrottle(ClientRateThrottle):
    def __init__(self, client: str) -> None:
        super().__init__()
        self.client = client

    def get_cache_key(self, request: Any, view: Any) -> str:
        return f"clawboo-throttle:{self.client}"


def wait_for(client: str) -> float | None:
    """Spend one request of ``client``'s budget: None if allowed, else the seconds to
    wait before the next one is."""
    throttle = _NamedClientThrottle(client)
    if throttle.allow_request(None, None):
        return None
    return throttle.wait() or 1.0
