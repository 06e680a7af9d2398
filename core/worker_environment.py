"""What of the server's (or a worker's) environment an agent's process never inherits.

GOVERNANCE §6: the governed never hold the keys. An agent's run, its verify gate and
the critic's review are child processes of the server's (or ``clawboo worker``'s) OS
user, and a child inherits its parent's environment. Whatever the operator set there
for the board's own use -- its database (``DATABASE_URL``, and libpq's ``PG*``
variables psycopg connects with: ``PGPASSWORD``, ``PGHOST``, ``PGUSER``,
``PGPASSFILE``, ``PGSERVICE``...), its Redis, its secret key, its mail account, its
telemetry collector's headers, every ``CLAWBOO_*`` knob (a remote worker's machine
token among them) -- would let an agent reach the board's storage directly, around
every rule of the roles table. :data:`WORKERS_OWN` is the one table of those names,
read by every place that starts a process an agent controls (a runtime's CLI, the
gate, git in a checkout the agent wrote to): :func:`agent_environment`.

Adding a variable the server or a worker reads for itself (``clawboo/settings.py``,
``clawboo worker``) is adding a row here; ``tests/runtimes/test_agent_environment.py``
fails on a ``os.environ`` name ``clawboo/settings.py`` reads that no row covers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Own:
    """One name (``exact``) or family of names (a prefix) the worker keeps for itself."""

    name: str
    prefix: bool
    why: str

    def covers(self, key: str) -> bool:
        return key.startswith(self.name) if self.prefix else key == self.name


WORKERS_OWN: tuple[Own, ...] = (
    Own("CLAWBOO_", True, "the board's knobs; a remote worker's CLAWBOO_TOKEN (machine key)"),
    Own("DJANGO_", True, "DJANGO_SECRET_KEY (signs tickets), DJANGO_SETTINGS_MODULE"),
    Own("DATABASE_URL", False, "the board's database"),
    Own("PG", True, "libpq's variables: PGPASSWORD, PGHOST, PGUSER, PGPASSFILE, PGSERVICE..."),
    Own("REDIS_URL", False, "a Redis the operator set for the board"),
    Own("EMAIL_", True, "the notifications' mail account (EMAIL_HOST_PASSWORD...)"),
    Own("ALLOWED_HOSTS", False, "the server's own host names"),
    Own("OTEL_", True, "the trace collector's endpoint and headers (its credential)"),
)


def is_workers_own(key: str) -> bool:
    """Whether the variable ``key`` is the server's or worker's own (:data:`WORKERS_OWN`)."""
    return any(row.covers(key) for row in WORKERS_OWN)


def agent_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without the worker's own variables: what
    a process an agent controls may inherit (PATH, HOME, a CLI's own credentials)."""
    source = os.environ if environ is None else environ
    return {key: value for key, value in source.items() if not is_workers_own(key)}
