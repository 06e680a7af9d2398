"""Websocket fan-out: one board mutation → N connected clients.

    python bench/fanout.py [--clients 10,100,500] [--mutations 20] [--layers memory,redis]
                           [--client-procs 1] [--baseline PATH] [--rounds R]

Starts a real daphne server (SQLite in a temp state dir), connects N websocket
clients to ``/ws/board/?team=default``, then makes mutations through the REST API
and measures, for every client, the delay from the mutation's commit (the task's
``updated_at``, same machine clock) to the frame's arrival, and the server's CPU
time per mutation. Prints p50/p99 per (layer, N), writes
``bench/results/fanout.json``. Targets: p99 < 100 ms at 100 clients on each layer
and at 500 clients on Redis, and the Redis layer's p99 over the in-memory one's
(measured in the same run). The Redis layer runs when Redis answers on localhost
(``CLAWBOO_BENCH_REDIS_URL``).

``--baseline PATH`` serves the same rounds from another checkout too (e.g. a
``git worktree`` of main), alternating baseline and this code round by round, and
reports this ÷ baseline: on a loaded machine only a ratio from one run means much.
Only one server has clients at a time (Redis pub/sub channels ignore the database
number, so two servers listening at once would hear each other).

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
import os
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


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    server: Server, clients: int, mutations: int, procs: int
) -> tuple[list[float], float | None]:
    """Latencies of every counted frame, and the server's CPU ms per mutation."""
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
        cpu_before = cpu_seconds(server.proc.pid)
        for i in range(mutations):
            server.create_task(f"fanout {i}")
            time.sleep(0.05)
        latencies: list[float] = []
        for child in children:
            out, _ = child.communicate(timeout=120)
            latencies += json.loads(out)
        cpu_after = cpu_seconds(server.proc.pid)
        if len(latencies) != clients * mutations:
            raise SystemExit(f"{len(latencies)} frames counted, not {clients} × {mutations}")
        cpu_ms = None
        if cpu_before is not None and cpu_after is not None:
            cpu_ms = round((cpu_after - cpu_before) * 1000 / mutations, 2)
        return latencies, cpu_ms
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(layer: str, code: str, clients: int, procs: int, rounds: list) -> dict[str, Any]:
    latencies = [ms for lat, _ in rounds for ms in lat]
    cpus = [cpu for _, cpu in rounds if cpu is not None]
    return {
        "layer": layer,
        "code": code,
        "clients": clients,
        "client_procs": max(1, min(procs, clients)),
        "rounds": len(rounds),
        "frames": len(latencies),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
        "server_cpu_ms_per_mutation": round(statistics.median(cpus), 2) if cpus else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="10,100,500")
    parser.add_argument("--mutations", type=int, default=20)
    parser.add_argument("--layers", default="memory,redis")
    parser.add_argument("--client-procs", type=int, default=1)
    parser.add_argument("--baseline", type=Path, help="another checkout to compare against")
    parser.add_argument("--rounds", type=int, default=None, help="default 1, 3 with --baseline")
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
    codes = {"this": ROOT}
    if args.baseline:
        codes = {"baseline": args.baseline.resolve(), **codes}
    rounds = args.rounds or (3 if args.baseline else 1)
    rows = []
    for layer in layers:
        servers = {code: Server(layer, root=root) for code, root in codes.items()}
        try:
            for n in (int(x) for x in args.clients.split(",")):
                measured: dict[str, list] = {code: [] for code in codes}
                for _ in range(rounds):
                    for code, server in servers.items():  # alternating, round by round
                        measured[code].append(measure(server, n, args.mutations, args.client_procs))
                for code in codes:
                    rows.append(summary(layer, code, n, args.client_procs, measured[code]))
                    print(
                        f"  {layer:6} {code:8} {n:4} clients  p50 {rows[-1]['p50_ms']:8.2f} ms  "
                        f"p99 {rows[-1]['p99_ms']:8.2f} ms",
                        flush=True,
                    )
        finally:
            for server in servers.values():
                server.stop()
    print(
        f"{'layer':7}{'code':9}{'clients':>8}{'frames':>8}{'p50 ms':>10}{'p99 ms':>10}"
        f"{'max ms':>10}{'cpu ms/mut':>12}"
    )
    for row in rows:
        print(
            f"{row['layer']:7}{row['code']:9}{row['clients']:>8}{row['frames']:>8}"
            f"{row['p50_ms']:>10}{row['p99_ms']:>10}{row['max_ms']:>10}"
            f"{row['server_cpu_ms_per_mutation'] or '-':>12}"
        )
    ours = [r for r in rows if r["code"] == "this"]
    versus = []
    if args.baseline:
        base = {(r["layer"], r["clients"]): r for r in rows if r["code"] == "baseline"}
        for row in ours:
            old = base[row["layer"], row["clients"]]
            versus.append(
                {
                    "layer": row["layer"],
                    "clients": row["clients"],
                    "p50_ratio": round(row["p50_ms"] / old["p50_ms"], 2),
                    "p99_ratio": round(row["p99_ms"] / old["p99_ms"], 2),
                    "cpu_ratio": (
                        round(
                            row["server_cpu_ms_per_mutation"] / old["server_cpu_ms_per_mutation"], 2
                        )
                        if row["server_cpu_ms_per_mutation"] and old["server_cpu_ms_per_mutation"]
                        else None
                    ),
                }
            )
        for v in versus:
            print(
                f"this ÷ baseline  {v['layer']:6} {v['clients']:4} clients  p50 {v['p50_ratio']}×"
                f"  p99 {v['p99_ratio']}×  server CPU {v['cpu_ratio']}×"
            )
    at_100 = {r["layer"]: r for r in ours if r["clients"] == 100}
    targets = [r for r in ours if r["clients"] == 100] + [
        r for r in ours if r["layer"] == "redis" and r["clients"] == 500
    ]
    # None: no row the targets name was measured (other client counts).
    met = all(r["p99_ms"] < TARGET_MS for r in targets) if targets else None
    ratio = None
    if "memory" in at_100 and "redis" in at_100:
        ratio = round(at_100["redis"]["p99_ms"] / at_100["memory"]["p99_ms"], 2)
        print(f"redis / in-memory p99 at 100 clients: {ratio}")
    print(
        f"target (p99 < {TARGET_MS:.0f} ms at 100 clients on each layer, 500 on redis): "
        f"{'not measured' if met is None else 'met' if met else 'MISSED'}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "rows": rows,
                "versus_baseline": versus,
                "target_ms": TARGET_MS,
                "met": met,
                "redis_over_memory": ratio,
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
