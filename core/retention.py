"""Bounded history: the event log, chat messages and idempotency records are kept
for a while, then pruned (``manage.py prune``; the django-q2 cluster runs it
hourly, ``ops.periodic``).

``CLAWBOO_HISTORY_RETENTION_DAYS`` (default 30; 0 keeps everything) bounds the
event log and chat by age, ``CLAWBOO_HISTORY_MAX_EVENTS`` (default 0: no bound)
each team's event log by count; idempotency records go after their 24 h window.
Executions' full logs (core.runlogs) go by the same age.
The board's tasks are never pruned: only the history of their changes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

from django.conf import settings
from django.utils import timezone

from core import chat, events, runlogs, storage
from core.models import IdempotencyRecord

PRUNE_EVERY = dt.timedelta(hours=1)
# How long the API replays an ``Idempotency-Key``'s answer (core.api.idempotency);
# its records are pruned after it.
IDEMPOTENCY_TTL = dt.timedelta(hours=24)


@dataclass
class PruneReport:
    events: int = 0
    chat_messages: int = 0
    idempotency_records: int = 0
    run_logs: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def retention() -> dt.timedelta | None:
    days = int(settings.CLAWBOO_HISTORY_RETENTION_DAYS)
    return dt.timedelta(days=days) if days > 0 else None


def prune(now: dt.datetime | None = None) -> PruneReport:
    """Delete the history older than the retention window (and expired
    idempotency records)."""
    report = PruneReport(idempotency_records=prune_idempotency_records())
    keep = retention()
    cutoff = None if keep is None else (now or timezone.now()) - keep
    max_events = int(settings.CLAWBOO_HISTORY_MAX_EVENTS)
    report.events = events.prune(cutoff, keep_last=max_events or None)
    if cutoff is not None:
        report.chat_messages = chat.prune_before(cutoff)
        report.run_logs = runlogs.prune_before(cutoff)
    return report


def prune_idempotency_records() -> int:
    """Delete the idempotency records past :data:`IDEMPOTENCY_TTL`; return how many."""
    cutoff = timezone.now() - IDEMPOTENCY_TTL
    return storage.write(
        lambda: IdempotencyRecord.objects.filter(created_at__lt=cutoff).delete()[0]
    )
