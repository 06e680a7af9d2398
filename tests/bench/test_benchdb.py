"""A bench's SQLite database under the test suite: migrated once, then copied."""

from __future__ import annotations

import os
from pathlib import Path

from bench.benchdb import BenchDB


def test_sqlite_bench_databases_are_copies_of_one_migrated_template_each_its_own_file():
    folder = Path(os.environ["CLAWBOO_BENCH_TEMPLATE_DIR"])
    before = set(folder.glob("*.sqlite3"))
    first, second = BenchDB("sqlite"), BenchDB("sqlite")
    try:
        templates = set(folder.glob("*.sqlite3"))
        # One template for the two (made by the first, or by an earlier bench's).
        assert templates and len(templates - before) <= 1, sorted(folder.iterdir())
        for db in (first, second):
            conn = db.connect()
            try:  # migrated, its data migration's team in it
                assert conn.execute("SELECT id FROM teams").fetchall() == [("default",)]
            finally:
                conn.close()
            assert (os.stat(db.path).st_mode & 0o777) == 0o600
        conn = first.connect()
        try:  # two files: a write to one is not seen in the other, nor in the template
            conn.execute("UPDATE teams SET last_event_seq = 7")
        finally:
            conn.close()
        conn = second.connect()
        try:
            assert conn.execute("SELECT last_event_seq FROM teams").fetchone()[0] == 0
        finally:
            conn.close()
    finally:
        first.drop()
        second.drop()
