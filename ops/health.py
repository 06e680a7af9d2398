"""``GET /healthz``: is this deployment able to do its job, and if not, which part
is failing. No authentication needed (a load balancer or an uptime probe reads
it), and then nothing but each part's status: the agents part's lists and the
remote workers (agents, hosts, paths) are for staff or the metrics token
(:func:`sees_details`, GOVERNANCE §6).

Parts: the database (reachable, every migration applied), the channel layer (a
message sent to a fresh channel comes back) and the newest heartbeat of each
long-running part that beats (:mod:`core.beats`; the ones required are
``CLAWBOO_HEALTH_PARTS``). The answer is 200 when every part is ok, else 503
with ``failing`` naming the parts. The ``agents`` part lists the unhealthy (and
paused) agents; it is ok when none is unhealthy, and it never fails the
deployment: a broken agent claims nothing, the board itself still works.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from core import beats, reconnect, storage
from core.models import Agent, AgentState

CHANNEL_TIMEOUT_S = 2.0

# Once every migration is applied, this process need not load the graph again: a
# newer release means a newer process.
_migrated = False


@dataclass(frozen=True)
class PartHealth:
    name: str
    ok: bool
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "detail": self.detail, **self.extra}


def check_database() -> PartHealth:
    global _migrated
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        if not _migrated:
            executor = MigrationExecutor(connection)
            pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
            if pending:
                return PartHealth("database", False, f"{len(pending)} migration(s) not applied")
            _migrated = True
    except Exception as exc:
        # A broken connection is not kept for the next probe: it opens a new one.
        reconnect.drop()
        return PartHealth("database", False, f"unreachable: {type(exc).__name__}")
    return PartHealth("database", True, f"{connection.vendor}, migrated")


async def check_channel_layer() -> PartHealth:
    layer = get_channel_layer()
    if layer is None:
        return PartHealth("channels", False, "no channel layer configured")
    kind = type(layer).__name__
    try:
        channel = await layer.new_channel("healthz")
        token = secrets.token_hex(8)
        await layer.send(channel, {"type": "healthz.ping", "token": token})
        message = await asyncio.wait_for(layer.receive(channel), CHANNEL_TIMEOUT_S)
    except TimeoutError:
        return PartHealth("channels", False, f"{kind}: no answer in {CHANNEL_TIMEOUT_S:g} s")
    except Exception as exc:
        return PartHealth("channels", False, f"{kind}: {type(exc).__name__}")
    if message.get("token") != token:
        return PartHealth("channels", False, f"{kind}: a different message came back")
    return PartHealth("channels", True, f"{kind}: round trip ok")


def check_beats(now: dt.datetime | None = None) -> list[PartHealth]:
    """One result per required part: ok when its newest beat is fresh enough."""
    at = now or timezone.now()
    try:
        last = beats.last_beats()
        outages = beats.last_outages()
    except Exception as exc:
        return [
            PartHealth(part, False, f"heartbeats unreadable: {type(exc).__name__}")
            for part in settings.CLAWBOO_HEALTH_PARTS
        ]
    found = []
    for part in settings.CLAWBOO_HEALTH_PARTS:
        beat_at = last.get(part)
        if beat_at is None:
            found.append(PartHealth(part, False, "not running: no heartbeat"))
            continue
        age = (at - beat_at).total_seconds()
        limit = beats.stale_after(part)
        said, extra = _outage(outages.get(part))
        if age > limit.total_seconds():
            found.append(
                PartHealth(part, False, f"last beat {age:.0f} s ago (limit {limit}){said}", extra)
            )
        else:
            found.append(PartHealth(part, True, f"last beat {max(age, 0):.1f} s ago{said}", extra))
    return found


def _outage(
    outage: tuple[dt.datetime, dt.datetime | None] | None,
) -> tuple[str, dict[str, Any]]:
    """What a part said of its last database loss: a clause for the detail and the
    timestamps (``db_lost_at``, ``db_back_at``: null while it was still down)."""
    if outage is None:
        return "", {}
    lost, back = outage
    extra = {"db_lost_at": lost.isoformat(), "db_back_at": back.isoformat() if back else None}
    if back is None:
        return f"; database lost at {lost:%Y-%m-%d %H:%M:%S}Z, not back", extra
    down = (back - lost).total_seconds()
    return f"; database lost at {lost:%Y-%m-%d %H:%M:%S}Z, back after {down:.1f} s", extra


@dataclass(frozen=True)
class AgentsHealth(PartHealth):
    unhealthy: tuple[dict[str, Any], ...] = ()
    paused: tuple[dict[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "unhealthy": list(self.unhealthy), "paused": list(self.paused)}


def check_agents() -> AgentsHealth:
    """The agents whose last preflight failed, and the paused ones."""
    rows = Agent.objects.filter(health_ok=False) | Agent.objects.filter(state=AgentState.PAUSED)
    unhealthy, paused = [], []
    for agent in rows.order_by("id"):
        if agent.state == AgentState.PAUSED:
            paused.append({"id": agent.id, "team": agent.team_id, "reason": agent.state_reason})
        else:
            unhealthy.append(
                {
                    "id": agent.id,
                    "team": agent.team_id,
                    "detail": agent.health_detail,
                    "checked_at": agent.health_checked_at.isoformat()
                    if agent.health_checked_at
                    else None,
                }
            )
    detail = f"{len(unhealthy)} unhealthy, {len(paused)} paused"
    return AgentsHealth(
        "agents", not unhealthy, detail, unhealthy=tuple(unhealthy), paused=tuple(paused)
    )


def _sync_parts() -> list[PartHealth]:
    database = check_database()
    if not database.ok:
        # Beats live in the database: say so once, under the part that failed.
        return [database]
    return [database, *check_beats(), check_agents()]


def _remote_workers() -> list[dict[str, Any]]:
    """Remote workers seen within the staleness window: host, last beat, what they run."""
    try:
        since = timezone.now() - beats.stale_after(beats.REMOTE_PART)
        return beats.remote_workers(since)
    except Exception:
        return []  # the database part already says why


async def run_checks() -> list[PartHealth]:
    parts = await sync_to_async(_sync_parts, thread_sensitive=True)()
    return [*parts, await check_channel_layer()]


def sees_details(request: HttpRequest) -> bool:
    """Health is not a directory (GOVERNANCE §6): agents, hosts and paths are for a
    staff person (a session, or their own ``Authorization: Token``) or the metrics
    token; anyone else gets each part's status."""
    from core.api.auth import user_and_token
    from core.roles import principal_of
    from ops.metrics import may_scrape

    if may_scrape(request):  # a staff session, or the metrics bearer token
        return True
    given = request.headers.get("Authorization", "")
    if given.startswith("Token "):
        found = user_and_token(given.removeprefix("Token ").strip())
        if found is not None:
            principal = principal_of(*found)
            return principal.kind == "person" and principal.staff
    return False


