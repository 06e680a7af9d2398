"""Machine tokens: the credentials of remote worker hosts (writer of ``machine_tokens``).

A remote worker holds a URL and a key, never the database. The key's hash is
stored; the key itself is returned once, by :func:`mint`.
"""

from __future__ import annotations

import binascii
import hashlib
import os
from collections.abc import Iterable, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from core import authors, beats, registry, storage
from core.errors import ValidationFailed
from core.models import Agent, Heartbeat, MachineToken

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
        user = user_model(username=f"{authors.MACHINE_PREFIX}{key_hash(key)[:16]}", is_staff=False)
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
    registry.forget_health([a.id for a in agents])
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


def hosts_running(agent_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Where each of ``agent_ids`` bound to a live machine token runs: ``{agent_id:
    {host, seen_at, live}}``, ``seen_at`` the token's worker's last beat (None: no
    worker has connected with it), ``live`` whether that beat is within
    ``CLAWBOO_HEALTH_BEAT_STALE_MS``. An agent absent from the answer runs on the
    server's own workers. Of several live tokens, the one seen last. Two queries,
    whatever the number of agents."""
    bindings = MachineToken.agents.through.objects.filter(
        agent_id__in=list(agent_ids), machinetoken__revoked_at__isnull=True
    ).values_list("agent_id", "machinetoken_id", "machinetoken__host")
    found = list(bindings)
    if not found:
        return {}
    # A remote worker's beat row is named "<host>:<pid>#<token id>" (core.beats).
    seen: dict[int, Any] = {}
    for instance, at in Heartbeat.objects.filter(part=beats.REMOTE_PART).values_list(
        "instance", "beat_at"
    ):
        tail = instance.rpartition("#")[2]
        if tail.isdigit() and (int(tail) not in seen or at > seen[int(tail)]):
            seen[int(tail)] = at
    answer: dict[str, dict[str, Any]] = {}
    for agent_id, token_id, host in found:
        last = seen.get(token_id)
        mine = answer.get(agent_id)
        if mine is None or (
            last is not None and (mine["seen_at"] is None or last > mine["seen_at"])
        ):
            answer[agent_id] = {"host": host, "seen_at": last}
    fresh = timezone.now() - beats.stale_after(beats.REMOTE_PART)
    for place in answer.values():
        place["live"] = place["seen_at"] is not None and place["seen_at"] >= fresh
    return answer
