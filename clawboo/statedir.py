"""Where this installation's state lives, and what a command run where there is none
does: read without Django, so the console script asks before the settings create it.

The state directory (``CLAWBOO_STATE_DIR``, else ``./.clawboo`` in the directory a
command runs in) holds the SQLite database unless ``DATABASE_URL`` names another, the
generated secret key, worktrees and logs. Importing the settings creates it, empty: an
operator's command run in another directory than ``clawboo up`` used to work on a
fresh, empty database of its own and say nothing about it. So, before Django starts:

- a command that sets an installation up (``up`` on its first run, ``migrate``, and
  ``demo``, which migrates first and which the getting-started guide lets run before
  ``up``) creates it, and says it is new and where;
- any other command refuses, creating nothing, and says where it looked;
- a command that reads no state (``roles``, ``help``, any ``--help``) runs against a
  scratch one, removed after it.

``DATABASE_URL`` moves the database only: the state directory still keeps the secret
key the settings generate when ``DJANGO_SECRET_KEY`` is unset (tickets are signed
with it), and a command run elsewhere made a directory there, silently, with a second
key whose tickets the server refuses.
So the rules above hold with it too; only with ``DJANGO_SECRET_KEY`` set as well (a
host of a deployment, docs/operating.md "Several hosts") is there nothing to make at
start, and a command runs where it is (one that keeps files, ``work``'s worktrees,
makes the directory when it needs it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# The commands that may make a state directory where there is none.
CREATES_STATE = frozenset({"up", "migrate", "demo"})
# The commands that read no state (the roles table, Django's checks, a developer's
# migration files): run against a scratch one rather than refused.
READS_NO_STATE = frozenset({"roles", "check", "makemigrations", "help"})


def state_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """The state directory, as the settings read it."""
    return Path(environ.get("CLAWBOO_STATE_DIR", ".clawboo")).expanduser().resolve()


@dataclass(frozen=True)
class Start:
    """What a management command is told before Django starts: ``refusal`` (a line,
    exit 2, nothing created), ``note`` (a line, then it runs), or ``scratch`` (run
    against a throwaway state: it asks only for help)."""

    refusal: str | None = None
    note: str | None = None
    scratch: bool = False


def at_start(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> Start:
    """What running the management command ``args`` (its name first) should do about
    the state directory."""
    state = state_dir(environ)
    if state.exists():
        return Start()
    name = args[0]
    if name in READS_NO_STATE or "--help" in args[1:] or "-h" in args[1:]:
        return Start(scratch=True)
    database_url = bool(environ.get("DATABASE_URL"))
    if database_url and environ.get("DJANGO_SECRET_KEY"):
        return Start()  # the settings make nothing: the database and the key are named
    if database_url:
        holds = "a generated secret key; the database is DATABASE_URL's"
        instead = "or set CLAWBOO_STATE_DIR to that installation's state (or DJANGO_SECRET_KEY)"
    else:
        holds = "a new, empty SQLite database"
        instead = "or set CLAWBOO_STATE_DIR (or DATABASE_URL) to that installation's state"
    if name in CREATES_STATE:
        return Start(
            note=f"clawboo: new state directory {state}, with {holds}"
            " (an installation elsewhere keeps its own: run there, or set CLAWBOO_STATE_DIR)\n"
        )
    if environ.get("CLAWBOO_STATE_DIR"):
        where = f"CLAWBOO_STATE_DIR names {state}, which does not exist"
    else:
        where = f"no Clawboo state in this directory: {state} does not exist"
    if database_url:
        where += " (with DATABASE_URL set it still keeps the secret key `clawboo up` generated)"
    return Start(
        refusal=f"clawboo: {name}: {where}; run it in the directory `clawboo up` runs in,"
        f" {instead}; `clawboo up` creates one on its first run\n"
    )
