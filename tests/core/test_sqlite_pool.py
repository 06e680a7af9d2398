"""The pooled SQLite backend (core.db.sqlite3): a closed connection is kept for
the next request, clean, with the storage layer's pragmas still in force."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from core.db.sqlite3.base import DatabaseWrapper
from core.storage import SQLITE_PRAGMAS

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite backend")


@pytest.fixture(autouse=True)
def _own_databases(django_db_blocker):
    # These tests open their own files, not the test database.
    with django_db_blocker.unblock():
        yield


def wrapper(path: Path, pool_size: int, alias: str = "pooltest") -> DatabaseWrapper:
    options = {**connection.settings_dict["OPTIONS"], "pool_size": pool_size}
    settings = {**connection.settings_dict, "NAME": str(path), "OPTIONS": options}
    return DatabaseWrapper(settings, alias=alias)


def pragma(db: DatabaseWrapper, name: str) -> Any:
    with db.cursor() as cursor:
        cursor.execute(f"PRAGMA {name}")
        return cursor.fetchone()[0]


def test_a_closed_connection_is_reused_with_its_pragmas(tmp_path):
    db = wrapper(tmp_path / "a.sqlite3", pool_size=2)
    db.ensure_connection()
    first = db.connection
    assert not db.reused_connection
    db.close()
    db.ensure_connection()
    assert db.connection is first and db.reused_connection
    expected = {"journal_mode": "wal", "busy_timeout": 250, "wal_autocheckpoint": 50,
                "synchronous": 1, "foreign_keys": 1}  # fmt: skip
    assert {name: pragma(db, name) for name, _ in SQLITE_PRAGMAS} == expected
    db.close()


def test_a_connection_closed_inside_a_transaction_comes_back_rolled_back(tmp_path):
    db = wrapper(tmp_path / "b.sqlite3", pool_size=1)
    with db.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x INTEGER)")
    raw = db.connection
    raw.execute("BEGIN IMMEDIATE")
    raw.execute("INSERT INTO t VALUES (1)")
    db.close()  # as a request ending mid-write would
    db.ensure_connection()
    assert db.connection is raw and not raw.in_transaction
    with db.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM t")
        assert cursor.fetchone()[0] == 0
    db.close()


def test_the_pool_keeps_at_most_pool_size_idle_connections(tmp_path):
    path = tmp_path / "c.sqlite3"
    dbs = [wrapper(path, pool_size=1, alias=f"p{i}") for i in range(3)]
    for db in dbs:
        db.ensure_connection()
    raws = [db.connection for db in dbs]
    for db in dbs:
        db.close()
    kept = 0
    for raw in raws:
        try:
            raw.execute("SELECT 1")
            kept += 1
        except Exception:  # closed for real
            pass
    assert kept == 1


def test_pool_size_zero_closes_for_real(tmp_path):
    db = wrapper(tmp_path / "d.sqlite3", pool_size=0)
    db.ensure_connection()
    first = db.connection
    db.close()
    db.ensure_connection()
    assert db.connection is not first and not db.reused_connection
    db.close()


def test_a_forked_child_never_reuses_its_parents_pooled_connection(tmp_path):
    import os

    db = wrapper(tmp_path / "e.sqlite3", pool_size=2)
    db.ensure_connection()
    parent_conn = id(db.connection)
    db.close()  # pooled, as connections.close_all() before a fork would leave it
    pid = os.fork()
    if pid == 0:  # the child: a fresh connection, never the parent's
        try:
            db.ensure_connection()
            reused = db.reused_connection or id(db.connection) == parent_conn
            with db.cursor() as cursor:
                cursor.execute("SELECT 1")
            os._exit(1 if reused else 0)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    db.ensure_connection()
    assert db.reused_connection  # the parent still has its own
    db.close()
