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


def test_a_refused_move_names_the_moves_the_task_may_make(monkeypatch):
    # `clawboo task move ID todo` of a task in review said only "cannot move from
    # in_review to todo": the API's body says where it may go (`allowed`), the line did not.
    from executor.rest import ApiError

    refusal = {
        "error": "illegal_transition",
        "detail": "task 'demo-divide' cannot move from in_review to todo",
        "from": "in_review",
        "to": "todo",
        "allowed": ["done", "in_progress", "blocked", "cancelled"],
    }

    class Refusing:
        def call(self, method, path, body=None):
            raise ApiError(409, refusal)

    client = people.Client("http://127.0.0.1:8000", "k")
    monkeypatch.setattr(client, "api", Refusing())
    with pytest.raises(people.Failure) as failed:
        client.call("POST", "/api/board/tasks/demo-divide/transition", {"to": "todo"})
    assert failed.value.line == (
        "clawboo: 409 illegal_transition: task 'demo-divide' cannot move from in_review to"
        " todo (allowed: done, in_progress, blocked, cancelled)"
    )
    refusal["allowed"] = []  # a task that may go nowhere says so
    with pytest.raises(people.Failure) as failed:
        client.call("POST", "/api/board/tasks/demo-divide/transition", {"to": "todo"})
    assert failed.value.line.endswith("to todo (allowed: none)")


def test_a_server_that_refuses_the_connection_says_what_to_check(monkeypatch):
    # "clawboo: cannot reach http://127.0.0.1:8001: [Errno 111] Connection refused" and
    # nothing else: a new user whose `up` had stopped, or ran on another port, was left
    # to guess.
    from executor.rest import ServerUnreachable

    class Down:
        def call(self, method, path, body=None):
            try:
                raise ConnectionRefusedError(111, "Connection refused")
            except OSError as exc:
                raise ServerUnreachable("[Errno 111] Connection refused") from exc

    client = people.Client("http://127.0.0.1:8001", "k")
    monkeypatch.setattr(client, "api", Down())
    with pytest.raises(people.Failure) as failed:
        client.call("GET", "/api/board/tasks")
    assert failed.value.line == (
        "clawboo: cannot reach http://127.0.0.1:8001: [Errno 111] Connection refused"
        " (nothing listens there: is `clawboo up` running, and on that port?)"
    )


@pytest.mark.parametrize("argv", [["--version"], ["up", "--version"], ["demo", "--version"]])
def test_version_is_clawboos_also_after_a_commands_name(argv, capsys):
    # `clawboo up --version` printed "5.2.20": Django's version, every management
    # command's --version.
    from importlib.metadata import version

    from clawboo import cli

    cli.main(argv)
    assert capsys.readouterr().out == f"clawboo {version('clawboo')}\n"


