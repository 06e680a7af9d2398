"""The ``clawboo`` console script.

``clawboo`` alone prints its commands. ``clawboo up [--host H --port P --no-workers
--no-ticker]`` (or just the options: ``clawboo --port 9000``) runs the whole product;
any other first word is a Django management command (``clawboo migrate``,
``clawboo createsuperuser``, ``clawboo ticker`` …).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Sequence

try:
    from clawboo import people, statedir
    from core import procs
except KeyboardInterrupt:
    # Ctrl-C while the command loads (half a second: Django's modules come with the
    # people's client) ended in a traceback through the import machinery.
    sys.exit(130)

USAGE = """usage: clawboo <command> [options]

  up                 migrate, then serve the board, API and websockets, with the
                     workers and the routines ticker, until Ctrl-C
                     (--host 127.0.0.1 --port 8000 --no-workers --no-ticker)
  demo               a demo team, repository, agent, tasks and (paused) routine
  create_agent_token <user> [--team T] [--agent A]
                     print an API key (with --agent: a key that acts as A only)
  approve_agents     approve what agents run on this server (operators)
  createsuperuser    an admin user
  migrate            apply database migrations (up does it too)
  create_machine_token --host H --agent A [--agent …]
                     print the key a remote worker connects with (--revoke N)
  worker --server URL --token-file PATH [--agent A ...]
                     a remote worker: runs agents on this host over HTTPS only
                     (no database; see docs/remote-workers.md)
  work | ticker | qcluster | reconcile
                     one part alone, for a scaled deployment
  help [command]     every command, or one command's options

for people (a client of the REST API; `clawboo <command> --help` for options):
  login --server URL
                     log in with your username and password (or --token KEY)
  task list|show|create|edit|move|comment|claim|approve|deny|wait
  agent list|pause|resume
                     the agents, why one is paused; pause or resume it
  budget list|resume  the budgets, spend and state; resume a paused one (--grace CENTS)
  review ID          a task's diff and verdict; --approve or --request-changes TEXT
  approvals          what waits for your decision (--decide ID DECISION)
  watch --team T     a team's live events, one line each
  whoami | logout
