"""``clawboo import FILE [--format clawboo|taskmaster] [--team T]``.

``clawboo`` (the default) restores a ``clawboo export`` into an empty database;
``taskmaster`` files a Taskmaster ``tasks.json`` as board tasks of ``--team``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from core.errors import ClawbooError
from ops import taskmaster, transfer


class Command(BaseCommand):
    help = "Restore a `clawboo export` into an empty database, or import a Taskmaster file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the file to import ('-' for stdin)")
        parser.add_argument(
            "--format", choices=["clawboo", "taskmaster"], default="clawboo", help="its format"
        )
        parser.add_argument("--team", default="default", help="taskmaster: the team to file into")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["file"]
        try:
            stream = sys.stdin if name == "-" else Path(name).open(encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            raise CommandError(f"cannot read {name}: {exc.strerror or exc}") from exc
        try:
            with stream:
                if options["format"] == "taskmaster":
                    report = taskmaster.import_file(stream.read(), team=options["team"])
                    self.stdout.write(report.summary())
                    return
                reminted: list[transfer.Reminted] = []
                counts = transfer.import_lines(stream, reminted)
        except ClawbooError as exc:
            raise CommandError(exc.detail) from exc
        except (DatabaseError, ValueError, TypeError, KeyError) as exc:
            # The file was checked whole before the write began, so this is a fault
            # the checks missed; the write's transaction rolled back all of it.
            raise CommandError(
                f"import failed, nothing written: {type(exc).__name__}: {exc}"
            ) from exc
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        self.stdout.write(f"imported {summary or 'nothing'}")
        for token in reminted:
            # The export held the binding, never the key: this is the new one, shown
            # once (as create_machine_token shows it); the host's old key is void.
            self.stdout.write(
                f"machine token re-minted for host {token.host} "
                f"(agents {', '.join(token.agents)}): {token.key}\n"
                f"  give it to that host: clawboo worker --server URL --token {token.key}"
            )
