"""``clawboo export [--team T] [-o FILE]``: a team, or everything, as JSON Lines."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ClawbooError
from ops import transfer


class Command(BaseCommand):
    help = "Export a team (or everything) as JSON Lines, for `clawboo import`."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", help="export only this team (default: everything)")
        parser.add_argument("-o", "--output", help="write to this file (default: stdout)")

    def handle(self, *args: Any, **options: Any) -> None:
        target = options["output"]
        try:
            if target:
                path = Path(target)
                tmp = path.with_name(path.name + ".part")
                with tmp.open("w", encoding="utf-8", newline="\n") as out:
                    report = transfer.export_to(out, options["team"])
                tmp.replace(path)  # a file named by -o is never left half-written
            else:
                report = transfer.export_to(sys.stdout, options["team"])
        except ClawbooError as exc:
            raise CommandError(exc.detail) from exc
        summary = ", ".join(f"{n} {kind}" for kind, n in report.counts.items() if n)
        self.stderr.write(f"exported {summary or 'nothing'}")
        for where in report.redacted:
            self.stderr.write(f"  left out (a secret): {where}")
