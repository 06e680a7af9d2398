"""Remote dispatch latency: ready→claimed on ``clawboo worker`` (HTTP and the board's
websocket only) against a local worker (``manage.py work``, on the database), in the
same run.

    python bench/remote.py [--tasks 40] [--backends sqlite,postgresql]

Per database (a SQLite file; PostgreSQL when it answers), one real daphne serves
the board (the Redis channel layer when Redis answers, as a deployment with more
than one process runs it), one local worker idles for agent ``local-a`` (team
``default``) and one remote worker for agent ``remote-a`` (team ``far``), holding a
URL and a machine key and no database. Both have a 60 s safety-net poll, so only a
wake explains a quick claim. Tasks are created one at a time, alternating between
the two teams; the latency is the claim event's stamp minus the task's creation
stamp (one host's clock), as :mod:`bench.dispatch` measures the local worker.

Prints a table and writes ``bench/results/remote.json``, with the remote worker's
figures over the local worker's of the same run. Target: remote p50 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]
from bench.benchdb import BenchDB, pg_answers  # noqa: E402
from bench.dispatch import start_worker, wait_for  # noqa: E402
from bench.server import REDIS_URL, free_port, redis_answers  # noqa: E402

RESULTS = HERE / "results" / "remote.json"
P50_TARGET_MS = 100.0


def start_daphne(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
         "clawboo.asgi:application"],
        cwd=ROOT, env={**os.environ, "CLAWBOO_HTTP_RATE_LIMIT": "0"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/schema/", timeout=2)  # noqa: S310
            return proc
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("daphne did not start") from None
            time.sleep(0.1)


def start_remote(base: str, key: str, agent: str, cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Nothing that could lead it to the database: it must not need one.
    for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "CLAWBOO_REDIS_URL"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "clawboo.cli", "worker", "--server", base, "--token", key,
         "--agent", agent, "--poll", "60", "--cache-dir", str(cache)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


class FrameClock:
    """A board socket of its own on the worker's team: when each task's ``added``
    frame arrived (the wake the remote worker waits for), by the host's clock."""

    def __init__(self, base: str, key: str, team: str) -> None:
        import threading

        self.url = base.replace("http://", "ws://") + f"/ws/board/?team={team}&token={key}"
        self.arrived: dict[str, float] = {}
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self.ready.wait(20):
            raise SystemExit("the board socket did not open")

    def _read(self) -> None:
        from websockets.sync.client import connect

        with connect(self.url, open_timeout=10, proxy=None) as ws:
            for raw in ws:
                at = time.time()
                frame = json.loads(raw)
                if frame.get("type") == "hello":
                    self.ready.set()
                task = frame.get("task") or {}
                if frame.get("kind") == "added" and task.get("id"):
                    self.arrived.setdefault(task["id"], at)

    def arrival(self, task_id: str) -> float | None:
        return self.arrived.get(task_id)


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
        "max_ms": round(ordered[-1], 1),
        "mean_ms": round(statistics.fmean(ordered), 1),
    }