"""


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        sys.stdout.write(USAGE)
        return
    if args[0] == "--json" and args[1:2] and args[1] in people.COMMANDS:
        args = [args[1], "--json", *args[2:]]  # `clawboo --json task list`: not `up --json`
    if args[0].startswith("-") and args[0] not in ("--version", "--help", "-h"):
        args = ["up", *args]
    if args[0] in ("--help", "-h"):
        sys.stdout.write(USAGE)
        return
    if args[0] in ("--version", "version") or (
        "--version" in args[1:] and args[0] not in (*people.COMMANDS, "worker")
    ):
        # Clawboo's own version (Django's answered it: "5.2.19"), also after a
        # command's name: `clawboo up --version` is Django's option of every command.
        from importlib.metadata import version

        sys.stdout.write(f"clawboo {version('clawboo')}\n")
        return
    if args[:1] == ["help"] and len(args) > 1 and args[1] in (*people.COMMANDS, "worker"):
        # Not Django commands: Django's help would call them unknown. A verb's too
        # (`clawboo help task list`): the verb's options, not its command's list.
        args = [*args[1:], "--help"]
    if args == ["help"]:
        # Django's list alone left out the people's commands and the worker.
        sys.stdout.write(USAGE + "\nand every management command:\n")
    if args[0] in people.COMMANDS:
        # Before Django is set up too: a person's client holds a URL and a key.
        sys.exit(people.main(args))
    if args[0] == "worker":
        # Before Django is set up: a remote worker holds a URL and a key, no database.
        sys.exit(worker(args[1:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    if os.environ.get(procs.ENV_FLAG) == "1":
        procs.forks_die_with_parent()  # started by `clawboo up`: see core.procs
    start = statedir.at_start(args)
    with contextlib.ExitStack() as scratch:
        if start.refusal or start.scratch:
            # Django's setup (the settings) would create the missing state directory:
            # a refusal or a help page leaves none behind.
            before = os.environ.get("CLAWBOO_STATE_DIR")
            scratch.callback(restore_env, "CLAWBOO_STATE_DIR", before)
            os.environ["CLAWBOO_STATE_DIR"] = scratch.enter_context(tempfile.TemporaryDirectory())
        run(args, start)


def restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def run(args: list[str], start: statedir.Start) -> None:
    """The Django management command ``args``, after what :func:`statedir.at_start`
    said about the state directory."""
    try:
        from django.core.management import execute_from_command_line

        refusal = unknown_command(args[0]) or start.refusal
        if refusal:
            sys.stderr.write(refusal)
            sys.exit(2)
        if start.note:
            sys.stderr.write(start.note)
        execute_from_command_line(["clawboo", *args])
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # e.g. bad settings, before any command could report it
        text = str(exc).strip().splitlines()
        sys.stderr.write(
            f"clawboo: {type(exc).__name__}: {text[0] if text else ''}{unmigrated(exc)}\n"
        )
        sys.exit(1)


def unmigrated(exc: Exception) -> str:
    """What to do when a command found a database with no tables: most often it was
    run in another directory than `clawboo up`, whose state (./.clawboo) it then is
    not. "OperationalError: no such table: auth_user" alone named neither."""
    from django.db import DatabaseError

    said = str(exc)
    if not isinstance(exc, DatabaseError) or not (
        "no such table" in said or ("relation" in said and "does not exist" in said)
    ):
        return ""
    from django.conf import settings

    database = settings.DATABASES["default"]
    where = str(database["NAME"]) if "sqlite" in str(database["ENGINE"]) else "the database"
    return (
        f" ({where} has no Clawboo tables: run this in the directory `clawboo up` runs in,"
        " whose state is ./.clawboo, or set CLAWBOO_STATE_DIR or DATABASE_URL to its;"
        " a new installation: `clawboo migrate` first)"
    )


def unknown_command(name: str) -> str | None:
    """One line for a first word that is no command, naming the closest one: Django's
    own answer pointed at `clawboo help`, whose list leaves out the people's commands,
    and guessed only among its own (``tsk`` never led to ``task``)."""
    import difflib

    import django
    from django.core.management import get_commands

    django.setup()
    known = [*people.COMMANDS, "worker", "help", *get_commands()]
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=1)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    return f"clawboo: unknown command {name!r}{guess}; `clawboo` alone lists the commands\n"


# ``clawboo worker``'s exit statuses besides 0 and 130 (Ctrl-C).
EXIT_REFUSED = 2  # an agent this host will not run, or the server refused one
EXIT_REVOKED = 3  # the server refused the token
EXIT_USAGE = 2  # as argparse's own usage errors: no key, or a key file others may read
ARGV_KEY_WARNING = (
    "clawboo worker: warning: --token puts the machine key in the process list, where"
    " every local user (and every agent this worker runs) can read it: use --token-file"
    " PATH (chmod 600) or CLAWBOO_TOKEN instead\n"
)


class TokenUnusable(Exception):
    """No machine key, or a key file that is not the user's alone: one line."""


def worker_token(token_file: str | None, token: str | None, server: str) -> str:
    """The worker's machine key: ``--token-file`` (the user's alone, as ssh asks of a
    key), ``--token`` (``-``: stdin; a key on the command line is warned about: any
    local user reads it in ``ps``), ``CLAWBOO_TOKEN``, else the key ``clawboo login``
    stored -- for this same server only, so a key never travels to another."""
    if token_file and token:
        raise TokenUnusable("give --token-file or --token, not both")
    if token_file:
        return _key_from_file(token_file)
    if token == "-":  # noqa: S105 - the stdin marker, not a key
        return _key_or_refuse(sys.stdin.readline(), "stdin")
    if token:
        sys.stderr.write(ARGV_KEY_WARNING)
        return token
    if os.environ.get("CLAWBOO_TOKEN"):
        return os.environ["CLAWBOO_TOKEN"].strip()
    stored = people.stored_login_file()
    if stored.get("token") and stored.get("server", "").rstrip("/") == server.rstrip("/"):
        return stored["token"]
    raise TokenUnusable(
        "no machine key: give --token-file PATH (chmod 600) or set CLAWBOO_TOKEN (mint one"
        " on the server: `clawboo create_machine_token --host H --agent A`)"
    )


