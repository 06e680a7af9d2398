"""Heartbeats of the long-running parts (the only writer of ``heartbeats``).

Each part of ``clawboo up`` that loops — the routines ticker, the executor
workers, the django-q2 cluster — records a beat per process every
``CLAWBOO_BEAT_MS``; ``/healthz`` reads the newest beat of each part. A part that
stops cleanly takes its row away (:meth:`Beater.stop`), so health turns at once
instead of after the staleness window; one that is killed simply stops beating.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import time
from typing import Any

from django.conf import settings
from django.db.models import Max, Q
from django.utils import timezone

from core import reconnect, storage
from core.models import Heartbeat

log = logging.getLogger(__name__)

# Rows of processes that died without a clean stop are dropped after this long.
FORGET_AFTER = dt.timedelta(days=1)
# The cluster beats from a minutely django-q2 schedule, which its scheduler looks at
# every 30 s: a beat may be 90 s apart without anything being wrong.
QCLUSTER_MIN_STALE = dt.timedelta(minutes=3)


def stale_after(part: str) -> dt.timedelta:
    """How long a beat of ``part`` stays fresh (``CLAWBOO_HEALTH_BEAT_STALE_MS``, longer
    for the cluster): the one rule ``/healthz`` and the admin's Heartbeats list read."""
    window = dt.timedelta(milliseconds=settings.CLAWBOO_HEALTH_BEAT_STALE_MS)
    return max(window, QCLUSTER_MIN_STALE) if part == "qcluster" else window


def stale_since(part: str, beat_at: dt.datetime) -> dt.datetime:
    """When a beat of ``part`` made at ``beat_at`` went (or goes) stale."""
    return beat_at + stale_after(part)


def stale_beats(now: dt.datetime, *, stale: bool = True) -> Q:
    """The beats stale at ``now`` (``stale=False``: the fresh ones), as a filter."""
    cluster = Q(part="qcluster")
    old = (cluster & Q(beat_at__lt=now - stale_after("qcluster"))) | (
        ~cluster & Q(beat_at__lt=now - stale_after(""))
    )
    return old if stale else ~old


def beat_interval_s() -> float:
    return float(settings.CLAWBOO_BEAT_MS) / 1000.0


def instance_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def beat(part: str, *, started_at: dt.datetime | None = None) -> None:
    """Record that ``part`` is alive in this process, now."""
    at = timezone.now()
    lost_at, back_at = reconnect.last_outage()
    seen = {"db_lost_at": lost_at, "db_back_at": back_at}
    born = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": started_at or at}
    _record(part, instance_name(), at, seen, born)


REMOTE_PART = "remote-worker"
# Every part that beats: the workers (executor.workers), the ticker (routines.ticker),
# the django-q2 cluster (beat_qcluster) and remote worker hosts (beat_remote).
PARTS = ("qcluster", REMOTE_PART, "ticker", "workers")


def beat_remote(token_id: int, host: str, pid: int, detail: dict[str, Any]) -> None:
    """A remote worker (``clawboo worker``) is alive, says its machine token's host.

    The instance carries the token's id: a host's beats are its own token's rows,
    whatever another token claims to be."""
    at = timezone.now()
    born = {"host": host, "pid": pid, "started_at": at}
    _record(REMOTE_PART, f"{host}:{pid}#{token_id}", at, {"detail": detail}, born)


def _record(
    part: str, instance: str, at: dt.datetime, seen: dict[str, Any], born: dict[str, Any]
) -> None:
    """One row per (part, instance): its beat moved to ``at`` with ``seen``, or a row
    made for a new process (``born``: its host, pid and start)."""

    def run() -> None:
        rows = Heartbeat.objects.filter(part=part, instance=instance)
        if rows.update(beat_at=at, **seen):
            return
        Heartbeat.objects.create(part=part, instance=instance, beat_at=at, **seen, **born)
        # A new process of this part: forget the long-dead ones.
        Heartbeat.objects.filter(part=part, beat_at__lt=at - FORGET_AFTER).delete()

    storage.write(run)


def remote_workers(since: dt.datetime) -> list[dict[str, Any]]:
    """The remote workers that beat since ``since``, newest first."""
    rows = Heartbeat.objects.filter(part=REMOTE_PART, beat_at__gte=since).order_by("-beat_at")
    return [
        {
            "host": row.host,
            "instance": row.instance,
            "beat_at": row.beat_at.isoformat(),
            "agents": row.detail.get("agents", []),
            "running": row.detail.get("running", []),
        }
        for row in rows
    ]


def forget(part: str) -> None:
    """This process's ``part`` stopped cleanly: its beat no longer counts."""
    instance = instance_name()
    storage.write(lambda: Heartbeat.objects.filter(part=part, instance=instance).delete())


def last_beats() -> dict[str, dt.datetime]:
    """The newest beat of each part, over every host and process."""
    rows = Heartbeat.objects.values("part").annotate(last=Max("beat_at"))
    return {row["part"]: row["last"] for row in rows}


def last_outages() -> dict[str, tuple[dt.datetime, dt.datetime | None]]:
    """Per part, the newest database loss any of its processes reported, and when
    that process got the database back (None: not yet, as far as it said)."""
    found: dict[str, tuple[dt.datetime, dt.datetime | None]] = {}
    for row in Heartbeat.objects.filter(db_lost_at__isnull=False).order_by("db_lost_at"):
        assert row.db_lost_at is not None
        found[row.part] = (row.db_lost_at, row.db_back_at)
    return found


def beat_qcluster() -> None:
    """The django-q2 cluster's beat, run as a scheduled task (``ops`` keeps the
    schedule): it proves the cluster's scheduler and a worker both run."""
    beat("qcluster")


class Beater:
    """A loop's heartbeat: :meth:`maybe_beat` from the loop records at most one beat
    per interval, and never raises (a beat that cannot be written must not stop
    the loop it reports on; the next interval tries again)."""

    def __init__(self, part: str, *, interval_s: float | None = None) -> None:
        self.part = part
        self.interval_s = beat_interval_s() if interval_s is None else interval_s
        self.started_at = timezone.now()
        self._last = float("-inf")

    def maybe_beat(self) -> None:
        if time.monotonic() - self._last < self.interval_s:
            return
        # Stamped before trying: a database that is down is asked once an interval.
        self._last = time.monotonic()
        try:
            beat(self.part, started_at=self.started_at)
        except Exception as exc:
            if reconnect.is_unavailable(exc):
                # The loop's own Outage says it once; a broken connection must
                # not outlive the outage (the next beat opens a new one).
                reconnect.drop()
                log.debug("could not record the %s heartbeat", self.part, exc_info=True)
            else:
                log.exception("could not record the %s heartbeat", self.part)

    def stop(self) -> None:
        try:
            forget(self.part)
        except Exception:
            log.exception("could not withdraw the %s heartbeat", self.part)
