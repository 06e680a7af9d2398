"""The ``clawboo`` console script.

``clawboo`` alone prints its commands. ``clawboo up [--host H --port P --no-workers
--no-ticker]`` (or just the options: ``clawboo --port 9000``) runs the whole product;
any other first word is a Django management command (``clawboo migrate``,
``clawboo createsuperuser``, ``clawboo ticker`` …).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from clawboo import people
from core import procs

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
  worker --server URL --token KEY [--agent A ...]
                     a remote worker: runs agents on this host over HTTPS only
                     (no database; see docs/remote-workers.md)
  work | ticker | qcluster | reconcile
                     one part alone, for a scaled deployment
  help [command]     every command, or one command's options

for people (a client of the REST API; `clawboo <command> --help` for options):
  login --server URL log in with your username and password (or --token KEY)
  task list|show|create|edit|move|comment|claim|approve|deny|wait
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
    if args[0].startswith("-") and args[0] not in ("--version", "--help", "-h"):
        args = ["up", *args]
    if args[0] in ("--help", "-h"):
        sys.stdout.write(USAGE)
        return
    if args[0] in people.COMMANDS:
        # Before Django is set up too: a person's client holds a URL and a key.
        sys.exit(people.main(args))
    if args[0] == "worker":
        # Before Django is set up: a remote worker holds a URL and a key, no database.
        from executor.remote import main as worker_main

        sys.exit(worker_main(args[1:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    if os.environ.get(procs.ENV_FLAG) == "1":
        procs.forks_die_with_parent()  # started by `clawboo up`: see core.procs
    try:
        from django.core.management import execute_from_command_line

        execute_from_command_line(["clawboo", *args])
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # e.g. bad settings, before any command could report it
        text = str(exc).strip().splitlines()
        sys.stderr.write(f"clawboo: {type(exc).__name__}: {text[0] if text else ''}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
