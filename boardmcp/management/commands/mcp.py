"""``clawboo mcp --agent A [--task T]``: the board's MCP server on stdin/stdout, for a
runtime that spawns its tools itself. It acts as agent ``A``, in A's team."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from boardmcp.credentials import caller_for_agent
from boardmcp.tools import build_server
from core.errors import ClawbooError


class Command(BaseCommand):
    help = "Serve the board's MCP tools over stdio, acting as one agent."
    # stdout is the protocol's: nothing else may be written there.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--agent", required=True, help="the agent the tools act as")
        parser.add_argument(
            "--task", help="the task tools default to (one of the agent's team's tasks)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            caller = caller_for_agent(options["agent"], options.get("task"))
        except ClawbooError as exc:
            raise CommandError(exc.detail) from None
        build_server(caller).run("stdio")
