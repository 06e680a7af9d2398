"""Shared fixtures: the database under test (SQLite file or PostgreSQL) and a way
for real subprocesses to open that same database."""

from __future__ import annotations

import json
import os
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


def pytest_report_header(config: Any) -> str:
    url = os.environ.get("CLAWBOO_TEST_DATABASE_URL")
    return f"clawboo backend: {'postgresql' if url else 'sqlite'}"


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
    first migration creates; put it back, as a fresh install has it."""
    marker = request.node.get_closest_marker("django_db")
    transactional = "transactional_db" in request.fixturenames or (
        marker is not None and marker.kwargs.get("transaction")
    )
    if transactional:
        request.getfixturevalue("transactional_db")
        from core.registry import ensure_team

        ensure_team("default", "Default team")


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
def race(
    run_worker: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> Callable[..., list[dict[str, Any]]]:
    """Start one worker per argv, wait until every one is connected and parked at a
    barrier file, open it, and return each worker's final JSON result in order."""

    def start(
        argvs: list[list[str]], extra_env: dict[str, str] | None = None, timeout: float = 120
    ) -> list[dict[str, Any]]:
        barrier = tmp_path / f"barrier-{time.monotonic_ns()}"
        procs = [
            run_worker("--barrier", str(barrier), *argv, extra_env=extra_env) for argv in argvs
        ]
        try:
            for proc in procs:
                assert read_json_line(proc) == {"ready": True}
            barrier.touch()
            results = []
            for proc in procs:
                out, err = proc.communicate(timeout=timeout)
                assert proc.returncode == 0, err
                results.append(json.loads(out.strip().splitlines()[-1]))
            return results
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

    return start
