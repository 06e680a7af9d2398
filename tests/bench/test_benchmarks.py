"""The benchmarks as (slow) tests: ``pytest -m slow tests/bench``.

Each runs the one-command benchmark and checks its target from the JSON it writes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def run_bench(script: str) -> dict:
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / script)], cwd=ROOT, check=True, timeout=900
    )
    return json.loads((ROOT / "bench" / "results" / script.replace(".py", ".json")).read_text())


@pytest.mark.timeout(900)
@pytest.mark.xfail(
    reason="known gap (issue 2), SQLite: at 12 processes on 2 cores claim-next reaches "
    "0.32-0.40x the raw UPDATE loop (PostgreSQL 0.46-0.64x, with the claim combiner "
    "batching local claims; board/store/combiner.py). `bench/claim.py --decompose` "
    "bounds it: the board's own claim SQL and event row, one claim per commit with "
    "nothing else around them, reach 0.45x, and the board's claim through the combiner "
    "with no result built from it 0.39x. The raw loop's losers sleep in SQLite's busy "
    "handler, so it uses under one core; the board's claim (an event row carrying the "
    "task, a Task and a signed ticket for the caller, a cross-process round trip) is "
    "CPU-bound on 2 cores",
    strict=False,
)
def test_board_claim_next_reaches_half_the_raw_baseline_at_twelve_processes():
    report = run_bench("claim.py")
    at12 = {r["backend"]: r["ratio"] for r in report["results"] if r["procs"] == 12}
    assert "sqlite" in at12
    assert report["target_met"], at12


@pytest.mark.timeout(900)
def test_claim_next_p99_stays_under_5_ms_at_100k_tasks_on_sqlite():
    report = run_bench("ready.py")
    sqlite = report["results"]["sqlite"]
    assert (sqlite["tasks"], sqlite["edges"]) == (100_000, 199_996)
    assert "INDEX" in sqlite["explain"]["claim_next_candidate"].upper()
    assert report["target_met"], sqlite["claim_next"]


@pytest.mark.timeout(900)
def test_http_claim_next_reaches_70_percent_of_the_whoami_baseline():
    report = run_bench("api.py")
    assert report["claim_next"]["statuses"] == {"200": report["claim_next"]["requests"]}
    assert report["met"], (report["ratio"], report["pair_ratios"])
