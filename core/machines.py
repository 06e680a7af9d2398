"""Machine tokens: the credentials of remote worker hosts (writer of ``machine_tokens``).

A remote worker holds a URL and a key, never the database. The key's hash is
stored; the key itself is returned once, by :func:`mint`.
"""

from __future__ import annotations

import binascii
import hashlib
import os
from collections.abc import Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from core import registry, storage
from core.errors import ValidationFailed
from core.models import Agent, MachineToken

# Every key this product mints (user, agent and machine keys): 160 random bits as hex.
KEY_LENGTH = 40


def new_key() -> str:
    return binascii.hexlify(os.urandom(KEY_LENGTH // 2)).decode()


def key_hash(key: str) -> str:
    # A plain digest is enough: the key is 160 random bits, not a guessable password.
    return hashlib.sha256(key.encode()).hexdigest()


def mint(host: str, agent_ids: Sequence[str], created_by: Any = None) -> tuple[MachineToken, str]:
    """A new token for ``host`` bound to ``agent_ids``, and its key (shown once)."""
    host = host.strip()
    if not host or len(host) > 200:
        raise ValidationFailed("host", "a host name of 1 to 200 characters")
    if not agent_ids:
        raise ValidationFailed("agent", "bind the token to at least one agent")
    agents = list(Agent.objects.filter(pk__in=list(agent_ids)))
    missing = sorted(set(agent_ids) - {a.id for a in agents})
    if missing:
        raise ValidationFailed("agent", f"no agent {missing[0]!r} in the registry")
    key = new_key()

    def run() -> MachineToken:
        user_model = get_user_model()
        user = user_model(username=f"machine-{key_hash(key)[:16]}", is_staff=False)
        user.set_unusable_password()
        user.save()
        token = MachineToken.objects.create(
            host=host, key_hash=key_hash(key), prefix=key[:8], user=user, created_by=created_by
        )
        token.agents.set(agents)
        return token

    token = storage.write(run)
    # Acting as an agent needs seeing its team; seeing any other team it must not.
    for team_id in sorted({a.team_id for a in agents}):
        registry.add_member(team_id, token.user)
    return token, key


def revoke(token_id: int) -> bool:
    """Revoke a token; False when it was revoked already (or does not exist)."""
    return bool(
        storage.write(
            lambda: MachineToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(
                revoked_at=timezone.now()
            )
        )
    )


def by_key(key: str) -> MachineToken | None:
    """The live (unrevoked) token of a key, with its user."""
    return (
        MachineToken.objects.select_related("user")
        .filter(key_hash=key_hash(key), revoked_at__isnull=True)
        .first()
    )


def bound_agent_ids(token: MachineToken) -> frozenset[str]:
    # Cached on the row: one request asks more than once (claim, then settle).
    cached = getattr(token, "_bound_ids", None)
    if cached is None:
        cached = frozenset(token.agents.values_list("id", flat=True))
        token._bound_ids = cached  # type: ignore[attr-defined]
    return cached
