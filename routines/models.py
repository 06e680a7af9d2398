"""The routines ledger: ``scheduled_runs`` (one row per Routine), ``routine_fires``
(one row per fired slot) and the ticker's poke row.

The ledger is cron-math-free: ``next_run_at`` is a precomputed UTC epoch-ms slot
handed in by :mod:`routines.occurrence`. Writes go through :mod:`routines.store`
(the only writer of these tables) and the ticker/fire path.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from django.db import models


class RoutineStatus(models.TextChoices):
    IDLE = "idle"
    QUEUED = "queued"
    CLAIMED = "claimed"
    RUNNING = "running"
    PAUSED = "paused"
    ERROR = "error"


# The ledger state machine, declared once (SPEC §5). Same-status is a no-op.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    RoutineStatus.IDLE: (RoutineStatus.QUEUED, RoutineStatus.PAUSED),
    RoutineStatus.QUEUED: (RoutineStatus.CLAIMED, RoutineStatus.PAUSED),
    RoutineStatus.CLAIMED: (RoutineStatus.RUNNING, RoutineStatus.ERROR, RoutineStatus.QUEUED),
    RoutineStatus.RUNNING: (RoutineStatus.IDLE, RoutineStatus.ERROR, RoutineStatus.QUEUED),
    RoutineStatus.PAUSED: (RoutineStatus.IDLE,),
    RoutineStatus.ERROR: (RoutineStatus.IDLE, RoutineStatus.PAUSED),
}


def is_transition_allowed(from_status: str, to_status: str) -> bool:
    return from_status == to_status or to_status in TRANSITIONS.get(from_status, ())


def sources_of(to_status: str) -> tuple[str, ...]:
    """Every status that may move to ``to_status`` (for conditional UPDATE guards)."""
    return tuple(s for s, targets in TRANSITIONS.items() if to_status in targets)


class CatchUp(models.TextChoices):
    LATEST = "latest"  # fire once for the newest missed slot (the default: no storm)
    SKIP = "skip"  # fire none of the missed slots
    ALL = "all"  # fire every missed slot, bounded by occurrence.CATCH_UP_ALL_LIMIT


class Routine(models.Model):
    id = models.CharField(primary_key=True, max_length=32)
    agent = models.ForeignKey("clawboo.Agent", on_delete=models.CASCADE, related_name="routines")
    team = models.ForeignKey("clawboo.Team", on_delete=models.PROTECT, related_name="routines")
    cron_spec = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    task_template = models.JSONField(default=dict)
    # The board task a one-shot routine is bound to (task_template.team_task_id);
    # unique, so two routines can never both own one task (first wall, structurally).
    bound_task_id = models.CharField(max_length=128, null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=RoutineStatus.choices, default=RoutineStatus.IDLE
    )
    next_run_at = models.BigIntegerField(null=True, blank=True)  # UTC epoch ms
    last_run_at = models.BigIntegerField(null=True, blank=True)  # UTC epoch ms
    # The slot being fired: set by the due-pass (= next_run_at) or by run-now.
    fire_slot = models.BigIntegerField(null=True, blank=True)
    scheduled_by = models.CharField(max_length=32, default="clawboo")
    last_error = models.TextField(null=True, blank=True)
    catch_up = models.CharField(max_length=8, choices=CatchUp.choices, default=CatchUp.LATEST)
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "scheduled_runs"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["status", "next_run_at"], name="scheduled_runs_due")]
        constraints = [
            models.UniqueConstraint(
                fields=["bound_task_id"],
                condition=models.Q(bound_task_id__isnull=False),
                name="scheduled_runs_one_owner_per_task",
            ),
        ]

    def __str__(self) -> str:
        # Its task's title, schedule and the start of its id (two routines of one title
        # and schedule read apart: the board's Routine filter, the admin); not the
        # ledger's status ("idle"), which is not the state people are shown
        # (routines.store.state_of: "armed", "late", …).
        title = (self.task_template or {}).get("title") or "untitled"
        return f"{title} · {self.cron_spec} · {self.id[:6]}"

    @property
    def is_one_shot(self) -> bool:
        return self.cron_spec.startswith("once@")

    def as_dict(self) -> dict[str, Any]:
        """The routine body of the API: ledger stamps as ISO-8601 UTC and as epoch ms."""

        def iso_ms(epoch_ms: int | None) -> str | None:
            if epoch_ms is None:
                return None
            return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=dt.UTC).isoformat()

        return {
            "id": self.id,
            "name": str(self),
            "agent_id": self.agent_id,
            "team": self.team_id,
            "cron_spec": self.cron_spec,
            "timezone": self.timezone,
            "task_template": self.task_template,
            "bound_task_id": self.bound_task_id,
            "status": self.status,
            "next_run_at": iso_ms(self.next_run_at),
            "next_run_at_ms": self.next_run_at,
            "last_run_at": iso_ms(self.last_run_at),
            "last_run_at_ms": self.last_run_at,
            "scheduled_by": self.scheduled_by,
            "last_error": self.last_error,
            "catch_up": self.catch_up,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }

    def local_time(self, epoch_ms: int | None) -> dt.datetime | None:
        """An epoch-ms stamp in the routine's own timezone (for admin and display)."""
        if epoch_ms is None:
            return None
        return dt.datetime.fromtimestamp(epoch_ms / 1000, tz=ZoneInfo(self.timezone))


class FireOutcome(models.TextChoices):
    PENDING = "pending"  # slot reserved, dispatch not yet recorded
    DISPATCHED = "dispatched"  # handed to the runtime seam (one-shot path)
    COMPLETED = "completed"  # the connected run finished
    SATISFIED = "satisfied"  # lost the board claim: someone else owns the work
    ERROR = "error"


class RoutineFire(models.Model):
    """One fired slot. Unique on (routine, slot): a slot can never fire twice."""

    routine = models.ForeignKey(Routine, on_delete=models.CASCADE, related_name="fires")
    slot_at = models.BigIntegerField()  # UTC epoch ms of the slot that fired
    task_id = models.CharField(max_length=128, null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=FireOutcome.choices, default=FireOutcome.PENDING
    )
    error = models.TextField(null=True, blank=True)
    fired_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    tenant_id = models.CharField(max_length=64, null=True, blank=True, editable=False)

    class Meta:
        db_table = "routine_fires"
        ordering = ["slot_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["routine", "slot_at"], name="routine_fires_one_per_slot"
            ),
        ]

    def __str__(self) -> str:
        slot = dt.datetime.fromtimestamp(self.slot_at / 1000, tz=dt.UTC)
        return f"{self.routine_id} at {slot:%Y-%m-%d %H:%M} UTC ({self.outcome})"


class TickerPoke(models.Model):
    """One row whose ``seq`` every routine write bumps; tickers in any process poll it
    cheaply and re-arm when it moves (the cross-process poke)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    seq = models.BigIntegerField(default=0)

    class Meta:
        db_table = "routine_ticker_poke"

    def __str__(self) -> str:
        return f"poke #{self.seq}"
