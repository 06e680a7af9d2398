"""Periodic work, all of it on one scheduler: django-q2's.

Each job is a row of :data:`PERIODIC` (a name, the dotted function a q2 worker
runs, how many minutes apart); :func:`register` writes them as django-q2
``Schedule`` rows, matched by name, so any deployment that runs a ``qcluster`` runs
them — ``clawboo up`` and docs/operating.md's separate commands alike, with no
private timer anywhere. It runs after every ``migrate`` and whenever a q2 worker starts, so
a changed setting takes effect at the next restart. Adding a job is adding a row.

django-q2 schedules in whole minutes and its scheduler looks every 30 s: an
interval setting finer than a minute is rounded up to one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone
from django_q.models import Schedule

from board.store import release_lapsed_leases, release_stale
from board.store import steps as steps_store
from boardmcp.credentials import prune_void_run_credentials
from core import retention, storage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Periodic:
    name: str
    func: str
    minutes: Callable[[], float]  # rounded up to whole minutes, at least one


PERIODIC: tuple[Periodic, ...] = (
    # Proves the cluster's scheduler and a worker both run (/healthz).
    Periodic("clawboo.qcluster-beat", "core.beats.beat_qcluster", lambda: 1),
    # Queues due notification deliveries: retries, and rows a dead worker left.
    Periodic("clawboo.notify-send-due", "ops.notify.send_due", lambda: 1),
    # Releases in_progress tasks that stopped beating, or whose lease lapsed.
    Periodic(
        "clawboo.stale-sweep",
        "ops.periodic.stale_sweep",
        lambda: settings.CLAWBOO_BOARD_STALE_SWEEP_MS / 60_000,
    ),
    # Bounded history, and the credentials of runs that died without revoking them.
    Periodic(
        "clawboo.prune", "ops.periodic.prune", lambda: retention.PRUNE_EVERY.total_seconds() / 60
    ),
    # Remote workers' submissions whose intake died half-way are taken in again.
    Periodic("clawboo.intake-recover", "executor.intake.recover_intakes", lambda: 1),
    # Approvals whose landing a killed process left half-way are settled (completed
    # or rolled back), so the board and the repository agree with nobody approving.
    Periodic("clawboo.landing-recover", "ops.periodic.recover_landings", lambda: 1),
    # Merge queues drain: approvals waiting, tasks back from a fix round, and a batch
    # a killed job left open (settled: the base at the old tip or the new one).
    Periodic("clawboo.merge-queue", "executor.merge_queue.drain_all", lambda: 1),
    # Pull requests on the repositories' forges: opened where review could not open
    # one, and refreshed (checks, reviews, merged or closed) where no webhook arrives.
    Periodic(
        "clawboo.forge-poll",
        "worktrees.pull_requests.poll",
        lambda: settings.CLAWBOO_FORGE_POLL_S / 60,
    ),
    # Task approvals nobody answered within CLAWBOO_APPROVAL_TTL_MS become expired.
    Periodic("clawboo.approval-expiry", "ops.periodic.expire_approvals", lambda: 1),
)


def stale_sweep() -> int:
    """The stale sweep as a scheduled job, then the lapse sweep: how many tasks they
    released. One job for both: each releases a claim whose owner is gone, on the
    same interval; stale first, so a task both stale and lapsed counts as before."""
    released = release_stale()
    if released:
        log.info("stale sweep: released %d task(s)", len(released))
    lapsed = release_lapsed_leases()
    if lapsed:
        log.info("lease sweep: released %d task(s) whose lease lapsed", len(lapsed))
    return len(released) + len(lapsed)


def expire_approvals() -> int:
    """The approval expiry as a scheduled job: how many approvals it expired."""
    from board.store import expire_unanswered

    expired = expire_unanswered()
    if expired:
        log.info("approvals: expired %d unanswered approval(s)", len(expired))
    return len(expired)


def recover_landings() -> int:
    """The landing recovery as a scheduled job: how many landings it settled. Each
    repository's landing lock is taken first, so a landing this host runs is waited
    for, never judged dead; another host's only once it is long past
    (:func:`worktrees.service.settled_here_now`)."""
    from worktrees.service import recover_landings as settle
    from worktrees.service import settled_here_now

    settled = settle(settled_here_now)
    if settled:
        log.info("landings: settled %d interrupted landing(s)", len(settled))
    return len(settled)


def prune() -> dict[str, int]:
    """The hourly prune as a scheduled job: what it deleted."""
    report = retention.prune().as_dict()
    report["run_credentials"] = prune_void_run_credentials()
    keep = retention.retention()
    if keep is not None:  # the runs' steps go with the history (their logs do too)
        report["run_steps"] = steps_store.prune_before(timezone.now() - keep)
    return report


def register(jobs: tuple[Periodic, ...] = PERIODIC) -> list[str]:
    """Write every job as a django-q2 schedule (idempotent): a missing one is created
    due now, an existing one gets its current function and interval, and a duplicate
    a concurrent registration left is deleted. Returns the names."""

    def run() -> list[str]:
        for job in jobs:
            rows = list(Schedule.objects.filter(name=job.name).order_by("pk"))
            fields: dict[str, Any] = {
                "func": job.func,
                "schedule_type": Schedule.MINUTES,
                "minutes": max(1, math.ceil(job.minutes())),
                "repeats": -1,
            }
            if not rows:
                Schedule.objects.create(name=job.name, next_run=timezone.now(), **fields)
                continue
            Schedule.objects.filter(pk=rows[0].pk).update(**fields)
            Schedule.objects.filter(pk__in=[r.pk for r in rows[1:]]).delete()
        return [job.name for job in jobs]

    return storage.write(run)


def register_quietly(**_: Any) -> None:
    """:func:`register` from a signal: a failure is logged, never raised (a worker that
    cannot write the schedules still works; the rows from the last migrate stand)."""
    try:
        register()
    except Exception:
        log.exception("could not register the periodic schedules")