def _key_from_file(path: str) -> str:
    try:
        # Opened once, then checked by its descriptor: the file read is the file checked.
        with open(path, encoding="utf-8") as found:
            mode = os.fstat(found.fileno()).st_mode & 0o777
            if mode & 0o077:
                raise TokenUnusable(
                    f"--token-file {path}: permissions {mode:04o} are too open (group or"
                    f" others may read the key): chmod 600 {path}"
                )
            text = found.readline()
    except OSError as exc:
        raise TokenUnusable(f"--token-file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TokenUnusable(f"--token-file {path}: not a text file") from None
    return _key_or_refuse(text, f"--token-file {path}")


def _key_or_refuse(text: str, where: str) -> str:
    key = text.strip()
    if not key:
        raise TokenUnusable(f"{where}: holds no key")
    return key


def worker(argv: Sequence[str]) -> int:
    """``clawboo worker --server URL --token-file PATH [--agent A ...]``
    (:mod:`executor.remote`): run until the token is revoked or Ctrl-C."""
    import argparse
    import logging
    import urllib.parse
    from pathlib import Path

    from executor import remote

    parser = argparse.ArgumentParser(
        prog="clawboo worker", description=remote.__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--server",
        default=people.stored_login()["server"],
        help="the server's base URL (default: CLAWBOO_SERVER, else `clawboo login`'s)",
    )
    parser.add_argument(
        "--token-file",
        help="a file holding the machine key; refused when group or others may read it (chmod 600)",
    )
    parser.add_argument(
        "--token",
        help="the machine key ('-': read it from stdin); a key given here is in the"
        " process list for every local user: prefer --token-file or CLAWBOO_TOKEN",
    )
    parser.add_argument("--agent", action="append", default=[], help="an agent to run")
    parser.add_argument(
        "--cache-dir",
        default=os.environ.get("CLAWBOO_WORKER_DIR", str(Path.home() / ".cache/clawboo-worker")),
    )
    parser.add_argument("--heartbeat", type=float, default=10.0, help="seconds between beats")
    parser.add_argument("--poll", type=float, default=30.0, help="seconds between idle checks")
    parser.add_argument(
        "--run-timeout",
        type=float,
        default=None,
        help="seconds a run may take (default: the agent's settings.timeout_s, else 3600)",
    )
    parser.add_argument(
        "--lease-ms", type=int, help="lease asked for on claims and heartbeats (server default)"
    )
    parser.add_argument("--once", action="store_true", help="work what is ready, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if not args.server:
        parser.error("--server URL is required (or CLAWBOO_SERVER, or `clawboo login`)")
    if urllib.parse.urlsplit(args.server).scheme not in ("http", "https"):
        parser.error("--server must be an http:// or https:// URL")
    try:
        token = worker_token(args.token_file, args.token, args.server)
    except TokenUnusable as exc:
        sys.stderr.write(f"clawboo worker: {exc}\n")
        return EXIT_USAGE
    api = remote.Api(args.server, token)
    try:
        me = {} if args.agent else api.call_patiently("GET", "/api/whoami")[1]
        agents = args.agent or me.get("agents") or []
        if not agents and me.get("principal") not in (None, "machine"):
            # A person's key (the tour's `create_agent_token admin`) or an agent's:
            # "the token names none" sent its holder looking for an --agent to add.
            whose = "own key" if me["principal"] == "person" else "key of an agent"
            parser.error(
                f"the token is {me['username']}'s {whose}, not a machine token: mint this"
                " host one on the server (`clawboo create_machine_token --host H --agent A`)"
            )
        if not agents:
            parser.error("no --agent given and the token names none")
        remote.Worker(
            api,
            agents,
            Path(args.cache_dir),
            args.heartbeat,
            args.poll,
            args.run_timeout,
            args.lease_ms,
        ).serve(once=args.once)
    except remote.Revoked as exc:
        # The server's sentence ends with where a person's key comes from ("`clawboo
        # create_agent_token <user>` … prints a current one"): beside this line's own
        # advice it read as two answers. A host's key comes from create_machine_token.
        why = str(exc).split("; `clawboo create_agent_token")[0]
        sys.stderr.write(
            f"clawboo worker: the server refused the token: {why}; stopping (mint this host"
            " a key on the server: `clawboo create_machine_token --host H --agent A`)\n"
        )
        return EXIT_REVOKED
    except (remote.ApiError, remote.Refused) as exc:  # e.g. 403: not its agent to run
        sys.stderr.write(f"clawboo worker: {exc}\n")
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    main()
