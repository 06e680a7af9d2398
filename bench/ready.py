"""Ready-query and claim-next latency at 100k tasks and 200k dependency edges.

    python bench/ready.py [--tasks 100000] [--backends sqlite,postgresql]

Seeds a throwaway database with bulk SQL (statuses mixed: half done, 40 % todo,
some in progress and backlog; every task after the first two depends on two older
ones), then times the board's ready list (first page of 50) and ``claim_next``,
and prints each query's plan (EXPLAIN) so index use is visible. Writes
``bench/results/ready.json``. Target: p99 claim-next < 5 ms on SQLite.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

from bench.benchdb import BenchDB, pg_answers  # noqa: E402

RESULTS = HERE / "results" / "ready.json"
TARGET_P99_MS = 5.0


def seed(db: BenchDB, tasks: int, edges_per_task: int = 2) -> dict[str, int]:
    rng = random.Random(42)
    base = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    far = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)  # live leases: nothing lapses
    statuses = rng.choices(
        ["done", "todo", "in_progress", "backlog"], weights=[50, 40, 5, 5], k=tasks
    )
    db.reset()
    db.insert_tasks(
        db.task_row(
            f"t{i:07d}",
            base + dt.timedelta(milliseconds=i),
            status=statuses[i],
            priority=rng.randint(0, 9),
            lease_until=far if statuses[i] == "in_progress" else None,
        )
        for i in range(tasks)
    )
    edges = []
    for i in range(2, tasks):
        for j in rng.sample(range(i), edges_per_task):
            edges.append((f"t{i:07d}", f"t{j:07d}", db.stamp(base)))
    db.insert("task_deps", "task_id, depends_on_task_id, created_at", edges)
    db.recount_unmet_deps()
    return {"tasks": tasks, "edges": len(edges)}


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "n": len(samples),
        "p50_ms": pct(samples, 0.50),
        "p99_ms": pct(samples, 0.99),
        "max_ms": round(max(samples), 3),
        "mean_ms": round(statistics.fmean(samples), 3),
    }


def measure(ready_runs: int, claims: int) -> dict[str, Any]:
    """Runs in a subprocess whose DATABASE_URL names the seeded database."""
    import django

    django.setup()
    from board import store
    from board.models import Task

    ready_qs = store.list_tasks(ready=True)[:50]
    claim_qs = (
        Task.objects.filter(store.ready_filter()).order_by("created_at", "id").values("id")[:1]
    )
    plans = {"ready_list": ready_qs.explain(), "claim_next_candidate": claim_qs.explain()}
    ready_count = Task.objects.filter(store.ready_filter()).count()

    list(ready_qs)  # warm the page cache
    ready_ms = []
    for _ in range(ready_runs):
        started = time.perf_counter()
        page = list(store.list_tasks(ready=True)[:50])
        ready_ms.append((time.perf_counter() - started) * 1000)
    assert len(page) == 50

    claim_ms = []
    for _ in range(claims):
        started = time.perf_counter()
        got = store.claim_next("bench")
        claim_ms.append((time.perf_counter() - started) * 1000)
        assert got is not None
    return {
        "ready_tasks": ready_count,
        "ready_list_first_page": summary(ready_ms),
        "claim_next": summary(claim_ms),
        "explain": plans,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--ready-runs", type=int, default=300)
    parser.add_argument("--claims", type=int, default=1000)
    parser.add_argument("--measure", action="store_true")
    args = parser.parse_args()

    if args.measure:
        print(json.dumps(measure(args.ready_runs, args.claims)))
        return 0

    backends = [b for b in args.backends.split(",") if b]
    if "postgresql" in backends and not pg_answers():
        print("PostgreSQL does not answer; skipping it", file=sys.stderr)
        backends.remove("postgresql")
    report: dict[str, Any] = {"target_p99_claim_next_ms_sqlite": TARGET_P99_MS, "results": {}}
    for backend in backends:
        db = BenchDB(backend)
        try:
            started = time.perf_counter()
            sizes = seed(db, args.tasks)
            seeded_s = round(time.perf_counter() - started, 1)
            out = subprocess.run(
                [sys.executable, __file__, "--measure", "--ready-runs", str(args.ready_runs),
                 "--claims", str(args.claims)],
                env=db.env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            result = {**sizes, "seed_seconds": seeded_s, **json.loads(out.stdout)}
        finally:
            db.drop()
        report["results"][backend] = result
        print(f"== {backend}: {sizes['tasks']} tasks, {sizes['edges']} edges "
              f"(seeded in {seeded_s}s), {result['ready_tasks']} ready")  # fmt: skip
        for name in ("ready_list_first_page", "claim_next"):
            s = result[name]
            print(f"  {name:<22} p50 {s['p50_ms']:>7.3f} ms   p99 {s['p99_ms']:>7.3f} ms"
                  f"   max {s['max_ms']:>7.3f} ms  (n={s['n']})")  # fmt: skip
        for name, plan in result["explain"].items():
            print(f"  EXPLAIN {name}:")
            for line in plan.splitlines():
                print(f"    {line}")
    sqlite = report["results"].get("sqlite")
    if sqlite:
        report["target_met"] = sqlite["claim_next"]["p99_ms"] < TARGET_P99_MS
        print(f"target (SQLite p99 claim-next < {TARGET_P99_MS} ms): "
              f"{'met' if report['target_met'] else 'MISSED'}")  # fmt: skip
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
