"""The ticker: the stateless actuator over the ``scheduled_runs`` ledger.

It holds no durable state. One timer, armed at
``min(max(min_next_run − now, 0), 60 s)``; each tick runs the due-pass, the
sequential claim phase and the concurrent dispatch phase, then re-arms against the
freshest ``min(next_run_at)``. Between ticks it polls the poke row every
``poke_interval`` so a routine written by any process re-arms it at once. Each step
is a method a test can call directly; dueness is always decided in SQL, so a
spurious or late wake is harmless, and two tickers over one database still fire
each slot once (the conditional claim UPDATE and ``routine_fires`` see to it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min
from django.utils import timezone as dj_timezone

from core import beats, events, reconnect, storage, wakeups
from routines import store as routine_store
from routines.models import Routine, RoutineStatus, sources_of

log = logging.getLogger(__name__)

MAX_ARM_MS = 60_000
POKE_INTERVAL_MS = 1_000
_TABLE = Routine._meta.db_table


@dataclass
class TickReport:
    queued: list[str] = field(default_factory=list)  # flipped idle → queued by this due-pass
    claimed: list[str] = field(default_factory=list)  # won by this ticker
    lost: list[str] = field(default_factory=list)  # someone else's: dropped, never retried


def dispatch_deadline_s() -> int:
    return int(settings.CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS) // 1000


FIRE_TASK = "routines.fire.run_fire"
# How long a won claim's enqueue waits out a database outage before it is left
# to boot-resume.
ENQUEUE_PATIENCE_S = 60.0


def enqueue_fire(routine_id: str) -> None:
    """Hand one claimed row to a django-q2 worker (inline when Q_CLUSTER sync is on)."""
    from django_q.tasks import async_task

    async_task(
        FIRE_TASK,
        routine_id,
        task_name=f"routine-{routine_id}",
        timeout=dispatch_deadline_s(),
    )


class Ticker:
    def __init__(
        self,
        *,
        clock: Callable[[], int] = routine_store.now_ms,
        enqueue: Callable[[str], None] | None = None,
        max_arm_ms: int = MAX_ARM_MS,
        poke_interval_ms: int = POKE_INTERVAL_MS,
    ) -> None:
        self.clock = clock
        self.enqueue = enqueue or enqueue_fire
        self.max_arm_ms = max_arm_ms
        self.poke_interval_ms = poke_interval_ms
        self.stop_event = threading.Event()
        self.beater = beats.Beater("ticker")

    # --- the steps -----------------------------------------------------------------

    def boot_resume(self) -> routine_store.BootResumeReport:
        report = routine_store.boot_resume()
        if report.requeued or report.rearmed or report.errored:
            log.info(
                "boot-resume: %d requeued, %d re-armed, %d errored",
                len(report.requeued),
                len(report.rearmed),
                len(report.errored),
            )
        return report

    def due_pass(self, now_ms: int | None = None) -> list[str]:
        """One ``UPDATE … RETURNING``: every due idle row → queued, slot recorded.

        Paused, errored and disarmed (next_run_at null) rows are excluded by the
        status and null guards.
        """
        at = self.clock() if now_ms is None else now_ms
        # The guard is the transition table's auto edge into queued (idle only).
        assert RoutineStatus.IDLE in sources_of(RoutineStatus.QUEUED)

        def run() -> list[str]:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {_TABLE} SET status = %s, fire_slot = next_run_at, "  # noqa: S608
                    "updated_at = %s WHERE status = %s AND next_run_at IS NOT NULL "
                    "AND next_run_at <= %s RETURNING id",
                    [RoutineStatus.QUEUED, dj_timezone.now(), RoutineStatus.IDLE, at],
                )
                return [row[0] for row in cursor.fetchall()]

        return storage.write(run)

    def claim_one(self, routine_id: str) -> bool:
        """``queued → claimed`` for one row, atomically; False = someone else's.

        A won claim records ``routine_fired`` in the same transaction and enqueues
        its dispatch after commit. A failing enqueue is logged and stops nothing
        else: the row stays ``claimed`` and boot-resume requeues it.
        """

        def run() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {_TABLE} SET status = %s, updated_at = %s "  # noqa: S608
                    "WHERE id = %s AND status = %s RETURNING team_id, fire_slot",
                    [RoutineStatus.CLAIMED, dj_timezone.now(), routine_id, RoutineStatus.QUEUED],
                )
                row = cursor.fetchone()
            if row is None:
                return False  # another ticker got there first: data, not an error
            events.append(row[0], "routine_fired", {"routine_id": routine_id, "slot_at": row[1]})
            transaction.on_commit(lambda: self._enqueue_patiently(routine_id), robust=True)
            return True

        return storage.write(run)

    def _enqueue_patiently(self, routine_id: str) -> None:
        """Hand the claimed row on, waiting out a database outage (the queue is a
        table too): an enqueue lost to it would leave the row ``claimed`` until
        the next boot-resume."""
        reconnect.patiently(
            lambda: self.enqueue(routine_id), f"ticker enqueue {routine_id}", ENQUEUE_PATIENCE_S
        )

    def claim_phase(self) -> tuple[list[str], list[str]]:
        """Claim every queued row, one at a time, each enqueued as its claim commits.
        Includes rows queued by run-now, by boot-resume or by a ticker that died
        after its due-pass. A crash between a claim and its enqueue leaves the row
        ``claimed``; boot-resume requeues it."""
        queued = list(
            Routine.objects.filter(status=RoutineStatus.QUEUED)
            .order_by("fire_slot", "id")
            .values_list("id", flat=True)
        )
        won: list[str] = []
        lost: list[str] = []
        for routine_id in queued:
            (won if self.claim_one(routine_id) else lost).append(routine_id)
        return won, lost

    def tick(self) -> TickReport:
        """Due-pass, then claim phase; each won claim's dispatch is enqueued on commit,
        so fires run concurrently in django-q2 workers and never block this loop."""
        report = TickReport()
        report.queued = self.due_pass()
        report.claimed, report.lost = self.claim_phase()
        return report

    def arm_delay_ms(self, now_ms: int | None = None) -> int:
        """``min(max(min_next_run − now, 0), max_arm)``: the clamp doubles as the
        periodic rescan for rows written elsewhere and for laptop sleep."""
        at = self.clock() if now_ms is None else now_ms
        if Routine.objects.filter(status=RoutineStatus.QUEUED).exists():
            return 0
        soonest = Routine.objects.filter(
            status=RoutineStatus.IDLE, next_run_at__isnull=False
        ).aggregate(m=Min("next_run_at"))["m"]
        if soonest is None:
            return self.max_arm_ms
        return min(max(soonest - at, 0), self.max_arm_ms)

    # --- the loop ------------------------------------------------------------------

    def marks(self) -> tuple[int, int]:
        """Where the pokes stand now (this process's wake count, the poke row's
        sequence): :meth:`wait` counts a poke from here."""
        return wakeups.seen(wakeups.ROUTINES), routine_store.poke_seq()

    def wait(self, delay_ms: int, marks: tuple[int, int] | None = None) -> str:
        """Sleep until the timer fires, a poke arrives or stop is asked; say which.

        A poke wakes it at once (:mod:`core.wakeups`); the poke row is still
        re-read every ``poke_interval`` as a safety net. ``marks`` (:meth:`marks`),
        taken before the tick that chose ``delay_ms``: a poke after them wakes it,
        also one that came while the delay was being chosen (a fire re-arming its
        row then, the row in flight to that choice)."""
        since, seen = marks if marks is not None else self.marks()
        remaining = delay_ms
        while remaining > 0:
            self.beater.maybe_beat()
            step = min(remaining, self.poke_interval_ms)
            started = time.monotonic()
            wakeups.wait(wakeups.ROUTINES, since, step / 1000)
            if self.stop_event.is_set():
                return "stop"
            remaining -= int((time.monotonic() - started) * 1000)
            if routine_store.poke_seq() != seen:
                return "poke"
            since = wakeups.seen(wakeups.ROUTINES)
        return "timer"

    def run_forever(self) -> None:
        """Boot-resume, then tick and wait until stopped. A database that goes away
        (restart, terminated connection, a file that stays locked) stops nothing:
        the loop drops the connection, backs off and carries on once it answers."""
        outage = reconnect.Outage("ticker")
        resumed = False
        try:
            while not self.stop_event.is_set():
                self.beater.maybe_beat()
                reconnect.fresh()
                try:
                    if not resumed:
                        self.boot_resume()
                        resumed = True
                    marks = self.marks()
                    delay = self._tick_and_arm()
                    outage.ok()
                    self.wait(delay, marks)
                except Exception as exc:
                    if not reconnect.is_unavailable(exc):
                        raise
                    self.stop_event.wait(outage.lost(exc))
        finally:
            self.beater.stop()

    def _tick_and_arm(self) -> int:
        try:
            report = self.tick()
            if report.claimed:
                log.info("ticker fired %d routine(s)", len(report.claimed))
        except Exception as exc:  # one bad tick must not kill the actuator; next tick retries
            if reconnect.is_unavailable(exc):
                raise
            log.exception("ticker tick failed")
        return self.arm_delay_ms()

    def stop(self) -> None:
        self.stop_event.set()
        wakeups.wake_all()
