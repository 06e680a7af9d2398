"""Websocket fan-out: one board mutation → N connected clients.

    python bench/fanout.py [--clients 10,100,500] [--mutations 20] [--layers memory,redis]
                           [--client-procs 1]

Starts a real daphne server (SQLite in a temp state dir), connects N websocket
clients to ``/ws/board/?team=default``, then makes mutations through the REST API
and measures, for every client, the delay from the mutation's commit (the task's
``updated_at``, same machine clock) to the frame's arrival. Prints p50/p99 per
(layer, N), writes ``bench/results/fanout.json``. Target: p99 < 100 ms at 100 clients
on each layer, and the Redis layer's p99 over the in-memory one's (measured in the
same run). The Redis layer runs when Redis answers on localhost.

One warm-up mutation after the clients connect is not counted: it pays the
server's first-request costs, not the fan-out's. The clients run in
``--client-procs`` processes besides this one. One process decoding every
client's frames in turn adds a queue N browsers would not have, but on a
two-core machine more client processes compete with the server for the same
cores and made the tail worse, so the default is one; give more where there
are cores to spare.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]
from bench.server import Server, redis_answers  # noqa: E402

RESULTS = HERE / "results" / "fanout.json"
TARGET_MS = 100.0


WARM_UP = "fanout warm-up"


async def listen(url: str, origin: str, clients: int, mutations: int) -> list[float]:
    """One client process: connect ``clients`` sockets, say ``ready``, and return the
    latency of each counted change on each socket."""
    import websockets

    sockets = []
    for _ in range(clients):
        ws = await websockets.connect(url, origin=origin, max_queue=None)
        json.loads(await ws.recv())  # hello
        sockets.append(ws)
    latencies: list[float] = []

    async def one(ws: Any) -> None:
        seen = 0
        while seen < mutations:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 60))
            if frame.get("type") != "task-change":
                continue
            arrived = time.time()
            if frame["task"]["title"] == WARM_UP:
                continue
            committed = dt.datetime.fromisoformat(frame["task"]["updated_at"]).timestamp()
            latencies.append((arrived - committed) * 1000)
            seen += 1

    listeners = [asyncio.create_task(one(ws)) for ws in sockets]
    print("ready", flush=True)
    await asyncio.gather(*listeners)
    for ws in sockets:
        await ws.close()
    return latencies


def measure(server: Server, clients: int, mutations: int, procs: int) -> list[float]:
    url = server.base.replace("http", "ws") + f"/ws/board/?team=default&token={server.token}"
    procs = max(1, min(procs, clients))
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    children = [
        subprocess.Popen(
            [sys.executable, __file__, "--listen", url, server.base, str(n), str(mutations)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in shares
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit("a client process did not connect")
        server.create_task(WARM_UP)
        time.sleep(0.2)
        for i in range(mutations):
            server.create_task(f"fanout {i}")
            time.sleep(0.05)
        latencies: list[float] = []
        for child in children:
            out, _ = child.communicate(timeout=120)
            latencies += json.loads(out)
        return latencies
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="10,100,500")
    parser.add_argument("--mutations", type=int, default=20)
    parser.add_argument("--layers", default="memory,redis")
    parser.add_argument("--client-procs", type=int, default=1)
    parser.add_argument("--listen", nargs=4, help=argparse.SUPPRESS)  # a client process
    args = parser.parse_args()
    if args.listen:
        url, origin, clients, mutations = args.listen
        print(json.dumps(asyncio.run(listen(url, origin, int(clients), int(mutations)))))
        return 0
    layers = [layer for layer in args.layers.split(",") if layer]
    if "redis" in layers and not redis_answers():
        print("Redis is not answering: skipping the redis layer")
        layers.remove("redis")
    rows = []
    for layer in layers:
        server = Server(layer)
        try:
            for n in (int(x) for x in args.clients.split(",")):
                latencies = measure(server, n, args.mutations, args.client_procs)
                rows.append(
                    {
                        "layer": layer,
                        "clients": n,
                        "client_procs": max(1, min(args.client_procs, n)),
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
    at_100 = {r["layer"]: r for r in rows if r["clients"] == 100}
    met = bool(at_100) and all(r["p99_ms"] < TARGET_MS for r in at_100.values())
    ratio = None
    if "memory" in at_100 and "redis" in at_100:
        ratio = round(at_100["redis"]["p99_ms"] / at_100["memory"]["p99_ms"], 2)
        print(f"redis / in-memory p99 at 100 clients: {ratio}")
    print(
        f"target (p99 < {TARGET_MS:.0f} ms at 100 clients, each layer): "
        f"{'met' if met else 'MISSED'}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {"rows": rows, "target_ms": TARGET_MS, "met": met, "redis_over_memory": ratio},
            indent=2,
        )
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
