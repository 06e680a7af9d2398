"""``python manage.py ticker``: run the routines ticker in the foreground."""

from __future__ import annotations

import signal
from typing import Any

from django.core.management.base import BaseCommand

from routines.ticker import Ticker


class Command(BaseCommand):
    help = "Run the routines ticker: boot-resume, then fire due routines until stopped."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--once", action="store_true", help="boot-resume and run a single tick, then exit"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ticker = Ticker()
        if options["once"]:
            ticker.boot_resume()
            report = ticker.tick()
            self.stdout.write(f"queued {len(report.queued)}, claimed {len(report.claimed)}")
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: ticker.stop())
        self.stdout.write("ticker running (Ctrl-C to stop)")
        ticker.run_forever()
