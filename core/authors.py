"""Who signed it: one namespace for authors (GOVERNANCE §6).

A comment, a chat line and the narration name their author by a bare name: a
person's username, an agent's id, or the server's own names (:data:`SERVER_AUTHORS`:
the narrator, the forge). The board, the @-mentions, the notifications and the
narration read that name as one author, so no two kinds may share it: an agent
registered as a person's username (or as ``clawboo``) signed its comments and chat
lines as that person (or as the server's narration), and was @-mentioned with them.

The rule is kept where names are made: a new agent's id may be no username and no
server name (409 ``conflict``, nothing written), and a new username may be no agent's
id and no server name (the user model's own validation: the admin's forms,
``createsuperuser``). Names are compared without case (``Bob`` reads as ``bob``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

NARRATOR = "clawboo"  # the team chat's narration, the server's own comments
FORGE = "forge"  # what a forge's review said, as the server took it in
SERVER_AUTHORS: frozenset[str] = frozenset({NARRATOR, FORGE})


# A remote host's machine token authenticates as a service user named
# ``machine-<hash>`` (core.machines): its comments and chat lines are signed so, which
# nobody can forge and nobody can read. People read them as the host's name, marked:
# a host's name is free text (it may be a person's username), but no username nor
# agent id holds a space or a parenthesis (Django's username rule, core.checks.check_id),
# so "<host> (host)" can name no person and no agent.
MACHINE_PREFIX = "machine-"
HOST_MARK = " (host)"


def shown_names(names: Iterable[str | None]) -> dict[str, str]:
    """How people read each of ``names`` that differs from the signature: a machine
    user's as its host's name, marked (one query, and none without a machine user)."""
    wanted = {name for name in names if name and name.startswith(MACHINE_PREFIX)}
    if not wanted:
        return {}
    from core.models import MachineToken

    rows = MachineToken.objects.filter(user__username__in=wanted)
    return {user: f"{host}{HOST_MARK}" for user, host in rows.values_list("user__username", "host")}


def shown_name(name: str | None) -> str | None:
    """One author as people read it (:func:`shown_names`)."""
    return shown_names([name]).get(name, name) if name else name


def with_shown_authors(rows: list[dict[str, Any]], key: str = "author") -> list[dict[str, Any]]:
    """``rows`` each with ``<key>_name``: their author as people read it."""
    shown = shown_names(row.get(key) for row in rows)
    for row in rows:
        row[f"{key}_name"] = shown.get(row.get(key) or "", row.get(key))
    return rows


def agent_id_taken(agent_id: str) -> str | None:
    """Why ``agent_id`` may not name a new agent (it would sign as another author), or
    None."""
    from django.contrib.auth import get_user_model

    if agent_id.lower() in SERVER_AUTHORS:
        return f"{agent_id!r} is the server's own name"
    user = get_user_model().objects.filter(username__iexact=agent_id).first()
    if user is not None:
        return f"{agent_id!r} is the username of {user.get_username()!r}"
    return None


def username_taken(username: str) -> str | None:
    """Why ``username`` may not name a new person (or a renamed one), or None."""
    from core.models import Agent

    if username.lower() in SERVER_AUTHORS:
        return f"{username!r} is the server's own name"
    agent = Agent.objects.filter(pk__iexact=username).values_list("pk", flat=True).first()
    if agent is not None:
        return f"{username!r} is the id of agent {agent!r}"
    return None


def validate_username(value: Any) -> None:
    """The user model's username validator (:func:`install`)."""
    from django.contrib.auth import get_user_model
    from django.core.exceptions import ValidationError

    if not isinstance(value, str):
        return
    if get_user_model().objects.filter(username=value).exists():
        # A person's own name, unchanged (saving them again, say to deactivate them,
        # is never refused for a pair made before this rule); a new user taking it
        # meets the field's own uniqueness.
        return
    why = username_taken(value)
    if why is not None:
        raise ValidationError(
            f"{why}: comments and chat name people and agents alike, so a person may not take it",
            code="author_taken",
        )


def install() -> None:
    """Add :func:`validate_username` to the user model's username field (once), so
    every form and command that validates a user asks it."""
    from django.contrib.auth import get_user_model
    from django.db.models import Field

    field = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD)
    if isinstance(field, Field) and validate_username not in field.validators:
        field.validators.append(validate_username)