def measure(backend: str, tasks: int) -> dict[str, Any]:
    """One backend's run, in this process (Django set up from the environment
    :func:`main` prepared: a throwaway database and state dir)."""
    import django

    django.setup()
    from board import store
    from board.models import Task
    from core import machines, registry
    from core.models import Event

    procs: list[subprocess.Popen[Any]] = []
    try:
        registry.create_team("far", "Far")
        for agent, team in (("local-a", "default"), ("remote-a", "far")):
            registry.create_agent(
                id=agent, display_name=agent, team=team, runtime="command",
                settings={"argv": ["true"]},
            )  # fmt: skip
        _, key = machines.mint("bench-host", ["remote-a"])
        port = free_port()
        procs.append(start_daphne(port))
        base = f"http://127.0.0.1:{port}"
        local = start_worker("local-a")
        procs.append(local)
        assert local.stdout is not None
        local.stdout.readline()  # "work: …": it is up
        procs.append(start_remote(base, key, "remote-a", Path(os.environ["CLAWBOO_STATE_DIR"])))

        frames = FrameClock(base, key, "far")

        def one(team: str) -> float:
            task = store.create_task(title=f"ready in {team}", team=team, file_mutating=False)
            created = task.task
            wait_for(
                lambda: Event.objects.filter(task_id=created.id, kind="claimed").exists(),
                f"a claim in {team}",
                deadline_s=90,
            )
            claimed = Event.objects.get(task_id=created.id, kind="claimed").created_at
            wait_for(
                lambda: Task.objects.get(pk=created.id).status == "done",
                f"the task done in {team}",
                deadline_s=90,
            )
            if team == "far":
                arrived = frames.arrival(created.id)
                if arrived is not None:
                    latencies["frame"].append((arrived - created.created_at.timestamp()) * 1000)
            return (claimed - created.created_at).total_seconds() * 1000

        latencies: dict[str, list[float]] = {"local": [], "remote": [], "frame": []}
        # Warm both up (connections, the socket's subscription), then let them idle.
        one("default"), one("far")
        latencies["frame"].clear()
        time.sleep(1.0)
        for _ in range(tasks):
            latencies["local"].append(one("default"))
            time.sleep(0.2)  # each idles again before the next
            latencies["remote"].append(one("far"))
            time.sleep(0.2)
        local_s, remote_s = summary(latencies["local"]), summary(latencies["remote"])
        return {
            "backend": backend,
            "channel_layer": "redis" if os.environ.get("CLAWBOO_REDIS_URL") else "in-memory",
            "local": local_s,
            "remote": remote_s,
            # How the remote figure splits: the board frame reaching a socket client
            # on the worker's host, then the worker's claim over HTTP.
            "frame_p50_ms": round(statistics.median(latencies["frame"]), 1)
            if latencies["frame"]
            else None,
            "p50_ratio": round(remote_s["p50_ms"] / max(local_s["p50_ms"], 0.1), 2),
            "p99_ratio": round(remote_s["p99_ms"] / max(local_s["p99_ms"], 0.1), 2),
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        from django.db import connections

        connections.close_all()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40, help="tasks per worker")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a backend's run, in a child
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.tasks)))
        return 0
    redis = redis_answers()
    rows = []
    for backend in args.backends.split(","):
        if backend == "postgresql" and not pg_answers():
            print("postgresql: not answering, skipped")
            continue
        db = BenchDB(backend)
        try:
            env = {**db.env, "CLAWBOO_HTTP_RATE_LIMIT": "0"}
            if redis:
                env["CLAWBOO_REDIS_URL"] = REDIS_URL
            done = subprocess.run(
                [sys.executable, __file__, "--one", backend, "--tasks", str(args.tasks)],
                env=env, cwd=ROOT, check=True, capture_output=True, text=True, timeout=1800,
            )  # fmt: skip
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            db.drop()
            shutil.rmtree(db.tmp, ignore_errors=True)
    print(f"{'backend':<11}{'worker':<8}{'n':>4}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}"
          f"{'mean ms':>9}{'p50 ×':>7}{'p99 ×':>7}")  # fmt: skip
    for r in rows:
        for side in ("local", "remote"):
            s = r[side]
            ratios = (
                f"{r['p50_ratio']:>7}{r['p99_ratio']:>7}" if side == "remote" else f"{'1.0':>7}" * 2
            )
            print(f"{r['backend']:<11}{side:<8}{s['n']:>4}{s['p50_ms']:>8}{s['p99_ms']:>8}"
                  f"{s['max_ms']:>8}{s['mean_ms']:>9}{ratios}")  # fmt: skip
    met = bool(rows) and all(r["remote"]["p50_ms"] <= P50_TARGET_MS for r in rows)
    layer = rows[0]["channel_layer"] if rows else "-"
    for r in rows:
        print(f"{r['backend']}: remote = board frame at the worker's host "
              f"(p50 {r['frame_p50_ms']} ms) + its claim over HTTP")  # fmt: skip
    print(f"channel layer: {layer}; ratios: remote over local, same run")
    print(f"target (remote p50 ≤ {P50_TARGET_MS:g} ms): {'met' if met else 'MISSED'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, "target_met": met}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
