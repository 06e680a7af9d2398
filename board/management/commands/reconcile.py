"""``python manage.py reconcile [--orphans|--stale]``: the board's recovery passes.

Without a flag both run: orphan reconciliation (running executions whose task
stopped beating are failed with a tombstone) and the stale sweep (in_progress tasks
past the TTL with a running execution are released). Each is one write transaction.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from board import store


class Command(BaseCommand):
    help = "Run the board's orphan reconciliation and/or stale sweep once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--orphans", action="store_true", help="only the orphan pass")
        parser.add_argument("--stale", action="store_true", help="only the stale sweep")

    def handle(self, *args: Any, **options: Any) -> None:
        asked = [name for name in store.RECOVERY_PASSES if options[name]]
        for name in asked or store.RECOVERY_PASSES:
            released = store.RECOVERY_PASSES[name]()
            self.stdout.write(f"{name}: released {len(released)} task(s) {' '.join(released)}")
