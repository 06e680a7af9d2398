"""``clawboo`` alone: the commands it lists are real, and the key a remote worker needs
is among them."""

from __future__ import annotations

import re

from django.core.management import get_commands

from clawboo import people
from clawboo.cli import USAGE


def listed_commands() -> set[str]:
    names: set[str] = set()
    for line in USAGE.splitlines():
        if not line.startswith("  ") or line.startswith("   "):
            continue  # a description's continuation, or not a command line
        head = line.split()[0]
        names.update(name for name in head.split("|") if re.fullmatch(r"[a-z_]+", name))
    return names


def test_every_command_the_usage_lists_exists():
    known = set(get_commands()) | set(people.COMMANDS) | {"worker", "help"}
    assert listed_commands() - known == set()


def test_the_usage_names_the_command_that_mints_a_workers_key():
    # `worker --server URL --token KEY` was listed, and nothing said where KEY comes from.
    assert "create_machine_token" in listed_commands()
