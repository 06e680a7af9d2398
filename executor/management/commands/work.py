"""``python manage.py work --agent A [--agent B] | --all [--once]``: foreground workers
that claim their team's ready tasks and run them through the executor."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from board.checks import check_lease_ms
from core import server_commands, wakeups
from core.errors import ClawbooError
from core.models import Agent, MachineToken
from executor.runner import WorkReport
from executor.runtimes import capabilities
from executor.workers import work_loop


class Command(BaseCommand):
    help = "Work ready board tasks with the named agents (or every automated one-shot agent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", action="append", default=[], help="agent id (repeatable)")
        parser.add_argument(
            "--all", action="store_true", help="every agent whose runtime the executor runs"
        )
        parser.add_argument(
            "--once", action="store_true", help="stop when no agent has a ready task"
        )
        parser.add_argument(
            "--poll-ms",
            type=int,
            default=5000,
            help="safety-net look at the board while idle (changes wake workers at once)",
        )
        parser.add_argument(
            "--lease-ms",
            type=int,
            default=None,
            help="lease of each claim, renewed by the heartbeat (default: the board's)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["lease_ms"] is not None:
            try:
                check_lease_ms(options["lease_ms"])
            except ClawbooError as exc:
                raise CommandError(f"--lease-ms: {exc.detail}") from exc
        agents: list[str] = list(options["agent"])
        missing = [a for a in agents if not Agent.objects.filter(pk=a).exists()]
        if missing:
            raise CommandError(f"no agent {missing[0]!r} in the registry")
        if options["all"]:
            agents += [a for a in runnable_agents() if a not in agents]
        elif not agents:
            raise CommandError("name an agent with --agent, or use --all")
        stop = threading.Event()

        def stop_now(*_: Any) -> None:
            stop.set()
            wakeups.wake_all()

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, stop_now)

        def report(result: WorkReport) -> None:
            line = f"work: {result.agent_id} {result.task_id} → {result.outcome}"
            if result.status:
                line += f" (task {result.status})"
            if result.error:
                line += f": {result.error[:200]}"
            self.stdout.write(line)

        shown = ", ".join(agents) if agents else "no agents yet (watching for new ones)"
        self.stdout.write(f"work: {shown} (poll {options['poll_ms']} ms)")
        work_loop(
            agents,
            stop,
            poll_s=options["poll_ms"] / 1000,
            once=options["once"],
            report=report,
            discover=runnable_agents if options["all"] else None,
            lease_ms=options["lease_ms"],
            runs_here=RunsHere(set(options["agent"]), self.stdout.write),
        )


def bound_to_live_token(agent_id: str) -> bool:
    """Whether a machine token that is not revoked names ``agent_id`` (one indexed
    look-up: asked before every claim)."""
    return MachineToken.agents.through.objects.filter(
        agent_id=agent_id, machinetoken__revoked_at__isnull=True
    ).exists()


class RunsHere:
    """Asked by each worker thread before it claims: an agent bound to a live
    machine token runs on that token's host, whenever the binding was made (this
    process may have started before it), unless named with ``--agent``. A change
    is said once, either way."""

    def __init__(self, named: set[str], say: Callable[[str], Any]) -> None:
        self.named = named
        self.say = say
        self.elsewhere: set[str] = set()

    def __call__(self, agent_id: str) -> bool:
        if agent_id in self.named:
            return True
        remote = bound_to_live_token(agent_id)
        if remote and agent_id not in self.elsewhere:
            self.elsewhere.add(agent_id)
            self.say(f"work: {agent_id} is bound to a machine token: its host runs it now")
        elif not remote and agent_id in self.elsewhere:
            self.elsewhere.discard(agent_id)
            self.say(f"work: {agent_id} has no live machine token: run here again")
        return not remote


def runnable_agents() -> list[str]:
    """Agents whose runtime the executor runs (automated, one-shot) and whose runtime
    and settings an operator approved (core.server_commands).

    An agent bound to a live machine token runs on that token's host (``clawboo
    worker``): ``--all`` leaves it there, or the server's workers, a hop nearer the
    database, would take nearly all its work. ``--agent A`` still runs it here (a
    fallback while its host is down); revoking the token hands it back to ``--all``.
    This list is where ``--all`` starts; :class:`RunsHere`, asked before each claim,
    keeps it true for bindings made (or revoked) while the workers run."""
    found = []
    remote = set(
        MachineToken.agents.through.objects.filter(
            machinetoken__revoked_at__isnull=True
        ).values_list("agent_id", flat=True)
    )
    for agent in Agent.objects.exclude(id__in=remote).order_by("id"):
        caps = capabilities(agent.runtime)
        if (
            caps.automated
            and caps.integration == "one-shot"
            and server_commands.agent_run_refusal(agent) is None
        ):
            found.append(agent.id)
    return found
