"""Crash and abandonment recovery: the boot-time orphan pass, the stale sweep and
the lapse sweep.

Each pass is one ``BEGIN IMMEDIATE`` write transaction. ``tasks.updated_at`` is the
liveness signal: a worker heartbeats it every 30 s while it owns a task. Two signals,
two sweeps: *stale* (the task stopped beating and still has a running execution)
and *lapsed* (its lease ran out, with or without a run) -- a claim whose run was
never opened, or was closed without the task being settled, has no running
execution, so only its lease's lapse says its owner is gone.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from board.models import ExecutionProcess, ExecutionStatus, Task
from board.store._base import now
from board.store.claims import abandon, release_lapsed
from board.transitions import Status
from core import storage

log = logging.getLogger(__name__)

ORPHAN_ERROR = "orphaned: process not alive on restart"
STALE_ERROR = "stale: no heartbeat within the watchdog window"


def stale_ttl() -> dt.timedelta:
    return dt.timedelta(milliseconds=settings.CLAWBOO_BOARD_STALE_TTL_MS)


def release_stale(ttl: dt.timedelta | None = None) -> list[str]:
    """Release in_progress tasks that stopped beating and still have a running execution.

    The execution is closed ``timed_out``; the task goes back to ``todo``
    (``abandonments += 1``), or to ``blocked`` at the third abandonment.
    """
    window = ttl if ttl is not None else stale_ttl()

    def run() -> list[str]:
        at = now()
        running = ExecutionProcess.objects.filter(
            status=ExecutionStatus.RUNNING, task_id__isnull=False
        ).values("task_id")
        qs = Task.objects.filter(
            status=Status.IN_PROGRESS, updated_at__lt=at - window, pk__in=running
        ).order_by("updated_at")
        if connection.features.has_select_for_update:
            qs = qs.select_for_update(skip_locked=True)
        return [abandon(task, at, reason=STALE_ERROR).id for task in qs]

    return storage.write(run)


def release_lapsed_leases() -> list[str]:
    """Release in_progress tasks whose lease ran out, without waiting for a claim.

    The claim path releases the lapsed leases its candidates need (so a claim never
    waits for this sweep); this pass is for the tasks no claim comes for -- the only
    agent that could take them is the one that died, or nobody claims on their route
    -- which would otherwise show ``in_progress`` under a dead lease indefinitely.
    Both go through :func:`board.store.claims.release_lapsed`: the same wording
    ("lease lapsed", :data:`ops.metrics.LEASE_LAPSED`), abandonment count and
    ``released``/``blocked`` event, under the same row locks (``SKIP LOCKED`` on
    PostgreSQL, re-checking the lapse on the locked row), so a claim or a renewal
    racing the sweep is either seen finished or skipped, and a second pass is a no-op.
    """
    return storage.write(lambda: [task.id for task in release_lapsed(now())])


def reconcile_orphans(ttl: dt.timedelta | None = None) -> list[str]:
    """Boot pass: reap ``running`` executions whose task stopped beating.

    A still-beating row belongs to a live process (another server on the same
    state dir, or a fast restart's drains) and is spared. Each reaped row is
    marked ``failed`` with a ``recovery_tombstone`` so a second pass is a no-op,
    and its task, if still in_progress, is released for a fresh claim.
    """
    window = ttl if ttl is not None else stale_ttl()

    def run() -> list[str]:
        at = now()
        rows = ExecutionProcess.objects.filter(
            status=ExecutionStatus.RUNNING,
            recovery_tombstone__isnull=True,
            task__updated_at__lt=at - window,
        ).select_related("task")
        if connection.features.has_select_for_update:
            rows = rows.select_for_update(of=("self",))
        released: list[str] = []
        for row in rows:
            row.status = ExecutionStatus.FAILED
            row.error = ORPHAN_ERROR
            row.finished_at = at
            row.recovery_tombstone = f"reaped at {at.isoformat()}"
            row.save(update_fields=["status", "error", "finished_at", "recovery_tombstone"])
            task = Task.objects.get(pk=row.task_id)
            if task.status == Status.IN_PROGRESS and task.id not in released:
                abandon(task, at, reason=ORPHAN_ERROR)
                released.append(task.id)
        return released

    return storage.write(run)


@dataclass(frozen=True)
class RecoveryPass:
    run: Callable[[], list[str]]
    # The admin's button for it; the command's flag help says it too.
    label: str
    about: str


# The recovery passes by the name an operator asks for (API, admin, command), in order.
RECOVERY_PASSES: dict[str, RecoveryPass] = {
    "orphans": RecoveryPass(
        reconcile_orphans,
        "Run orphan reconciliation",
        "fail running executions whose task stopped beating",
    ),
    "stale": RecoveryPass(
        release_stale,
        "Run stale sweep",
        "release in_progress tasks past the TTL with a running execution",
    ),
    "lapsed": RecoveryPass(
        release_lapsed_leases,
        "Release lapsed leases",
        "release in_progress tasks whose lease ran out",
    ),
}


def run_boot_passes() -> dict[str, list[str]]:
    """Orphans, stale, lapsed, best-effort: a failure is logged and never blocks boot."""
    result: dict[str, list[str]] = {name: [] for name in RECOVERY_PASSES}
    for name, recovery in RECOVERY_PASSES.items():
        try:
            result[name] = recovery.run()
        except Exception:
            log.exception("board %s pass failed; continuing", name)
    return result
