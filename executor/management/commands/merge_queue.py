"""``manage.py merge_queue [--repo ID|PATH]``: drain merge queues now (what the
django-q2 job does): one repository, or every one with work waiting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.models import Repository
from executor import merge_queue


def queue_path(given: str) -> str:
    """The checkout whose queue ``--repo`` names: a registered repository's id (what
    the API calls it) or path. Anything else is an error, not a silent empty drain."""
    by_id = Repository.objects.filter(pk=given).values_list("path", flat=True).first()
    if by_id is not None:
        return str(by_id)
    resolved = str(Path(given).expanduser().resolve())
    if Repository.objects.filter(path__in=[given, resolved]).exists():
        return resolved if Repository.objects.filter(path=resolved).exists() else given
    raise CommandError(f"no registered repository {given!r} (give its id or its path)")


class Command(BaseCommand):
    help = "Drain the merge queue of one repository (--repo), or of every repository."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repo", default=None, help="the repository's id or path")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["repo"]:
            report = merge_queue.drain(queue_path(options["repo"]))
        else:
            report = {"landed": merge_queue.drain_all()}
        self.stdout.write(json.dumps(report))
