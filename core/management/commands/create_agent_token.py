"""``python manage.py create_agent_token <username> [--team T]``: print an API key."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token

from core import registry
from core.errors import ClawbooError


class Command(BaseCommand):
    help = "Create (or show) the API token of a user, creating the user if needed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--team", action="append", default=[], help="add the user to this team (repeatable)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()
            user.save()
        for team in options["team"]:
            try:
                registry.add_member(team, user)
            except ClawbooError as exc:
                raise CommandError(exc.detail) from None
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