def public_part(part: PartHealth) -> dict[str, Any]:
    """A part as anyone may see it: whether it is ok, and a detail that names no
    agent, host or path (counts, ages, the outage's times)."""
    body = PartHealth.as_dict(part)
    return {key: value for key, value in body.items() if key in _PUBLIC_KEYS}


_PUBLIC_KEYS = frozenset({"ok", "detail", "db_lost_at", "db_back_at"})


@never_cache
@require_GET
async def healthz(request: HttpRequest) -> JsonResponse:
    parts = await run_checks()
    failing = [part.name for part in parts if not part.ok and part.name != "agents"]
    staff = await sync_to_async(sees_details, thread_sensitive=True)(request)
    body: dict[str, Any] = {
        "status": "failing" if failing else "ok",
        "failing": failing,
        "parts": {part.name: part.as_dict() if staff else public_part(part) for part in parts},
    }
    if staff:
        # Informational: a remote worker going away fails nothing (its leases lapse).
        body["remote_workers"] = await sync_to_async(_remote_workers, thread_sensitive=True)()
        # This process's PostgreSQL connection pool (null: none, as on SQLite).
        body["db_pool"] = await sync_to_async(storage.pool_stats, thread_sensitive=True)()
    return JsonResponse(body, status=503 if failing else 200)
