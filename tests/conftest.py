"""Shared fixtures: the database under test (SQLite file or PostgreSQL) and a way
for real subprocesses to open that same database."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent

# Fixtures more than one directory uses, registered once here (pytest allows
# ``pytest_plugins`` only in the root conftest): a test asks for them by name and
# imports no fixture from another directory's conftest.
pytest_plugins = [
    "tests.fixtures.runs",  # state_dir, repo, script, command_agent
    "tests.fixtures.servers",  # daphne
    "tests.fixtures.routines",  # clock, team
    "tests.fixtures.gateway",  # gateway_fake
    "tests.live.browsing",  # chromium (one per module), browser (one test's use of it)
    "pytester",  # tests/live/test_browsing.py runs the browser fixtures in a pytest of its own
]


ON_POSTGRESQL = bool(os.environ.get("CLAWBOO_TEST_DATABASE_URL"))
# The PostgreSQL pass re-runs only what the database can change (see docs/development.md,
# the PostgreSQL pass); CLAWBOO_TEST_EVERYTHING=1 runs every test on PostgreSQL too.
EVERYTHING = os.environ.get("CLAWBOO_TEST_EVERYTHING") == "1"
# Asking for any of these (directly or through another fixture) is touching the
# database; a test that asks for none cannot (pytest-django blocks it).
DB_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}
)


def pytest_report_header(config: Any) -> str:
    backend = "postgresql" if ON_POSTGRESQL else "sqlite"
    if ON_POSTGRESQL and not EVERYTHING:
        backend += " (backend-independent tests skipped: they ran on SQLite)"
    return f"clawboo backend: {backend}"


# Whole modules that are backend_independent, named here rather than marked in the
# file: browser tests of what a page does (drag, filters in the URL, keys, forms, how
# a panel renders). What they read and write is the API's, proven on both engines by
# tests/api and tests/routines; the live path on PostgreSQL + Redis keeps a browser
# of its own there (test_browser.py), as do the pages whose numbers or races the
# database decides (approvals, spend, run output, discussion edits).
BACKEND_INDEPENDENT_MODULES = (
    "tests/live/test_board_browser.py",
    "tests/live/test_newuser5_browser.py",
    "tests/live/test_review_browser.py",
    "tests/live/test_routines_browser.py",
)


def touches_database(item: pytest.Item) -> bool:
    return (
        item.get_closest_marker("django_db") is not None
        or item.get_closest_marker("every_backend") is not None
        or bool(DB_FIXTURES & set(getattr(item, "fixturenames", ())))
    )


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    """The backend rule, decided before any fixture runs (so a skipped test starts
    no servers and flushes no tables):

    - ``sqlite_only`` / ``postgresql_only``: the claim is about that engine alone.
    - On PostgreSQL, a test that never touches the database, or one marked
      ``backend_independent`` (it does, but what it proves cannot depend on the
      engine), is skipped: the SQLite pass ran it. A test that opens the backend
      under test without pytest-django's fixtures (the bench smoke tests make their
      own database) says so with ``every_backend``."""
    for item in items:
        if item.nodeid.split("::")[0] in BACKEND_INDEPENDENT_MODULES:
            item.add_marker(pytest.mark.backend_independent)
        if ON_POSTGRESQL and item.get_closest_marker("sqlite_only"):
            item.add_marker(pytest.mark.skip(reason="sqlite_only: SQLite's behaviour"))
        elif not ON_POSTGRESQL and item.get_closest_marker("postgresql_only"):
            item.add_marker(pytest.mark.skip(reason="postgresql_only: PostgreSQL's behaviour"))
        elif ON_POSTGRESQL and not EVERYTHING:
            if item.get_closest_marker("backend_independent"):
                why = "backend_independent: ran on SQLite"
            elif not touches_database(item):
                why = "no database: ran on SQLite"
            else:
                continue
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture
def database_url(transactional_db: None) -> str:
    """A DATABASE_URL naming the test database, for worker subprocesses."""
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or ""
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{settings_dict['NAME']}"


@pytest.fixture
def run_worker(database_url: str, tmp_path: Path) -> Callable[..., subprocess.Popen[str]]:
    """Start ``tests/workers.py <command> <args>`` as a real OS process on the test DB."""

    def start(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
            "PYTHONPATH": str(ROOT),
            # Tickets are signed: workers and the test must share the key.
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            **(extra_env or {}),
        }
        return subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "workers.py"), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    return start


@pytest.fixture(autouse=True)
def _default_team_survives_flush(request: pytest.FixtureRequest) -> None:
    """Transactional tests flush every table, including the ``default`` team that the
    first migration creates; put it back, as a fresh install has it -- for every test
    on the database, not only transactional ones: pytest-django runs a pass's ``db``
    tests first, but a pytest-xdist worker runs whole files in the order it is handed
    them, so a ``db`` test may follow a flush (its own transaction rolls this back)."""
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or (
        marker is not None and marker.kwargs.get("transaction")
    )
    if transactional:
        request.getfixturevalue("transactional_db")
    elif marker is not None or "db" in request.fixturenames:
        request.getfixturevalue("db")
    else:
        return
    from core.registry import ensure_team

    ensure_team("default", "Default team")


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Any:
    """A command run in-process (``clawboo worker``'s ``logging.basicConfig``) adds a
    root handler bound to the stream pytest captured for that test; a later test's
    library logging (websockets' "connection closed") then wrote to a closed file.
    Each test leaves the root logger as it found it."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> Any:
    """Each test gets its own channel layer instance. channels-redis keeps its
    receive lock per instance, bound to the event loop that made it: a consumer of
    an earlier test cancelled while holding it leaves it locked to a loop that is
    gone, and the next test's consumer fails ("bound to a different event loop")."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(scope="session", autouse=True)
def _drop_stray_connections(django_db_setup: None, django_db_blocker: Any) -> Any:
    """Before the test database is dropped, end sessions that servers, workers or
    threads left open on it (PostgreSQL refuses to drop a database in use)."""
    yield
    from core import wakeups

    wakeups.stop_watching()  # its connection must not outlive the database
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


# What every migrate writes and no test changes: the content types and the model
# permissions. A transactional test's flush keeps their rows, and so need not send
# post_migrate to the two receivers that write them again (a tenth of a second each
# test, over 400 transactional tests a pass); every other post_migrate receiver
# (the periodic schedules) still runs after each flush.
KEPT_BY_FLUSH = ("django_content_type", "auth_permission")


@pytest.fixture(scope="session", autouse=True)
def _flush_keeps_what_migrate_wrote() -> Any:
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.core.management.commands import flush
    from django.db.models.signals import post_migrate

    real_sql_flush, real_emit = flush.sql_flush, flush.emit_post_migrate_signal

    def sql_flush(style: Any, conn: Any, *args: Any, **kw: Any) -> list[str]:
        tables = conn.introspection.django_table_names(only_existing=True, include_views=False)
        kept = [table for table in tables if table not in KEPT_BY_FLUSH]
        return conn.ops.sql_flush(style, kept, *args, **kw)

    def emit(*args: Any, **kw: Any) -> None:
        auth_uid = "django.contrib.auth.management.create_permissions"
        post_migrate.disconnect(create_contenttypes)
        post_migrate.disconnect(dispatch_uid=auth_uid)
        try:
            real_emit(*args, **kw)
        finally:
            post_migrate.connect(create_contenttypes)
            post_migrate.connect(create_permissions, dispatch_uid=auth_uid)

    flush.sql_flush, flush.emit_post_migrate_signal = sql_flush, emit  # type: ignore[assignment]
    yield
    flush.sql_flush, flush.emit_post_migrate_signal = real_sql_flush, real_emit


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete_on_postgresql() -> Any:
    """A transactional test ends with Django's flush: on PostgreSQL one TRUNCATE of
    every table, which makes each table's files anew and syncs them at commit, a
    second a test on a busy disk. DELETE of the few rows a test wrote ends the same
    (every table empty, sequences left as TRUNCATE without RESTART IDENTITY leaves
    them, post_migrate sent after) in milliseconds; the foreign keys are deferred to
    the commit. The product never flushes: this changes only the tests' clean-up."""
    if not ON_POSTGRESQL:
        yield
        return
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(
        self: Any, style: Any, tables: Any, *, reset_sequences: bool = False, **kw: Any
    ) -> list[str]:
        if reset_sequences or kw.get("allow_cascade") or not tables:
            return truncate(self, style, tables, reset_sequences=reset_sequences, **kw)
        deletes = [f"DELETE FROM {self.quote_name(table)};" for table in tables]
        return ["SET CONSTRAINTS ALL DEFERRED;", *deletes]

    DatabaseOperations.sql_flush = sql_flush  # type: ignore[method-assign]
    yield
    DatabaseOperations.sql_flush = truncate  # type: ignore[method-assign]


@pytest.fixture
def default_team(db: None) -> str:
    """The team every task lands in by default (a transactional test's flush drops
    the row the data migration created, so put it back)."""
    from core.models import Team

    Team.objects.get_or_create(pk="default", defaults={"name": "Default team"})
    return "default"


def read_json_line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    """The next JSON line a worker printed (raises with its stderr if it died)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(timeout=30)
        raise AssertionError(f"worker exited {proc.returncode}: {proc.stderr.read()}")
    return json.loads(line)


@pytest.fixture
def race(database_url: str, tmp_path: Path) -> Callable[..., list[dict[str, Any]]]:
    """Run one OS process per argv (``tests/workers.py`` commands) on the test
    database: wait until every one is connected and parked at a barrier file, open
    it, and return each process's JSON result in order.

    The processes are forked from one that set Django up (``workers.py
    --fork-race``): each is its own process with its own connection, as a worker
    is, but a storm of twelve pays Django's start once, not twelve times."""

    def start(
        argvs: list[list[str]], extra_env: dict[str, str] | None = None, timeout: float = 120
    ) -> list[dict[str, Any]]:
        run = tmp_path / f"race-{time.monotonic_ns()}"
        out = run / "out"
        out.mkdir(parents=True)
        barrier = run / "barrier"
        spec = run / "spec.json"
        spec.write_text(json.dumps({"argvs": argvs, "barrier": str(barrier), "out": str(out)}))
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
            "PYTHONPATH": str(ROOT),
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            **(extra_env or {}),
        }
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "workers.py"), "--fork-race", str(spec)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            start_new_session=True,  # the forked racers die with it
        )

        def errors() -> str:
            return "\n".join(p.read_text() for p in sorted(out.glob("*.err")))

        try:
            deadline = time.monotonic() + 120
            while len(list(out.glob("*.ready"))) < len(argvs):
                if proc.poll() is not None or list(out.glob("*.err")):
                    proc.wait(timeout=30)
                    raise AssertionError(f"a racer died before the barrier: {errors()}")
                assert time.monotonic() < deadline, "the racers never all got ready"
                time.sleep(0.01)
            barrier.touch()
            _, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, f"{err}\n{errors()}"
            return [json.loads((out / f"{i}.json").read_text()) for i in range(len(argvs))]
        finally:
            try:  # whatever is left of the group, spawner or racer
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    return start
