"""``bench/claim.py --decompose``'s upper-bound loops claim as the board does.

``board_sql`` runs the board's own claim statement and event row with nothing of the
board's Python around them, and ``board_bare`` the board's claim without building its
result: figures from either mean something only if they claim what ``claim_next``
claims, each task once, with its event written. Two processes on a SQLite file, so
the default run stays fast (the benchmarks themselves are ``-m slow``).
"""

from __future__ import annotations

import pytest

from bench import claim
from bench.benchdb import BenchDB

TASKS = 300


@pytest.fixture(scope="module")
def bench_db():
    db = BenchDB("sqlite")
    yield db
    db.drop()


@pytest.mark.parametrize("impl", ["board_sql", "board_bare"])
def test_upper_bound_loop_claims_every_task_once_with_its_event(bench_db, impl):
    run = claim.run_one(bench_db, impl, procs=2, seconds=20.0, tasks=TASKS)

    assert run["claimed"] == TASKS  # drained: each claim counted once, none lost
    conn = bench_db.connect()
    try:
        held = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT assignee_agent_id), MAX(attempts) FROM tasks "
            "WHERE status = 'in_progress' AND lease_until IS NOT NULL"
        ).fetchone()
        events = conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT task_id), MIN(seq), MAX(seq) FROM events "
            "WHERE kind = 'claimed'"
        ).fetchone()
        todo = conn.execute("SELECT COUNT(*) FROM tasks WHERE status = 'todo'").fetchone()[0]
    finally:
        conn.close()
    assert held == (TASKS, 2, 1)  # both workers claimed, every task exactly once
    assert todo == 0
    assert events == (TASKS, TASKS, 1, TASKS)  # one event per claim, gapless sequence
