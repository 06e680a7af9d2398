"""``python manage.py reconcile [--orphans|--stale|--approvals]``: the board's
recovery passes.

Without a flag all run: orphan reconciliation (running executions whose task
stopped beating are failed with a tombstone), the stale sweep (in_progress tasks
past the TTL with a running execution are released) and the approval expiry
(approvals unanswered past ``CLAWBOO_APPROVAL_TTL_MS`` become ``expired``). Each is
one write transaction.
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
        parser.add_argument("--approvals", action="store_true", help="only the approval expiry")

    def handle(self, *args: Any, **options: Any) -> None:
        both = not (options["orphans"] or options["stale"] or options["approvals"])
        if both or options["orphans"]:
            released = store.reconcile_orphans()
            self.stdout.write(f"orphans: released {len(released)} task(s) {' '.join(released)}")
        if both or options["stale"]:
            released = store.release_stale()
            self.stdout.write(f"stale: released {len(released)} task(s) {' '.join(released)}")
        if both or options["approvals"]:
            expired = store.expire_unanswered()
            self.stdout.write(f"approvals: expired {len(expired)} task(s) {' '.join(expired)}")
