"""What a claim costs a process whose CPU caches went cold: the board's
``claim_next`` in one process on a SQLite file, timed warm (claim after claim) and
again with N MB of memory written between claims — as when 11 other claiming
processes and the combiner ran on the same 2 cores since this one last claimed.

    python bench/claim_cold.py [--claims 2000] [--evict-mb 0,4,16,64]

Prints a table and writes ``bench/results/claim_cold.json``. CPU time is the
claiming thread's own (``time.thread_time``), so only the claim is counted, not the
eviction between claims.

Why it is here: at 12 processes the combiner's claimers spend several times the
warm claim's Python per claim (``bench/claim.py`` records ``user_us``). The raw
loop does not pay this: a process that loses the write lock sleeps in SQLite's
busy handler for milliseconds, so the winner runs many claims in a row with warm
caches, while every combined claim wakes a process that has not run since its
previous one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

from bench.benchdb import BenchDB  # noqa: E402
from bench.claim import seed  # noqa: E402

RESULTS = HERE / "results" / "claim_cold.json"


def measure(claims: int, evict_mb: int) -> dict[str, Any]:
    from board import store

    scratch = bytearray(evict_mb << 20)
    fill = bytes(evict_mb << 20)
    spent = []
    for _ in range(claims):
        if evict_mb:
            scratch[:] = fill  # write it all: evicts what the claim had cached
        start = time.thread_time()
        if store.claim_next("cold") is None:
            raise SystemExit("ran out of tasks; raise the seed count")
        spent.append(time.thread_time() - start)
    return {
        "evict_mb": evict_mb,
        "claims": claims,
        "mean_us": round(statistics.fmean(spent) * 1e6, 1),
        "median_us": round(statistics.median(spent) * 1e6, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--evict-mb", default="0,4,16,64")
    args = parser.parse_args()
    sizes = [int(size) for size in args.evict_mb.split(",")]

    db = BenchDB("sqlite")
    try:
        seed(db, args.claims * (len(sizes) + 1))
        os.environ.update(db.env)
        import django

        django.setup()
        measure(args.claims // 4 or 1, 0)  # warm-up: connections, caches, compiled SQL
        rows = [measure(args.claims, size) for size in sizes]
    finally:
        db.drop()
    base = rows[0]["median_us"] if sizes and sizes[0] == 0 else None
    print(f"{'evict MB':>8} {'median µs':>10} {'mean µs':>9} {'x warm':>7}")
    for row in rows:
        row["x_warm"] = round(row["median_us"] / base, 2) if base else None
        times = f"{row['x_warm']:>7.2f}" if base else f"{'-':>7}"
        print(f"{row['evict_mb']:>8} {row['median_us']:>10} {row['mean_us']:>9} {times}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), "results": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
