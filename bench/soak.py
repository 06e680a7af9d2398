"""Soak: a mixed load against daphne and a worker for a while, watching for growth.

    python bench/soak.py [--minutes 60] [--rate 5] [--max-events 2000]

A real daphne server (SQLite in a temp state dir) and a ``manage.py work --all``
process with a ``command`` agent. Each second the load creates ``--rate`` tasks
through the API (the worker claims and finishes them), lists the board and replays
its events, with a websocket client connected throughout; every 30 s it runs
``manage.py prune`` (as a cron would) under a retention of ``--max-events`` events
per team. Sampled every 10 s: each process's RSS, the event table's size.

Prints, per quarter of the run, the request p99 and each process's RSS, and writes
``bench/results/soak.json``. Targets: no process's RSS grows more than 10 %
between the second and the last quarter; request p99 flat within noise (the last
quarter's within 1.5× the second's); the event table never above the bound plus
what one prune interval adds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]
from bench.server import Server  # noqa: E402

RESULTS = HERE / "results" / "soak.json"
SAMPLE_S, PRUNE_S = 10.0, 30.0
RSS_GROWTH_MAX, P99_DRIFT_MAX = 0.10, 1.5

REGISTER = """
from core import registry
registry.create_agent(id="soak-bot", display_name="Soak", team="default",
                      runtime="command", settings={"argv": ["true"]})
"""


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def tree_rss_kb(pid: int) -> int:
    """A process and its children (daphne, the worker and what they started)."""
    total = rss_kb(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        for child in children.read_text().split():
            try:
                total += tree_rss_kb(int(child))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return total


class Load:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.latencies: list[tuple[float, float]] = []  # (seconds into the run, ms)
        self.errors = 0
        self.started = time.monotonic()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        request = urllib.request.Request(
            self.server.base + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Token {self.server.token}",
                "Content-Type": "application/json",
            },
            method=method,
        )
        begun = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                data = json.loads(answer.read() or b"null")
        except OSError:
            self.errors += 1
            return None
        self.latencies.append((begun - self.started, (time.monotonic() - begun) * 1000))
        return data

    def second(self, rate: int, head: int) -> int:
        for n in range(rate):
            self.call("POST", "/api/board/tasks", {"title": f"soak {n}", "file_mutating": False})
        self.call("GET", "/api/board/tasks?team=default&limit=50")
        replay = self.call("GET", f"/api/teams/default/events?since={max(head - 20, 0)}")
        return int(replay["seq"]) if replay else head


async def watch(url: str, stop: threading.Event, seen: list[int]) -> None:
    import websockets

    async with websockets.connect(url, origin=url.split("/ws/")[0].replace("ws", "http")) as ws:
        while not stop.is_set():
            try:
                await asyncio.wait_for(ws.recv(), timeout=1)
                seen[0] += 1
            except TimeoutError:
                continue


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--rate", type=int, default=5, help="tasks created per second")
    parser.add_argument("--max-events", type=int, default=2000)
    args = parser.parse_args()
    os.environ["CLAWBOO_HISTORY_MAX_EVENTS"] = str(args.max_events)
    server = Server("memory")
    env = server.env
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "shell", "-c", REGISTER], env=env, cwd=ROOT, check=True)
    worker = subprocess.Popen(
        [*manage, "work", "--all"], env=env, cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    database = str(server.state / "clawboo.sqlite3")
    stop = threading.Event()
    frames = [0]
    ws_url = server.base.replace("http", "ws") + f"/ws/board/?team=default&token={server.token}"
    watcher = threading.Thread(target=lambda: asyncio.run(watch(ws_url, stop, frames)))
    watcher.start()
    load = Load(server)
    samples: list[dict[str, Any]] = []
    seconds = args.minutes * 60
    head = 0
    next_sample = next_prune = 0.0
    try:
        while (elapsed := time.monotonic() - load.started) < seconds:
            tick = time.monotonic()
            head = load.second(args.rate, head)
            if elapsed >= next_prune:
                subprocess.run([*manage, "prune"], env=env, cwd=ROOT, check=True,
                               capture_output=True)  # fmt: skip
                next_prune = elapsed + PRUNE_S
            if elapsed >= next_sample:
                with sqlite3.connect(database) as conn:
                    count = conn.execute("SELECT count(*) FROM events").fetchone()[0]
                samples.append(
                    {
                        "t": round(elapsed, 1),
                        "daphne_kb": tree_rss_kb(server.proc.pid),
                        "worker_kb": tree_rss_kb(worker.pid),
                        "events": count,
                    }
                )
                next_sample = elapsed + SAMPLE_S
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    finally:
        stop.set()
        watcher.join(10)
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
        server.stop()

    quarter = seconds / 4
    rows = []
    for q in range(4):
        lats = sorted(ms for t, ms in load.latencies if q * quarter <= t < (q + 1) * quarter)
        in_q = [s for s in samples if q * quarter <= s["t"] < (q + 1) * quarter] or samples[-1:]
        rows.append(
            {
                "quarter": q + 1,
                "requests": len(lats),
                "p99_ms": round(lats[int(len(lats) * 0.99)] if lats else 0.0, 1),
                "p50_ms": round(statistics.median(lats) if lats else 0.0, 1),
                "daphne_mb": round(max(s["daphne_kb"] for s in in_q) / 1024, 1),
                "worker_mb": round(max(s["worker_kb"] for s in in_q) / 1024, 1),
                "events_max": max(s["events"] for s in in_q),
            }
        )
    growth = {
        name: round(rows[3][name] / rows[1][name] - 1, 3) for name in ("daphne_mb", "worker_mb")
    }
    drift = round(rows[3]["p99_ms"] / rows[1]["p99_ms"], 2) if rows[1]["p99_ms"] else 0.0
    bound = args.max_events + int(PRUNE_S * args.rate * 4)  # a prune interval's new events
    events_max = max(s["events"] for s in samples)
    met = (
        all(g <= RSS_GROWTH_MAX for g in growth.values())
        and drift <= P99_DRIFT_MAX
        and events_max <= bound
    )
    print(f"{'quarter':>7}{'requests':>10}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'daphne MB':>11}{'worker MB':>11}{'events':>8}")  # fmt: skip
    for r in rows:
        print(f"{r['quarter']:>7}{r['requests']:>10}{r['p50_ms']:>8}{r['p99_ms']:>8}"
              f"{r['daphne_mb']:>11}{r['worker_mb']:>11}{r['events_max']:>8}")  # fmt: skip
    print(
        f"RSS growth Q2→Q4: {growth}; p99 Q4/Q2: {drift}; events max {events_max} "
        f"(bound {bound}); websocket frames {frames[0]}; errors {load.errors}"
    )
    print(f"targets: {'met' if met else 'MISSED'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "args": vars(args),
                "quarters": rows,
                "samples": samples,
                "rss_growth": growth,
                "p99_drift": drift,
                "events_max": events_max,
                "events_bound": bound,
                "frames": frames[0],
                "errors": load.errors,
                "targets_met": met,
            },
            indent=2,
        )  # fmt: skip
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
