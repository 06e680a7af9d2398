"""``python manage.py approve_agents [A ...] [--all]``: an operator approves what agents
run on the server (their runtime and settings as they are now; core.server_commands).
Naming none lists the agents that wait, with what approving them would approve.

Agents registered before approvals existed, or changed around the registry, are not
run by the executor until an operator approves them here or saves them in the admin.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import agent_secrets, registry, server_commands
from core.models import Agent


class Command(BaseCommand):
    help = "Approve the runtime and settings of agents so the executor runs them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("agents", nargs="*", help="agent ids")
        parser.add_argument("--all", action="store_true", help="every agent not yet approved")

    def handle(self, *args: Any, **options: Any) -> None:
        ids: list[str] = list(options["agents"])
        waiting = [a for a in Agent.objects.order_by("id") if server_commands.agent_run_refusal(a)]
        if options["all"]:
            ids += [a.id for a in waiting if a.id not in ids]
        elif not ids:
            # Named nothing: say who waits, as the approval would show it, and how.
            for waits in waiting:
                shown = json.dumps(
                    agent_secrets.masked(waits.settings, waits.runtime), sort_keys=True
                )
                self.stdout.write(f"waiting {waits.id} ({waits.team_id}): {waits.runtime} {shown}")
            self.stdout.write(
                f"{len(waiting)} agent(s) wait: name them to approve, or use --all"
                if waiting
                else "no agent waits for approval"
            )
            return
        for agent_id in ids:
            agent = Agent.objects.filter(pk=agent_id).first()
            if agent is None:
                raise CommandError(f"no agent {agent_id!r} in the registry")
            registry.update_agent(
                agent.id, {"runtime": agent.runtime, "settings": agent.settings}, operator=True
            )
            shown = json.dumps(agent_secrets.masked(agent.settings, agent.runtime), sort_keys=True)
            self.stdout.write(f"approved {agent.id}: {agent.runtime} {shown}")
