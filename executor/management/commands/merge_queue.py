"""``manage.py merge_queue [--repo PATH]``: drain merge queues now (what the
django-q2 job does): one repository, or every one with work waiting."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from executor import merge_queue


class Command(BaseCommand):
    help = "Drain the merge queue of one repository (--repo), or of every repository."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--repo", default=None, help="the repository's path")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["repo"]:
            report = merge_queue.drain(options["repo"])
        else:
            report = {"landed": merge_queue.drain_all()}
        self.stdout.write(json.dumps(report))
