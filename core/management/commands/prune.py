"""``python manage.py prune``: delete the history past its retention window."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core import retention


class Command(BaseCommand):
    help = "Prune the event log, chat and idempotency records past their retention."

    def handle(self, *args: Any, **options: Any) -> None:
        report = retention.prune()
        self.stdout.write(
            f"pruned {report.events} event(s), {report.chat_messages} chat message(s), "
            f"{report.idempotency_records} idempotency record(s)"
        )
