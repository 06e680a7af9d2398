"""``python manage.py create_agent_token <username> [--team T] [--agent A]``: print an API key.

Without ``--agent``: the user's own key (one per user; created with the user when
needed). With ``--agent A``: a new key bound to agent A, which the user owns — it
may act as A and no other agent. A is registered when it does not exist yet (in
the first ``--team``, else ``default``; runtime ``human`` unless ``--runtime``
says otherwise: an agent process that talks to the API itself is nothing the
executor runs).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token

from core import registry, storage
from core.errors import ClawbooError
from core.machines import new_key
from core.models import Agent, AgentToken, Runtime


class Command(BaseCommand):
    help = (
        "Create (or show) the API token of a user, creating the user if needed; with "
        "--agent, mint a token bound to that agent (registering it if needed)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--team", action="append", default=[], help="add the user to this team (repeatable)"
        )
        parser.add_argument(
            "--agent", help="mint a token that may act as this agent only (owned by the user)"
        )
        parser.add_argument(
            "--runtime",
            default=Runtime.HUMAN,
            choices=Runtime.values,
            help="runtime of an agent registered by --agent (default: human)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
            # Said on stderr (the key alone is stdout): a mistyped name is a new user,
            # which the operator should notice.
            self.stderr.write(f"created user {username!r} (no password)")
        try:
            for team in options["team"]:
                registry.add_member(team, user)
            if options["agent"]:
                self.stdout.write(self._agent_token(user, options))
                return
        except ClawbooError as exc:
            raise CommandError(exc.detail) from None
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)

    def _agent_token(self, user: Any, options: dict[str, Any]) -> str:
        agent_id = options["agent"]
        agent = Agent.objects.filter(pk=agent_id).first()
        if agent is None:
            team = (options["team"] or [registry.DEFAULT_TEAM])[0]
            agent = registry.create_agent(
                id=agent_id,
                display_name=agent_id,
                team=team,
                runtime=options["runtime"],
                owner=user,
            )
            # The runtime's own name, and what it means: its admin label ("None — acts
            # through the API …") read as "runtime 'None'" here.
            runtime = (
                " (it acts through the API with this key; nothing on the server runs it)"
                if agent.runtime == Runtime.HUMAN
                else ""
            )
            self.stderr.write(
                f"registered agent {agent.id!r} on team {team!r}, runtime "
                f"{agent.runtime!r}{runtime}, "
                f"participant kind {agent.get_participant_kind_display()!r}"
            )
        elif agent.owner_id is None:
            registry.update_agent(agent.id, {"owner": user})
        elif agent.owner_id != user.pk:
            raise CommandError(f"agent {agent_id!r} belongs to another user")
        # Acting as an agent needs seeing its team.
        registry.add_member(agent.team_id, user)
        key = new_key()
        storage.write(lambda: AgentToken.objects.create(key=key, agent=agent, user=user))
        return key
