"""``Authorization: Token <key>``: a user's key (DRF's ``Token``) or a key bound to
one agent (:class:`core.models.AgentToken`), which authenticates as the agent's
owner and may act as that agent only (``request.auth.agent_id``), or a worker host's
machine key (:class:`core.models.MachineToken`, stored hashed), which acts as the
agents it is bound to only."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework import authentication, exceptions

from core.machines import KEY_LENGTH
from core.models import Agent, AgentToken, MachineToken
from core.roles import bind_to_agent_team
from core.rows import from_rows

# What a refused caller is told: how to send a key, and where one comes from.
NO_KEY = (
    "no key given: send it as 'Authorization: Token <key>' (`clawboo create_agent_token"
    " <user>` on the server prints one; POST /api/auth/token trades a password for yours)"
)
BEARER = (
    "the REST API takes 'Authorization: Token <key>', not Bearer (Bearer is for /mcp/"
    " only): send the same key with the word Token"
)
UNKNOWN_KEY = (
    "invalid token: no such key here (revoked, or minted by another server);"
    " `clawboo create_agent_token <user>` on the server prints a current one"
)


@cache
def _lookup_sql() -> tuple[tuple[Any, str, int], ...]:
    """Per kind of user-held key (an agent's, a person's): its model, the statement
    reading the key's row with its user (and, for an agent's key, the agent's team;
    for a person's key, whether the user is a machine's service user), and how many
    of the columns are the key's."""
    from rest_framework.authtoken.models import Token

    user_model = get_user_model()
    users = ", ".join(f"u.{f.column}" for f in user_model._meta.concrete_fields)
    machines = MachineToken._meta.db_table
    lookups = []
    agents = Agent._meta.db_table
    for model, extra in ((AgentToken, ", a.team_id"), (Token, ", m.id")):
        columns = [f.column for f in model._meta.concrete_fields]
        sql = (
            f"SELECT {', '.join(f't.{c}' for c in columns)}, {users}{extra} "  # noqa: S608
            f"FROM {model._meta.db_table} t JOIN {user_model._meta.db_table} u ON u.id = t.user_id"
            + (
                f" JOIN {agents} a ON a.id = t.agent_id"
                if model is AgentToken
                else f" LEFT JOIN {machines} m ON m.user_id = u.id"
            )
            + " WHERE t.key = %s"
        )
        lookups.append((model, sql, len(columns)))
    return tuple(lookups)


def _by_user_key(key: str) -> Any:
    """The agent's or person's key row of ``key`` with its user, by hand-written SQL:
    every authenticated request asks it, and a queryset with a join compiles its SQL
    on every call."""
    user_model = get_user_model()
    machine_token = user_model._meta.get_field("machine_token")
    for model, sql, width in _lookup_sql():
        with connection.cursor() as cursor:
            cursor.execute(sql, [key])
            row = cursor.fetchone()
            if row is None:
                continue
            columns = tuple(d[0] for d in cursor.description)
        (found,) = from_rows(model, columns[:width], [row[:width]])
        end = width + len(user_model._meta.concrete_fields)
        (found.user,) = from_rows(user_model, columns[width:end], [row[width:end]])
        if model is AgentToken:
            # An agent's key sees its agent's team only, whoever the owner is.
            bind_to_agent_team(found.user, row[end])
        elif row[end] is None:
            # Known not to be a machine's service user: core.roles asks, and need not query.
            machine_token.set_cached_value(found.user, None)
        return found
    return None


def user_and_token(key: str) -> tuple[Any, Any] | None:
    """(user, token row) for a key of either kind, or None (unknown key or inactive user)."""
    # Checked before the lookup: a NUL or a surrogate would break the query itself.
    if not key or len(key) > KEY_LENGTH or not (key.isascii() and key.isprintable()):
        return None
    found = _by_user_key(key)
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


def run_task(auth: Any) -> str | None:
    """The task a run's credential was started for, or None (any other credential)."""
    task = getattr(auth, "run_task_id", None)
    return task if isinstance(task, str) else None


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
            return None  # a run's credential: boardmcp.auth.RunAuthentication
        if header and header[0].lower() == b"bearer":
            # /mcp/ takes it; here it was "not provided", which sent people looking.
            raise exceptions.AuthenticationFailed(BEARER)
        return super().authenticate(request)

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        found = user_and_token(key)
        if found is None:
            raise exceptions.AuthenticationFailed(UNKNOWN_KEY)
        return found
