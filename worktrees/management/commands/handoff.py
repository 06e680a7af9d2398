"""``python manage.py handoff write <task> <file|->`` and ``handoff show <task>``.

``write`` validates the JSON against the handoff schema and writes
``AGENT_HANDOFF.json`` into the task's checkout (nothing is written on bad input);
``show`` prints the stored handoff and the state a cold runtime would reconstruct.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import ClawbooError
from worktrees import service


class Command(BaseCommand):
    help = "Write or show a task's AGENT_HANDOFF.json."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        write = sub.add_parser("write", help="validate and write a handoff")
        write.add_argument("task_id")
        write.add_argument("source", help="a JSON file, or - for standard input")
        show = sub.add_parser("show", help="print the handoff and the reconstructed state")
        show.add_argument("task_id")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "write":
                doc = service.write_handoff(options["task_id"], self._load(options["source"]))
                self.stdout.write(json.dumps(doc, indent=2))
            else:
                state = service.workspace_state(options["task_id"])
                shown = {
                    "handoff": service.show_handoff(options["task_id"]),
                    "resume_state": state["resume_state"],
                }
                self.stdout.write(json.dumps(shown, indent=2))
        except ClawbooError as exc:
            raise CommandError(exc.detail) from exc

    @staticmethod
    def _load(source: str) -> Any:
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {source}: {exc.strerror}") from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            raise CommandError(f"{source} is not valid JSON: {exc}") from exc