def clawboo_in(cwd, *args: str, **env: str):
    """``clawboo ARGS`` as an operator runs it in ``cwd``: none of the suite's settings."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    clean = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CLAWBOO_", "DATABASE", "DJANGO_SECRET"))
        },
        "PYTHONPATH": str(root),
        **env,
    }
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "-m", "clawboo.cli", *args],
        cwd=cwd,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_command_run_where_no_up_ran_refuses_and_creates_no_state(tmp_path):
    # Run in another directory than `clawboo up`, create_agent_token (demo, …) made a
    # fresh ./.clawboo there and worked on its empty database, saying nothing of it.
    state = (tmp_path / ".clawboo").resolve()
    done = clawboo_in(tmp_path, "create_agent_token", "admin")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"clawboo: create_agent_token: no Clawboo state in this directory: {state} does not"
        " exist; run it in the directory `clawboo up` runs in, or set CLAWBOO_STATE_DIR (or"
        " DATABASE_URL) to that installation's state; `clawboo up` creates one on its first"
        " run\n"
    )
    named = tmp_path / "typo"
    done = clawboo_in(tmp_path, "createsuperuser", CLAWBOO_STATE_DIR=str(named))
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"clawboo: createsuperuser: CLAWBOO_STATE_DIR names {named.resolve()}, which does not"
        " exist;"
    )
    # A help page, the roles table and a mistyped name need no state either.
    assert clawboo_in(tmp_path, "create_agent_token", "--help").returncode == 0
    assert "# Who may do what" in clawboo_in(tmp_path, "roles").stdout
    assert "did you mean 'demo'" in clawboo_in(tmp_path, "dmo").stderr
    assert list(tmp_path.iterdir()) == []


# A database no test reaches: a command that got past the state check fails to connect.
NOWHERE = "postgres://nobody@127.0.0.1:1/nothing"


def test_with_a_database_url_a_command_run_where_no_up_ran_refuses_and_creates_no_state(
    tmp_path,
):
    # DATABASE_URL skipped the check, and the settings made ./.clawboo here, silently,
    # with a secret key of its own (tickets signed with it: not the server's).
    state = (tmp_path / ".clawboo").resolve()
    done = clawboo_in(tmp_path, "create_agent_token", "admin", DATABASE_URL=NOWHERE)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"clawboo: create_agent_token: no Clawboo state in this directory: {state} does not"
        " exist (with DATABASE_URL set it still keeps the secret key `clawboo up` generated);"
        " run it in the directory `clawboo up` runs in, or set CLAWBOO_STATE_DIR to that"
        " installation's state (or DJANGO_SECRET_KEY); `clawboo up` creates one on its first"
        " run\n"
    )
    # The roles table reads no state, with a database or not.
    assert "# Who may do what" in clawboo_in(tmp_path, "roles", DATABASE_URL=NOWHERE).stdout
    assert list(tmp_path.iterdir()) == []


def test_with_a_database_url_and_a_secret_key_a_command_runs_and_makes_no_state(tmp_path):
    # A host of a deployment (docs/operating.md, "Several hosts"): nothing to make at start.
    done = clawboo_in(
        tmp_path, "create_agent_token", "admin", DATABASE_URL=NOWHERE, DJANGO_SECRET_KEY="k"
    )
    assert done.returncode == 1 and "OperationalError" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_migrate_with_a_database_url_on_a_new_state_dir_says_what_it_keeps(tmp_path):
    from clawboo import statedir

    state = tmp_path / "state"
    start = statedir.at_start(
        ["migrate"], {"DATABASE_URL": NOWHERE, "CLAWBOO_STATE_DIR": str(state)}
    )
    assert start.note == (
        f"clawboo: new state directory {state.resolve()}, with a generated secret key; the"
        " database is DATABASE_URL's (an installation elsewhere keeps its own: run there, or"
        " set CLAWBOO_STATE_DIR)\n"
    )


def test_migrate_on_a_new_state_dir_says_it_is_new_and_where(tmp_path):
    # What sets an installation up (up's first run, migrate, demo) makes one, and says so.
    done = clawboo_in(tmp_path, "migrate", "-v", "0")
    assert done.returncode == 0, done.stderr
    state = (tmp_path / ".clawboo").resolve()
    assert done.stderr.startswith(
        f"clawboo: new state directory {state}, with a new, empty SQLite database"
    ), done.stderr
    assert (state / "clawboo.sqlite3").stat().st_size > 0
    # Now it is there: the operator's commands work on it, and say nothing of it.
    again = clawboo_in(tmp_path, "create_agent_token", "admin")
    assert again.returncode == 0, again.stderr
    assert again.stderr == "created user 'admin' (no password)\n"


def test_a_command_on_a_state_dir_with_no_tables_says_where_its_state_is(tmp_path):
    # An empty database (a state dir made and never migrated) said only
    # "clawboo: OperationalError: no such table: auth_user".
    (tmp_path / ".clawboo").mkdir()
    done = clawboo_in(tmp_path, "create_agent_token", "ada")
    assert done.returncode == 1
    database = (tmp_path / ".clawboo" / "clawboo.sqlite3").resolve()
    assert done.stderr == (
        "clawboo: OperationalError: no such table: auth_user"
        f" ({database} has no Clawboo tables: run this in the directory `clawboo up` runs"
        " in, whose state is ./.clawboo, or set CLAWBOO_STATE_DIR or DATABASE_URL to its;"
        " a new installation: `clawboo migrate` first)\n"
    ), done.stderr
