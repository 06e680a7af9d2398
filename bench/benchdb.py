"""A throwaway board database for the benchmarks: a SQLite file in a temp dir, or a
database of its own on the PostgreSQL server (created, migrated, dropped).

Rows are seeded with raw bulk SQL (COPY on PostgreSQL) so 100k tasks take seconds.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core.storage import SQLITE_PRAGMAS as STORAGE_PRAGMAS

ROOT = Path(__file__).resolve().parent.parent
PG_URL = os.environ.get("CLAWBOO_BENCH_PG_URL", "postgres://root@127.0.0.1:5432/test")
# The storage layer's contention recipe, so raw baselines run on the database
# exactly as the board's own connections see it (wal_autocheckpoint=50 alone halves
# a raw UPDATE loop's rate against SQLite's default of 1000).
SQLITE_PRAGMAS = tuple(f"PRAGMA {name}={value}" for name, value in STORAGE_PRAGMAS)
# What reset() empties: the board's tables and django-q2's ORM queue.
RESET_TABLES = (
    "events", "execution_processes", "task_comments", "task_deps", "tasks", "django_q_ormq",
)  # fmt: skip
TASK_COLUMNS = (
    "id, team_id, title, description, goal, context, status, priority, labels, metadata, "
    "attempts, abandonments, scheduled_by, file_mutating, cost_tokens, cost_cents, dropped, "
    "revision, write_log, write_log_truncated, incarnation_id, create_fingerprint, "
    "created_at, updated_at, lease_until, parent_task_id, unmet_deps, tree_cost_tokens, "
    "tree_cost_cents"
)


def migrate(env: dict[str, str], sqlite_path: Path | None = None, root: Path = ROOT) -> None:
    """``manage.py migrate`` of a fresh database. With ``CLAWBOO_BENCH_TEMPLATE_DIR``
    set (the test suite's smoke tests set it) a SQLite file at ``sqlite_path`` is
    migrated once per set of migrations (and ``CLAWBOO_*`` settings) into that folder,
    then copied: a migration from scratch costs seconds and each bench makes one or two
    databases. Elsewhere, and on PostgreSQL, it migrates as ever."""
    argv = [sys.executable, str(root / "manage.py"), "migrate", "-v0"]
    folder = os.environ.get("CLAWBOO_BENCH_TEMPLATE_DIR")
    if sqlite_path is None or not folder:
        subprocess.run(argv, env=env, cwd=root, check=True)
        return
    digest = hashlib.sha256()
    for path in sorted(root.glob("*/migrations/*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    for name in sorted(k for k in env if k.startswith("CLAWBOO_") and k != "CLAWBOO_STATE_DIR"):
        digest.update(f"{name}={env[name]}\0".encode())
    template = Path(folder) / f"{digest.hexdigest()[:20]}.sqlite3"
    with open(Path(folder) / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one migrates; the others wait and copy
        if not template.exists():
            building = template.with_suffix(".building")
            url = f"sqlite:///{building}"
            subprocess.run(argv, env={**env, "DATABASE_URL": url}, cwd=root, check=True)
            conn = sqlite3.connect(building)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the one file
            conn.close()
            os.replace(building, template)
    shutil.copyfile(template, sqlite_path)
    os.chmod(sqlite_path, 0o600)


def pg_answers() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=2):
            return True
    except Exception:
        return False


class BenchDB:
    """``tag`` tells apart two PostgreSQL databases one process keeps at once."""

    def __init__(self, backend: str, tag: str = "") -> None:
        self.backend = backend
        self.tmp = Path(tempfile.mkdtemp(prefix=f"clawboo-bench-{backend}-"))
        if backend == "sqlite":
            self.path = str(self.tmp / "bench.sqlite3")
            self.url = f"sqlite:///{self.path}"
        else:
            import psycopg

            self.name = f"clawboo_bench_{os.getpid()}{tag}"
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {self.name}")
                conn.execute(f"CREATE DATABASE {self.name}")
            parts = urlsplit(PG_URL)
            self.url = f"{parts.scheme}://{parts.netloc}/{self.name}"
        self.env = {
            **os.environ,
            "DATABASE_URL": self.url,
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "CLAWBOO_STATE_DIR": str(self.tmp / "state"),
            "DJANGO_SECRET_KEY": "bench-only-" + secrets.token_hex(16),
            "PYTHONPATH": str(ROOT),
        }
        migrate(self.env, Path(self.path) if backend == "sqlite" else None)

    def connect(self) -> Any:
        """A raw driver connection in autocommit mode."""
        if self.backend == "sqlite":
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=0.25)
            for pragma in SQLITE_PRAGMAS:
                conn.execute(pragma)
            return conn
        import psycopg

        return psycopg.connect(self.url, autocommit=True)

    def stamp(self, value: dt.datetime | None) -> Any:
        if value is None or self.backend != "sqlite":
            return value
        return value.astimezone(dt.UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")

    def reset(self) -> None:
        conn = self.connect()
        try:
            for table in RESET_TABLES:
                conn.execute(f"DELETE FROM {table}")
            conn.execute("UPDATE teams SET last_event_seq = 0")
            if self.backend == "sqlite":
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            else:
                for table in RESET_TABLES:
                    conn.execute(f"VACUUM ANALYZE {table}")
        finally:
            conn.close()

    def task_row(
        self,
        task_id: str,
        created_at: dt.datetime,
        *,
        status: str = "todo",
        priority: int = 0,
        lease_until: dt.datetime | None = None,
        parent: str | None = None,
        unmet_deps: int = 0,
    ) -> tuple[Any, ...]:
        return (
            task_id, "default", f"task {task_id}", "", "", "", status, priority, "[]", "{}",
            0, 0, "manual", True, 0, 0, False, 1, "[]", False, secrets.token_hex(8), "",
            self.stamp(created_at), self.stamp(created_at), self.stamp(lease_until), parent,
            unmet_deps, 0, 0,
        )  # fmt: skip

    def insert(self, table: str, columns: str, rows: Iterable[Sequence[Any]]) -> None:
        conn = self.connect()
        try:
            if self.backend == "sqlite":
                marks = ", ".join("?" for _ in columns.split(","))
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
                conn.execute("COMMIT")
                conn.execute("ANALYZE")
            else:
                with conn.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
                conn.execute(f"ANALYZE {table}")
        finally:
            conn.close()

    def insert_tasks(self, rows: Iterable[Sequence[Any]]) -> None:
        self.insert("tasks", TASK_COLUMNS, rows)

    def recount_unmet_deps(self) -> None:
        """Set each task's unmet-dependency counter from the graph, as the data layer
        would have kept it (bulk-seeded rows bypass the data layer)."""
        sql = (
            "UPDATE tasks SET unmet_deps = (SELECT COUNT(*) FROM task_deps d "
            "JOIN tasks u ON u.id = d.depends_on_task_id "
            "WHERE d.task_id = tasks.id AND u.status <> 'done')"
        )
        conn = self.connect()
        try:
            conn.execute(sql)
            conn.commit()
            # The planner statistics insert() took predate the counts: refresh them,
            # or stale ones send the ready queries to a sort of every todo task.
            conn.execute("ANALYZE")
            conn.commit()
        finally:
            conn.close()

    def drop(self) -> None:
        if self.backend == "postgresql":
            import psycopg

            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                    [self.name],
                )
                conn.execute(f"DROP DATABASE IF EXISTS {self.name}")
        shutil.rmtree(self.tmp, ignore_errors=True)
