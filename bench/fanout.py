"""Websocket fan-out: one board mutation → N connected clients.

    python bench/fanout.py [--clients 10,100,500] [--mutations 20] [--layers memory,redis]

Starts a real daphne server (SQLite in a temp state dir), connects N websocket
clients to ``/ws/board/?team=default``, then makes mutations through the REST API
and measures, for every client, the delay from the mutation's commit (the task's
``updated_at``, same machine clock) to the frame's arrival. Prints p50/p99 per
(layer, N), writes ``bench/results/fanout.json``. Target: p99 < 100 ms at 100 clients
on the in-memory layer. The Redis layer runs when Redis answers on localhost.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "fanout.json"
TARGET_MS = 100.0
REDIS_URL = os.environ.get("CLAWBOO_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_answers() -> bool:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping()
        return True
    except Exception:
        return False


class Server:
    """A migrated state dir, a token, and a daphne process serving it."""

    def __init__(self, layer: str) -> None:
        self.state = Path(tempfile.mkdtemp(prefix="clawboo-fanout-"))
        self.env = {
            **os.environ,
            "CLAWBOO_STATE_DIR": str(self.state),
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "PYTHONPATH": str(ROOT),
            "CLAWBOO_HTTP_RATE_LIMIT": "0",
        }
        self.env.pop("DATABASE_URL", None)
        if layer == "redis":
            self.env["CLAWBOO_REDIS_URL"] = REDIS_URL
        else:
            self.env.pop("CLAWBOO_REDIS_URL", None)
        manage = [sys.executable, str(ROOT / "manage.py")]
        subprocess.run([*manage, "migrate", "-v", "0"], env=self.env, check=True, cwd=ROOT)
        out = subprocess.run(
            [*manage, "create_agent_token", "bench", "--team", "default"],
            env=self.env,
            check=True,
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        self.token = out.stdout.strip()
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "clawboo.asgi:application",
            ],
            env=self.env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(self.base + "/api/schema/", timeout=1)  # noqa: S310
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("daphne did not start") from None
                time.sleep(0.1)

    def create_task(self, title: str) -> None:
        request = urllib.request.Request(
            self.base + "/api/board/tasks",
            data=json.dumps({"title": title}).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(request, timeout=30).read()  # noqa: S310 - loopback

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.state, ignore_errors=True)


async def measure(server: Server, clients: int, mutations: int) -> list[float]:
    import websockets

    url = server.base.replace("http", "ws") + f"/ws/board/?team=default&token={server.token}"
    sockets = []
    for _ in range(clients):
        ws = await websockets.connect(url, origin=server.base, max_queue=None)
        json.loads(await ws.recv())  # hello
        sockets.append(ws)
    latencies: list[float] = []

    async def listen(ws: Any, expected: int) -> None:
        seen = 0
        while seen < expected:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if frame.get("type") != "task-change":
                continue
            arrived = time.time()
            committed = dt.datetime.fromisoformat(frame["task"]["updated_at"]).timestamp()
            latencies.append((arrived - committed) * 1000)
            seen += 1

    listeners = [asyncio.create_task(listen(ws, mutations)) for ws in sockets]
    for i in range(mutations):
        await asyncio.to_thread(server.create_task, f"fanout {i}")
        await asyncio.sleep(0.05)
    await asyncio.gather(*listeners)
    for ws in sockets:
        await ws.close()
    return latencies


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="10,100,500")
    parser.add_argument("--mutations", type=int, default=20)
    parser.add_argument("--layers", default="memory,redis")
    args = parser.parse_args()
    layers = [layer for layer in args.layers.split(",") if layer]
    if "redis" in layers and not redis_answers():
        print("Redis is not answering: skipping the redis layer")
        layers.remove("redis")
    rows = []
    for layer in layers:
        server = Server(layer)
        try:
            for n in (int(x) for x in args.clients.split(",")):
                latencies = asyncio.run(measure(server, n, args.mutations))
                rows.append(
                    {
                        "layer": layer,
                        "clients": n,
                        "frames": len(latencies),
                        "p50_ms": round(statistics.median(latencies), 2),
                        "p99_ms": round(percentile(latencies, 0.99), 2),
                        "max_ms": round(max(latencies), 2),
                    }
                )
                print(
                    f"  {layer:6} {n:4} clients  p50 {rows[-1]['p50_ms']:8.2f} ms  "
                    f"p99 {rows[-1]['p99_ms']:8.2f} ms",
                    flush=True,
                )
        finally:
            server.stop()
    print(f"{'layer':7}{'clients':>8}{'frames':>8}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for row in rows:
        print(
            f"{row['layer']:7}{row['clients']:>8}{row['frames']:>8}{row['p50_ms']:>10}"
            f"{row['p99_ms']:>10}{row['max_ms']:>10}"
        )
    target_row = next((r for r in rows if r["layer"] == "memory" and r["clients"] == 100), None)
    met = target_row is not None and target_row["p99_ms"] < TARGET_MS
    print(
        f"target (p99 < {TARGET_MS:.0f} ms at 100 clients, in-memory): {'met' if met else 'MISSED'}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, "target_ms": TARGET_MS, "met": met}, indent=2))
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
