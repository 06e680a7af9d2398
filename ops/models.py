"""Notification channels (per team) and the record of each delivery.

Written only by :mod:`ops.notify`.
"""

from __future__ import annotations

import secrets

from django.db import models


class Reason(models.TextChoices):
    """Why a person is told: the moments a person is needed."""

    REVIEW = "review", "a task enters review"
    BLOCKED = "blocked", "a task is blocked"
    VERIFICATION_FAILED = "verification_failed", "a task fails verification"
    ROUTINE_ERROR = "routine_error", "a routine halts in error"
    MENTIONED = "mentioned", "someone is @-mentioned in a comment"
    BUDGET_WARNING = "budget_warning", "a budget reaches 80 %"
    BUDGET_EXHAUSTED = "budget_exhausted", "a budget reaches 100 %"
    BUDGET_STOPPED = "budget_stopped", "a run is stopped for spend"
    APPROVAL = "approval", "work or a tool call waits for a person's approval"
    AGENT_PAUSED = "agent_paused", "an agent is paused (its breaker, or a person)"
    RUN_STALLED = "run_stalled", "a run said nothing for CLAWBOO_STALL_MS"


class ChannelKind(models.TextChoices):
    WEBHOOK = "webhook"
    EMAIL = "email"


def new_secret() -> str:
    return secrets.token_hex(32)


def all_reasons() -> list[str]:
    return list(Reason.values)


class NotificationChannel(models.Model):
    """Where a team's notifications go: a signed webhook or a list of addresses."""

    team = models.ForeignKey(
        "clawboo.Team", on_delete=models.CASCADE, related_name="notification_channels"
    )
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=ChannelKind.choices)
    # webhook: the URL POSTed to, and the key of the HMAC-SHA256 over each body.
    url = models.URLField(max_length=1024, blank=True, default="")
    secret = models.CharField(max_length=128, default=new_secret)
    # email: addresses, one per line or comma-separated.
    recipients = models.TextField(blank=True, default="")
    reasons = models.JSONField(default=all_reasons, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    # Write-only in the admin (core.admin_forms.secret_fields): the HMAC key, and the
    # webhook's URL, which often is the credential (a chat's incoming-webhook path).
    write_only_fields = {"secret": "text", "url": "url"}

    class Meta:
        db_table = "notification_channels"
        ordering = ["team", "name", "id"]

    def __str__(self) -> str:
        return f"{self.team_id}: {self.name} ({self.kind})"

    def recipient_list(self) -> list[str]:
        return [a.strip() for a in self.recipients.replace(",", "\n").splitlines() if a.strip()]


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # recorded, first attempt queued
    RETRYING = "retrying"  # an attempt failed; the next is scheduled
    DELIVERED = "delivered"
    FAILED = "failed"  # gave up after the last attempt


class NotificationDelivery(models.Model):
    """One notification to one channel, for one committed event.

    Unique on (channel, team, event seq): an event notifies each channel once,
    however often it is delivered to the listener.
    """

    channel = models.ForeignKey(
        NotificationChannel, on_delete=models.CASCADE, related_name="deliveries"
    )
    team_id = models.CharField(max_length=64)
    event_seq = models.BigIntegerField()
    reason = models.CharField(max_length=32, choices=Reason.choices)
    task_id = models.CharField(max_length=128, null=True, blank=True)
    # The exact body sent (the HMAC covers these bytes).
    body = models.TextField()
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    attempts = models.IntegerField(default=0)
    last_status_code = models.IntegerField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "notification_deliveries"
        verbose_name_plural = "notification deliveries"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "team_id", "event_seq"], name="notification_once_per_event"
            ),
        ]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notify_due_idx")]

    def __str__(self) -> str:
        return f"{self.reason} #{self.event_seq} → {self.channel_id} ({self.status})"
