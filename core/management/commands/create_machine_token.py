"""``python manage.py create_machine_token --host NAME --agent A [--agent B]``: print a
worker host's key, bound to the agents it may run (``clawboo worker --token KEY``).

The key is printed once; only its hash is stored. ``--revoke ID`` revokes a token.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import machines
from core.errors import ClawbooError


class Command(BaseCommand):
    help = "Mint a machine token for a remote worker host, bound to agents; or revoke one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", help="the worker host's name")
        parser.add_argument(
            "--agent", action="append", default=[], help="an agent it may run (repeatable)"
        )
        parser.add_argument("--revoke", type=int, help="revoke the machine token with this id")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["revoke"] is not None:
            if not machines.revoke(options["revoke"]):
                raise CommandError(f"no live machine token {options['revoke']}")
            self.stderr.write(f"revoked machine token {options['revoke']}")
            return
        if not options["host"]:
            raise CommandError("--host is required")
        try:
            token, key = machines.mint(options["host"], options["agent"])
        except ClawbooError as exc:
            raise CommandError(exc.detail) from None
        agents = ", ".join(options["agent"])
        self.stderr.write(f"machine token {token.id} for {token.host}: {agents}")
        self.stdout.write(key)
