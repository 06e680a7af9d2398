"""``python manage.py reconcile [--orphans|--stale|--lapsed|--approvals]``: the
board's recovery passes.

Without a flag all run: orphan reconciliation (running executions whose task
stopped beating are failed with a tombstone), the stale sweep (in_progress tasks
past the TTL with a running execution are released), the lapse sweep (in_progress
tasks whose lease ran out are released) and the approval expiry (approvals
unanswered past ``CLAWBOO_APPROVAL_TTL_MS`` become ``expired``). Each is one write
transaction. The flags are the passes of ``board.store.RECOVERY_PASSES``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from board import store


class Command(BaseCommand):
    help = "Run the board's recovery passes (orphans, stale, lapsed) and approval expiry once."

    def add_arguments(self, parser: CommandParser) -> None:
        for name, recovery in store.RECOVERY_PASSES.items():
            parser.add_argument(f"--{name}", action="store_true", help=f"only: {recovery.about}")
        parser.add_argument("--approvals", action="store_true", help="only the approval expiry")

    def handle(self, *args: Any, **options: Any) -> None:
        asked = [name for name in store.RECOVERY_PASSES if options[name]]
        everything = not asked and not options["approvals"]
        for name in store.RECOVERY_PASSES if everything else asked:
            released = store.RECOVERY_PASSES[name].run()
            self.stdout.write(f"{name}: released {len(released)} task(s) {' '.join(released)}")
        if everything or options["approvals"]:
            expired = store.expire_unanswered()
            self.stdout.write(f"approvals: expired {len(expired)} task(s) {' '.join(expired)}")
