"""``clawboo`` alone: the commands it lists are real, and the key a remote worker needs
is among them."""

from __future__ import annotations

import re

import pytest
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


def test_an_option_a_command_does_not_take_is_named_under_that_commands_usage(capsys):
    # `clawboo task create --title x` answered with `usage: clawboo [-h] {login,…}`,
    # which does not say the title is the command's first argument.
    with pytest.raises(SystemExit) as stopped:
        people.main(["task", "create", "--title", "Fix login"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: clawboo task create"), err
    assert "title\n" in err  # the usage shows the title as an argument
    assert err.endswith("clawboo task create: error: unrecognized arguments: --title\n"), err
