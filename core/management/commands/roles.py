"""``python manage.py roles``: print the roles table (GOVERNANCE §6) as
``docs/roles.md`` holds it."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from core import roles


class Command(BaseCommand):
    help = "Print who may do what (the roles table of core/roles.py) as Markdown."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(roles.as_markdown(), ending="")
