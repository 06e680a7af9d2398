"""``python manage.py worktrees_gc``: one GC sweep of the task checkouts."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ClawbooError
from worktrees import checkouts, service


class Command(BaseCommand):
    help = "Reap old task worktrees (commit-before-drop; branches are kept)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--max-age-hours", type=float, default=checkouts.GC_MAX_AGE_HOURS)
        parser.add_argument("--keep", type=int, default=checkouts.GC_KEEP)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = service.gc(max_age_hours=options["max_age_hours"], keep=options["keep"])
        except ClawbooError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(json.dumps(report, indent=2))
        if report["failures"]:
            self.stderr.write(f"{len(report['failures'])} worktree(s) could not be reaped")
