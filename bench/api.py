"""HTTP claim-next against a trivial authenticated endpoint on the same daphne server.

    python bench/api.py [--clients 12] [--seconds 4] [--pairs 3] [--tasks 30000]

Twelve client processes, each on a keep-alive connection, hammer
``POST /api/board/claim-next`` (the board's logic) and, in other rounds,
``GET /api/whoami`` (authentication + one query: the baseline). The rounds run in
pairs, in ABBA order (whoami, claim, claim, whoami, …), so drift on a shared
machine falls on both sides; throughput is over all rounds of an endpoint. Each
client acts as its own agent, registered to hold as many tasks as it claims
(``max_concurrent`` at the registry's ceiling): every answer timed must be a claim
(200), or the run fails saying what else it timed. Prints
throughput and p50/p99 latency of both, each pair's ratio and the overall one;
writes ``bench/results/api.json``. Target: claim-next ≥ 0.7× the baseline's
throughput.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]
from bench.server import METRICS_TOKEN, Server  # noqa: E402

RESULTS = HERE / "results" / "api.json"
TARGET = 0.7


def client(
    port: int, token: str, kind: str, agents: list[str], start_at: float, seconds: float
) -> None:
    """One thread per agent, each on its own keep-alive connection."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    lock = threading.Lock()

    def one(agent: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        body = json.dumps({"agent_id": agent})
        mine: list[float] = []
        seen: dict[str, int] = {}
        # Connected before the start: a burst of new connections can overflow the
        # server's listen backlog, a connect retry that is not the load's subject.
        while True:
            try:
                conn.connect()
                break
            except OSError:
                if time.time() > start_at:
                    raise
                time.sleep(0.05)
        while time.time() < start_at:
            time.sleep(0.001)
        stop = start_at + seconds
        while time.time() < stop:
            began = time.perf_counter()
            try:
                if kind == "claim":
                    conn.request("POST", "/api/board/claim-next", body=body, headers=headers)
                else:
                    conn.request("GET", "/api/whoami", headers=headers)
                response = conn.getresponse()
                response.read()
                status = str(response.status)
            except (OSError, http.client.HTTPException):
                status = "connection_error"  # counted, never hidden
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            mine.append((time.perf_counter() - began) * 1000)
            seen[status] = seen.get(status, 0) + 1
        with lock:
            latencies.extend(mine)
            for code, n in seen.items():
                statuses[code] = statuses.get(code, 0) + n

    threads = [threading.Thread(target=one, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(json.dumps({"latencies": latencies, "statuses": statuses}))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_round(
    server: Server, kind: str, clients: int, seconds: float, per_process: int = 1
) -> dict[str, Any]:
    port = int(server.base.rsplit(":", 1)[1])
    start_at = time.time() + 1.5 + clients / 100  # every client connected and waiting
    groups = [list(range(i, min(i + per_process, clients))) for i in range(0, clients, per_process)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--client",
                kind,
                "--port",
                str(port),
                "--token",
                server.token,
                "--agent",
                ",".join(f"bench-{i}" for i in group),
                "--start-at",
                str(start_at),
                "--seconds",
                str(seconds),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for group in groups
    ]
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    for proc in procs:
        out = json.loads(proc.communicate(timeout=seconds + 120)[0])
        latencies += out["latencies"]
        for code, count in out["statuses"].items():
            statuses[code] = statuses.get(code, 0) + count
    return summary(latencies, statuses, seconds)


def summary(latencies: list[float], statuses: dict[str, int], seconds: float) -> dict[str, Any]:
    return {
        "requests": len(latencies),
        "per_s": round(len(latencies) / seconds, 1),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(percentile(latencies, 0.99), 2),
        "statuses": statuses,
        "seconds": seconds,
        "latencies": latencies,
    }


def without_latencies(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key != "latencies"}


def merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One endpoint's rounds as one: throughput over their total time."""
    latencies = [ms for r in rounds for ms in r["latencies"]]
    statuses: dict[str, int] = {}
    for r in rounds:
        for code, count in r["statuses"].items():
            statuses[code] = statuses.get(code, 0) + count
    seconds = sum(r["seconds"] for r in rounds)
    return summary(latencies, statuses, seconds)


def seed(server: Server, tasks: int, clients: int) -> None:
    script = (
        "import secrets\n"
        "from django.utils import timezone\n"
        "from board.models import Task\n"
        "from django.contrib.auth import get_user_model\n"
        "from core import registry\n"
        # The token's user owns the agents it claims as (acting as an agent needs it).
        "owner = get_user_model().objects.get(username='bench')\n"
        f"for i in range({clients}):\n"
        # Each client claims and never finishes: an agent set to hold that many
        # tasks at once (the registry's ceiling), or it would be timing 204s.
        "    registry.create_agent(id=f'bench-{i}', display_name='b', team='default',"
        " runtime='command', owner=owner, max_concurrent=10000)\n"
        "now = timezone.now()\n"
        "Task.objects.bulk_create([Task(id=secrets.token_hex(10), team_id='default', "
        "title=f't{i}', incarnation_id=secrets.token_hex(8), revision=1, created_at=now, "
        f"updated_at=now) for i in range({tasks})], batch_size=2000)\n"
    )
    subprocess.run(
        [sys.executable, str(server.root / "manage.py"), "shell", "-c", script],
        env=server.env,
        cwd=server.root,
        check=True,
    )


# --- many clients on PostgreSQL: the connection pool -----------------------------


def count_connections(name: str, stop: threading.Event, seen: list[int]) -> None:
    """Every 0.1 s, the server's connections to database ``name`` (the clients talk
    HTTP only); the most seen is ``seen[0]``."""
    import psycopg

    from bench.benchdb import PG_URL

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        while not stop.is_set():
            row = conn.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = %s", [name]
            ).fetchone()
            seen[0] = max(seen[0], int(row[0]) if row else 0)
            stop.wait(0.1)


def load_side(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``--clients`` clients claim for ``--seconds`` against ``root``'s server on a
    fresh PostgreSQL database: the rate of claims, the answers, the most
    connections the server held, its pool (from /healthz, when it has one)."""
    from bench.benchdb import BenchDB

    db = BenchDB("postgresql")
    server = None
    try:
        server = Server("memory", database_url=db.url, root=root)
        seed(server, args.tasks, args.clients)
        stop, seen = threading.Event(), [0]
        sampler = threading.Thread(target=count_connections, args=(db.name, stop, seen))
        sampler.start()
        try:
            row = run_round(server, "claim", args.clients, args.seconds, per_process=25)
        finally:
            stop.set()
            sampler.join()
        health = urllib.request.Request(
            server.base + "/healthz", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        )
        with urllib.request.urlopen(health, timeout=30) as answer:  # noqa: S310
            pool = json.loads(answer.read()).get("db_pool")
    except urllib.error.HTTPError as failing:  # 503: a part is down, the body still says
        pool = json.loads(failing.read()).get("db_pool")
    finally:
        if server is not None:
            server.stop()
        db.drop()
    claims = row["statuses"].get("200", 0)
    return {
        "root": str(root),
        "claims_per_s": round(claims / args.seconds, 1),
        "statuses": row["statuses"],
        "server_errors": sum(n for code, n in row["statuses"].items() if code.startswith("5")),
        "p50_ms": row["p50_ms"],
        "p99_ms": row["p99_ms"],
        "max_server_connections": seen[0],
        "pool": pool,
    }


def pool_load(args: argparse.Namespace) -> int:
    """This checkout against ``--baseline-root``, ABBA rounds, same run."""
    sides = {"this": ROOT, "baseline": Path(args.baseline_root).resolve()}
    if args.baseline_root == "none":
        # This checkout alone: a baseline without a pool may open a connection per
        # client, more than a shared server allows (max_connections).
        sides = {"this": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for r in range(args.pairs):
        for name in sides if r % 2 == 0 else reversed(list(sides)):
            runs[name].append(load_side(sides[name], args))
            last = runs[name][-1]
            most = last["max_server_connections"]
            print(f"{name:9} {last['claims_per_s']:>8}/s  5xx {last['server_errors']}  "
                  f"max connections {most}  {last['statuses']}")  # fmt: skip
    ratio = statistics.median(
        [
            a["claims_per_s"] / max(b["claims_per_s"], 0.1)
            for a, b in zip(runs["this"], runs.get("baseline", []), strict=False)
        ]
        or [0.0]
    )
    this = runs["this"]
    pool_max = min((run["pool"] or {}).get("max_size", 0) for run in this)
    no_5xx = all(run["server_errors"] == 0 for run in this)
    bounded = bool(pool_max) and all(run["max_server_connections"] <= pool_max for run in this)
    report = {"clients": args.clients, "seconds": args.seconds, "pairs": args.pairs,
              "runs": runs, "this_over_baseline": round(ratio, 2), "pool_max_size": pool_max,
              "no_server_errors": no_5xx, "connections_within_pool": bounded}  # fmt: skip
    print(f"claim-next, this / baseline = {ratio:.2f} (target >= 2); 5xx: "
          f"{'none' if no_5xx else 'SOME'}; server connections <= pool ({pool_max}): "
          f"{'yes' if bounded else 'NO'}")  # fmt: skip
    out = HERE / "results" / "api_pool.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0 if no_5xx and bounded else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=30_000)
    parser.add_argument(
        "--baseline-root",
        help="PostgreSQL load instead: claim-next from --clients clients (25 threads a "
        "process) against this checkout's server and the one at this path (a checkout "
        "of the baseline; 'none': this one alone), fresh databases, --pairs ABBA "
        "rounds; writes api_pool.json",
    )
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--agent", help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        agents = args.agent.split(",")
        client(args.port, args.token, args.client, agents, args.start_at, args.seconds)
        return 0

    if args.baseline_root:
        return pool_load(args)
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    server = Server("memory")
    rounds: dict[str, list[dict[str, Any]]] = {"whoami": [], "claim": []}
    try:
        seed(server, args.tasks, args.clients)
        for pair in range(args.pairs):
            order = ("whoami", "claim") if pair % 2 == 0 else ("claim", "whoami")
            for kind in order:
                rounds[kind].append(run_round(server, kind, args.clients, args.seconds))
    finally:
        server.stop()
    baseline, claims = merged(rounds["whoami"]), merged(rounds["claim"])
    pair_ratios = [
        round(c["per_s"] / w["per_s"], 2) if w["per_s"] else 0.0
        for w, c in zip(rounds["whoami"], rounds["claim"], strict=True)
    ]
    print(f"ratio per pair: {pair_ratios}")
    ratio = round(claims["per_s"] / baseline["per_s"], 2) if baseline["per_s"] else 0.0
    print(f"{'endpoint':24}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}  statuses")
    for name, row in (("GET /api/whoami", baseline), ("POST claim-next", claims)):
        print(
            f"{name:24}{row['per_s']:>10}{row['p50_ms']:>10}{row['p99_ms']:>10}  {row['statuses']}"
        )
    # What the bench names: claims. Anything but a 200 (a 204: nothing it could
    # take) means it timed something else; the run fails and says so.
    refused = {code: n for code, n in claims["statuses"].items() if code != "200"}
    if refused:
        print(f"claim-next answered {refused} besides 200: not a claim benchmark "
              "(too few --tasks, or agents that may not hold that many)")  # fmt: skip
    met = ratio >= TARGET and not refused
    print(f"claim-next / baseline = {ratio} (target >= {TARGET}): {'met' if met else 'MISSED'}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "clients": args.clients,
                "seconds": args.seconds,
                "pairs": args.pairs,
                "baseline": without_latencies(baseline),
                "claim_next": without_latencies(claims),
                "ratio": ratio,
                "pair_ratios": pair_ratios,
                "target": TARGET,
                "met": met,
                "not_claims": refused,
            },
            indent=2,
        )
    )
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
