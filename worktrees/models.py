"""The merge queue's durable rows (written only by :mod:`worktrees.queue`).

A :class:`QueuedLanding` is one approval waiting to land in its repository's
merge queue; a :class:`MergeBatch` is one pass of the queue's job over up to
``CLAWBOO_MERGE_BATCH`` of them: the base it started from, the commits it stacked,
each gate it ran, and the commit it is moving the base to. The batch is written
before the base moves, so a job killed at any instant leaves a record that says
whether to finish its landing or to start again.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class EntryState(models.TextChoices):
    QUEUED = "queued", "queued"  # waiting for a batch, in approval order
    # Sent back to its builder; re-enters on a person's approval of what it hands back.
    RETURNED = "returned", "returned"
    LANDED = "landed", "landed"
    BLOCKED = "blocked", "blocked"  # its fix rounds are spent: a person decides
    WITHDRAWN = "withdrawn", "withdrawn"  # left review (cancelled, moved) while waiting


# The states in which an entry still belongs to the queue (one per task).
LIVE_ENTRY_STATES = (EntryState.QUEUED, EntryState.RETURNED)


class BatchState(models.TextChoices):
    GATING = "gating", "gating"  # stacked; the gate runs; the base has not moved
    ADVANCING = "advancing", "advancing"  # target decided; the base moves to it
    LANDED = "landed", "landed"
    ABANDONED = "abandoned", "abandoned"  # nothing landed (killed while gating, base moved)


OPEN_BATCH_STATES = (BatchState.GATING, BatchState.ADVANCING)


class MergeBatch(models.Model):
    repo_path = models.CharField(max_length=1024)
    base_branch = models.CharField(max_length=255)
    state = models.CharField(max_length=16, choices=BatchState.choices)
    base_before = models.CharField(max_length=64)
    # [{"entry": id, "task_id": str, "commit": sha | None}] in stacking order: each
    # commit's parent is the one before it, so any prefix lands by fast-forward.
    stack = models.JSONField(default=list)
    # Each gate run: {"commit", "passed", "exit_code", "duration_ms", "output_tail"}.
    gates = models.JSONField(default=list)
    gate_runs = models.IntegerField(default=0)
    running_gate = models.CharField(max_length=64, blank=True, default="")
    target = models.CharField(max_length=64, blank=True, default="")
    # What the batch decided: entry ids that land, culprits ({entry, task_id, fix}).
    landing = models.JSONField(default=list)
    culprits = models.JSONField(default=list)
    host = models.CharField(max_length=255, blank=True, default="")
    pid = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    note = models.TextField(blank=True, default="")

    class Meta:
        db_table = "merge_batches"
        ordering = ["-id"]
        verbose_name_plural = "merge batches"
        constraints = [
            # One batch at a time per repository, across hosts.
            models.UniqueConstraint(
                fields=["repo_path"],
                condition=Q(state__in=OPEN_BATCH_STATES),
                name="merge_batches_one_open_per_repo",
            )
        ]

    def __str__(self) -> str:
        return f"merge batch {self.pk} of {self.repo_path} ({self.state})"


class QueuedLanding(models.Model):
    task = models.ForeignKey("board.Task", on_delete=models.CASCADE, related_name="+")
    repo_path = models.CharField(max_length=1024)
    base_branch = models.CharField(max_length=255)
    state = models.CharField(max_length=16, choices=EntryState.choices)
    by = models.CharField(max_length=200)
    human_override = models.JSONField(null=True, blank=True)
    # Fix rounds the queue sent it on for a red gate (bounded by CLAWBOO_MAX_FIX_CYCLES),
    # and rebase rounds for a conflict with the base (bounded by CLAWBOO_MAX_REBASE_ROUNDS).
    rounds = models.IntegerField(default=0)
    rebases = models.IntegerField(default=0)
    approved_at = models.DateTimeField()  # the approval: time-to-land counts from here
    queued_at = models.DateTimeField()  # its place in line (a return re-enters at the end)
    landed_at = models.DateTimeField(null=True, blank=True)
    commit = models.CharField(max_length=64, blank=True, default="")
    batch = models.ForeignKey(MergeBatch, null=True, blank=True, on_delete=models.SET_NULL)
    reason = models.TextField(blank=True, default="")  # why it was last sent back
    # The task's attempts when it was approved (or went back in line after the queue's
    # own round): a task claimed again since holds work nobody approved, and the
    # entry is withdrawn instead of landing it (null: an entry from before).
    attempt = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "queued_landings"
        ordering = ["queued_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["task"],
                condition=Q(state__in=LIVE_ENTRY_STATES),
                name="queued_landings_one_live_per_task",
            )
        ]
        indexes = [models.Index(fields=["repo_path", "state", "queued_at"])]

    def __str__(self) -> str:
        return f"{self.task_id} in the merge queue of {self.repo_path} ({self.state})"


class PendingRefresh(models.Model):
    """A webhook's refresh of a task, queued for a django-q2 worker and not started
    yet (written only by :mod:`worktrees.pull_requests`). A delivery that finds one
    queues nothing more: the queued refresh asks the forge after it anyway. The
    refresh deletes its row as it starts, so a delivery during a refresh queues the
    next one."""

    task = models.OneToOneField(
        "board.Task", primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    queued_at = models.DateTimeField()

    class Meta:
        db_table = "forge_refreshes_pending"
        verbose_name_plural = "pending refreshes"

    def __str__(self) -> str:
        return f"a forge refresh of {self.task_id} queued at {self.queued_at}"
