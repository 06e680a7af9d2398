"""The PostgreSQL connection pool: configured from the CLAWBOO_DB_POOL_* knobs, and
shown by /healthz and /metrics (a real process on a real PostgreSQL database)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.benchdb import BenchDB, pg_answers
from clawboo.settings import database_config, db_pool_options

ROOT = Path(__file__).resolve().parents[2]


def test_a_postgresql_url_gets_djangos_pool_sized_by_the_knobs(tmp_path):
    pool = db_pool_options(min_size=2, max_size=12, timeout_s=5)
    config = database_config("postgres://u@db:5432/board", tmp_path, pool=pool)
    assert config["OPTIONS"] == {"pool": {"min_size": 2, "max_size": 12, "timeout": 5}}
    assert config["CONN_MAX_AGE"] == 0  # Django's pool requires it
    assert config["CONN_HEALTH_CHECKS"] is True  # a connection dropped in the pool is replaced


def test_a_max_size_of_zero_turns_the_pool_off_and_sqlite_never_has_one(tmp_path):
    assert db_pool_options(max_size=0) is None
    assert "OPTIONS" not in database_config("postgres://u@db:5432/board", tmp_path, pool=None)
    sqlite = database_config(None, tmp_path, pool=db_pool_options(max_size=4))
    assert sqlite["OPTIONS"] == {"transaction_mode": "IMMEDIATE"}


def test_min_size_never_exceeds_max_size():
    assert db_pool_options(min_size=9, max_size=3, timeout_s=1) == {
        "min_size": 3,
        "max_size": 3,
        "timeout": 1,
    }


SHOW = """
import json
import django
django.setup()
from django.test import Client
from django.contrib.auth import get_user_model
from board import store
store.create_task(title="through the pool")
staff = get_user_model().objects.create_user("ops", password="x" * 12, is_staff=True)
client = Client(HTTP_HOST="localhost")
client.force_login(staff)
health = client.get("/healthz").json()
metrics = client.get("/metrics").content.decode()
lines = [l for l in metrics.splitlines() if l.startswith("clawboo_db_pool_")]
print(json.dumps({"health": health["db_pool"], "metrics": lines}))
"""


@pytest.mark.timeout(120)
@pytest.mark.skipif(not pg_answers(), reason="PostgreSQL does not answer")
def test_healthz_and_metrics_show_the_processs_pool_on_postgresql():
    db = BenchDB("postgresql")
    try:
        env = {**db.env, "CLAWBOO_DB_POOL_MIN_SIZE": "1", "CLAWBOO_DB_POOL_MAX_SIZE": "3"}
        out = subprocess.run(
            [sys.executable, "-c", SHOW], env=env, cwd=ROOT, capture_output=True, text=True,
            timeout=100,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        shown = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        db.drop()
    pool = shown["health"]
    assert (pool["min_size"], pool["max_size"]) == (1, 3)
    assert 1 <= pool["size"] <= 3 and pool["waiting"] == 0
    assert "clawboo_db_pool_max_size 3.0" in shown["metrics"]
    assert any(line.startswith("clawboo_db_pool_size ") for line in shown["metrics"])


def test_a_postgresql_url_without_its_driver_says_which_install_adds_it(tmp_path, monkeypatch):
    """``pip install -e .`` (the README's line) brings no PostgreSQL driver: pointing
    DATABASE_URL at PostgreSQL then failed with Django's "Error loading psycopg2 or
    psycopg module", which names no way out. The settings name the extra to install."""
    import importlib.util

    from django.core.exceptions import ImproperlyConfigured

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("psycopg", "psycopg2") else real(name, *a),
    )
    with pytest.raises(ImproperlyConfigured, match=r"pip install -e '\.\[postgres\]'"):
        database_config("postgres://u@db:5432/board", tmp_path, pool=None)
    assert database_config(None, tmp_path)["ENGINE"] == "django.db.backends.sqlite3"


EXHAUST = """
import json, threading, time
import django
django.setup()
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import Client
staff = get_user_model().objects.create_user("ops", password="x" * 12, is_staff=True)
client = Client(HTTP_HOST="localhost", raise_request_exception=False)
client.force_login(staff)
connection.close()  # back to the pool
held, done = threading.Event(), threading.Event()

def hold():
    # Another request's transaction, holding the pool's only connection.
    with transaction.atomic():
        connection.cursor().execute("SELECT 1")
        held.set()
        done.wait(120)
    connection.close()

holder = threading.Thread(target=hold)
holder.start()
assert held.wait(60)
started = time.monotonic()
status = client.get("/api/board/tasks?team=default").status_code
waited = time.monotonic() - started
done.set()
holder.join()
pool = client.get("/healthz").json()["db_pool"]
print(json.dumps({"status": status, "waited": waited, "timeouts": pool["timeouts"]}))
"""


@pytest.mark.timeout(180)
@pytest.mark.skipif(not pg_answers(), reason="PostgreSQL does not answer")
def test_a_request_waits_for_a_pooled_connection_only_as_long_as_the_pool_timeout():
    """docs/operating.md: ``CLAWBOO_DB_POOL_TIMEOUT_S`` is how long a request waits
    for a free pooled connection before it fails (a 500), counted in ``timeouts``."""
    db = BenchDB("postgresql")
    try:
        env = {
            **db.env,
            "CLAWBOO_DB_POOL_MIN_SIZE": "1",
            "CLAWBOO_DB_POOL_MAX_SIZE": "1",
            "CLAWBOO_DB_POOL_TIMEOUT_S": "2",
        }
        out = subprocess.run(
            [sys.executable, "-c", EXHAUST], env=env, cwd=ROOT, capture_output=True, text=True,
            timeout=150,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        seen = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        db.drop()
    assert seen["status"] == 500
    # Gave up at the setting's two seconds, not the default's thirty.
    assert 2 <= seen["waited"] < 25, seen
    assert seen["timeouts"] == 1
