"""Claim-next throughput at 1, 4 and 12 processes on SQLite and PostgreSQL, and the
claim's query plans and cost at 40,000 and 400,000 tasks.

    python bench/claim.py [--seconds 2] [--procs 1,4,12] [--backends sqlite,postgresql]
                          [--rounds 3] [--tasks 40000] [--no-scale] [--scale-rounds 4]

Throughput. Each process loops for ``--seconds`` from a common start; four loops
on the same throwaway database, each cell run ``--rounds`` times in ABBA order so
a drift of the shared machine falls on all of them:

* ``board``: ``board.store.claim_next(agent)``, as the API calls it.
* ``raw``: the claim alone on the driver connection — one conditional
  ``UPDATE … RETURNING`` setting what the board's sets, its candidate picked in a
  subquery by the ready predicate in dispatch order (``FOR UPDATE SKIP LOCKED``
  on PostgreSQL), ``BEGIN IMMEDIATE`` and the board's jittered retry on SQLite,
  the storage layer's pragmas. No ORM, no lapse probe, no event.
* ``raw_event``: ``raw`` plus, in the same transaction, what these semantics
  must write: the team's sequence bump and an event row of the board's size —
  the physical limit for a claim with a durable, gapless event.
* ``django_q2``: django-q2's ORM broker (``django_q.brokers.orm.ORM``, under the
  project's settings) on the same database: ``--tasks`` messages enqueued as
  ``async_task`` would sign them, then each process loops ``dequeue()`` and
  ``acknowledge()``. Its calls run in autocommit and, with ``CONN_MAX_AGE = 0``
  (Django's default and the project's), each closes the connection of the one
  before, as it does in a cluster's pusher.

Each figure is the cell's median run; each ratio the median of its rounds'
ratios. Targets: board ≥ 0.25× raw in every cell, board ≥ 5× django-q2 at 12
processes on SQLite.

Scale (``--no-scale`` skips it). At 40,000 and 400,000 tasks (mostly done, some
ready, some blocked on a dependency, some leased), the plans (SQLite ``EXPLAIN
QUERY PLAN``, PostgreSQL ``EXPLAIN``) of the claim-next statements (the candidate
pick inside them) and of the lapse probe, as ``board/store/claims.py`` issues
them, each checked to reach tasks by index lookups only, in index order (no scan
of tasks, no sort); and one process's ``claim_next`` latency on both databases,
timed in ABBA order, with the growth of its median from 40k to 400k.

Routes and limits (``--routes``: only this section). Both loops are workers that
finish what they take (claim-next, then complete), so a limit of one holds:

* ``plain``: an id the registry does not know, over unrouted tasks — no agent row
  is read or locked, no limit counted;
* ``routed``: registered agents (four label/runtime profiles, ``max_concurrent``
  1, their rows locked ``FOR UPDATE`` on PostgreSQL) over tasks with mixed routes;
* ``governed``: ``routed``, and a cap budget over the team far from its limit
  covers every claim (the agents have a default run ceiling).

Only the time inside ``claim_next`` is counted: the figure is claims per second of
claim-next time, per process, summed; ABBA rounds, medians, target routed ≥ 0.8×
plain in every cell.

Routed elsewhere (``--routes`` runs it too, ``--elsewhere`` only it). One process,
a registered agent (runtime ``command``, label ``ssd``) claims and completes its
work; only ``claim_next`` is timed. Two databases, timed in ABBA rounds: ``none``
holds only its work; ``elsewhere`` holds the same work behind 20,000 older ready
tasks routed to others (a third each to another runtime, another agent, a label it
lacks). Target: the claim's p50 with them ≤ 1.2× without (median of the rounds).

Prints the tables and writes ``bench/results/claim.json`` (``claim_routes.json``
with ``--routes``, ``claim_elsewhere.json`` with ``--elsewhere``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

from bench.benchdb import SQLITE_PRAGMAS, BenchDB, pg_answers  # noqa: E402

RESULTS = HERE / "results" / "claim.json"
IMPLS = ("board", "raw", "raw_event", "django_q2")
ROUTE_IMPLS = ("plain", "routed", "governed")
# The governed loop's cap budget (team scope, far from its limit) and its agents'
# default run ceiling: a cap admits a run only with a known ceiling.
GOVERNED_CAP_CENTS = 10**9
GOVERNED_CEILING_CENTS = 100
TARGET_ROUTED = 0.8  # routed / plain claim-next, every cell
ROUTES_RESULTS = HERE / "results" / "claim_routes.json"
# The routed loop's agents (by worker index, mod 4) and the routes its tasks carry
# (by task index, mod 7): every route is some agent's.
ROUTE_AGENTS = (
    ("command", ["gpu"]),
    ("command", ["ssd"]),
    ("codex", ["gpu", "ssd"]),
    ("claude-code", []),
)
TASK_ROUTES = (
    None,
    ("route_labels", '["gpu"]'),
    ("route_labels", '["ssd"]'),
    ("route_runtime", "codex"),
    ("route_labels", '["gpu", "ssd"]'),
    ("route_runtime", "claude-code"),
    None,
)
ELSEWHERE_TASKS = 20_000
ELSEWHERE_MINE = 4_000  # the claimer's own work (unrouted), newer than the rest
TARGET_ELSEWHERE = 1.2  # p50 with 20,000 routed elsewhere / p50 with none
ELSEWHERE_RESULTS = HERE / "results" / "claim_elsewhere.json"
# The routes the 20,000 carry, in turn: none of them the claimer's.
ELSEWHERE_ROUTES = (
    ("route_runtime", "codex"),
    ("route_agent_id", "someone-else"),
    ("route_labels", '["gpu"]'),
)
HEADINGS = {"board": "board/s", "raw": "raw/s", "raw_event": "raw+event/s",
            "django_q2": "django-q2/s"}  # fmt: skip
TARGET_RAW = 0.25  # board / raw, every cell
TARGET_DJQ = 5.0  # board / django-q2, 12 processes, SQLite
SCALE_SIZES = (40_000, 400_000)

# --- the raw loops ---------------------------------------------------------------

# The board's claim statement, hand-written: the same SET list, guard and candidate.
_SET = (
    "assignee_agent_id = {p}, assignee_runtime = NULL, status = 'in_progress', "
    "updated_at = {p}, lease_until = {p}, lease_duration_ms = {p}, attempts = attempts + 1, "
    "started_at = COALESCE(started_at, {p}), revision = revision + 1"
)
_PICK = (
    "SELECT id FROM tasks WHERE status = 'todo' AND dropped = {false} AND unmet_deps = 0 "
    "ORDER BY created_at, id LIMIT 1"
)
_GUARD = "status = 'todo' AND assignee_agent_id IS NULL AND dropped = {false}"
RAW_SQLITE = (
    f"UPDATE tasks SET {_SET.format(p='?')} WHERE id = ({_PICK.format(false='0')}) "  # noqa: S608
    f"AND {_GUARD.format(false='0')} RETURNING id"
)
RAW_PG = (
    f"UPDATE tasks SET {_SET.format(p='%s')} "  # noqa: S608
    f"WHERE id = ({_PICK.format(false='false')} FOR UPDATE SKIP LOCKED) "
    f"AND {_GUARD.format(false='false')} RETURNING id"
)
LEASE_MS = 300_000

# What raw_event writes per claim besides the claim: the team's sequence bump and an
# event row carrying a task body of the board's size (the smoke test keeps it so).
RAW_EVENT_PAYLOAD = json.dumps(
    {"task": {f"field_{i}": "x" * 16 for i in range(34)}, "prev_status": "todo", "revision": 2}
)
SEQ_SQL = (
    "UPDATE teams SET last_event_seq = last_event_seq + 1 WHERE id = {p} RETURNING last_event_seq"
)
EVENT_SQL = (
    "INSERT INTO events (team_id, seq, kind, task_id, prev_status, created_at, payload) "
    "VALUES ({p}, {p}, 'claimed', {p}, 'todo', {p}, {p})"
)


def raw_claim_loop(backend: str, url: str, agent: str, with_event: bool) -> Any:
    """A claim function for the raw loops: True per claim, None when nothing is left."""
    if backend == "sqlite":
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=0.25)
        for pragma in SQLITE_PRAGMAS:  # the board's own connections' recipe
            conn.execute(pragma)
    else:
        import psycopg

        conn = psycopg.connect(url, autocommit=True)

    def event(mark: str, task_id: str, stamp: Any) -> None:
        seq = conn.execute(SEQ_SQL.format(p=mark), ["default"]).fetchone()[0]
        conn.execute(EVENT_SQL.format(p=mark), ["default", seq, task_id, stamp, RAW_EVENT_PAYLOAD])

    def claim_sqlite() -> bool | None:
        at = dt.datetime.now(dt.UTC)
        stamp = at.strftime("%Y-%m-%d %H:%M:%S.%f")
        until = (at + dt.timedelta(milliseconds=LEASE_MS)).strftime("%Y-%m-%d %H:%M:%S.%f")
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError:
                time.sleep(random.uniform(0.02, 0.15))  # the board's retry policy
        row = conn.execute(RAW_SQLITE, [agent, stamp, until, LEASE_MS, stamp]).fetchone()
        if row is not None and with_event:
            event("?", row[0], stamp)
        conn.execute("COMMIT")
        return None if row is None else True

    def claim_pg() -> bool | None:
        at = dt.datetime.now(dt.UTC)
        until = at + dt.timedelta(milliseconds=LEASE_MS)
        with conn.transaction():
            row = conn.execute(RAW_PG, [agent, at, until, LEASE_MS, at]).fetchone()
            if row is not None and with_event:
                event("%s", row[0], at)
        return None if row is None else True

    return claim_sqlite if backend == "sqlite" else claim_pg


# --- the board and django-q2 -------------------------------------------------------


def board_claim_loop(agent: str) -> Any:
    import django

    django.setup()
    from django.db import connection

    from board import store

    connection.ensure_connection()

    def take() -> bool | None:
        result = store.claim_next(agent)
        if result is not None and not result.ok:
            raise SystemExit(f"{agent}: claim-next refused: {result.outcome} {result.detail}")
        return None if result is None else True

    return take


# Seconds spent inside claim_next by a cycle loop (plain/routed), for worker().
CLAIM_SECONDS = [0.0]


def board_cycle_loop(agent: str, routed: bool, governed: bool = False) -> Any:
    """claim_next, then complete what it took (the complete is not timed). Governed:
    routed, and a cap budget covers every claim (its agents have a run ceiling)."""
    import django

    django.setup()
    from django.db import connection

    from board import store
    from core import registry
    from core.models import Agent

    connection.ensure_connection()
    runtime = None
    registered = Agent.objects.filter(pk=agent).first()
    if routed:
        runtime, labels = ROUTE_AGENTS[int(agent.rsplit("w", 1)[1]) % len(ROUTE_AGENTS)]
        if registered is None:
            settings = {"max_run_cents": GOVERNED_CEILING_CENTS} if governed else None
            registry.create_agent(
                id=agent, display_name=agent, team="default", runtime=runtime, labels=labels,
                settings=settings,
            )  # fmt: skip
        registered = Agent.objects.get(pk=agent)
        # What the loop names: a registered agent under its limit of one, its route.
        assert (registered.runtime, registered.labels, registered.max_concurrent) == (
            runtime,
            labels,
            1,
        ), registered
    elif registered is not None:
        raise SystemExit(f"plain loop: {agent!r} is registered; the plain claimer must not be")

    def take() -> bool | None:
        start = time.perf_counter()
        result = store.claim_next(agent, runtime=runtime)
        CLAIM_SECONDS[0] += time.perf_counter() - start
        if result is None:
            return None
        if not result.ok or result.task is None:
            # A refusal is not a claim: the bench would be timing the gate's "no".
            raise SystemExit(f"{agent}: claim-next refused: {result.outcome} {result.detail}")
        store.complete(result.task.id, None, ticket=result.ticket)
        return True

    return take


def django_q2_loop() -> Any:
    """dequeue() + acknowledge() of django-q2's ORM broker: True per message
    acknowledged, False for a message lost to a racer, None when the queue is empty
    (dequeue() then also sleeps its poll interval, as it does in a cluster)."""
    import django

    django.setup()
    from django_q.brokers.orm import ORM
    from django_q.conf import Conf

    broker = ORM(list_key=Conf.CLUSTER_NAME)

    def take() -> bool | None:
        got = broker.dequeue()
        if got is None:
            return None
        for ack_id, _payload in got:
            broker.acknowledge(ack_id)
        return bool(got)

    return take


def enqueue_messages(count: int) -> None:
    """``count`` messages on django-q2's ORM queue, each signed as ``async_task``
    signs its package (in one transaction: the bench's seeding, not its subject)."""
    import django

    django.setup()
    from django.db import transaction
    from django.utils import timezone
    from django_q.conf import Conf
    from django_q.humanhash import uuid
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    now = timezone.now()
    rows = []
    for _ in range(count):
        tag = uuid()
        task = {"id": tag[1], "name": tag[0], "func": "board.tasks.noop", "args": (),
                "kwargs": {}, "started": now, "cluster": None, "sync": False}  # fmt: skip
        rows.append(OrmQ(key=Conf.CLUSTER_NAME, payload=SignedPackage.dumps(task), lock=now))
    with transaction.atomic():
        OrmQ.objects.bulk_create(rows, batch_size=2000)


# --- a worker process --------------------------------------------------------------


def worker(impl: str, args: argparse.Namespace) -> dict[str, Any]:
    """Build ``impl``'s loop, wait at the barrier, loop for ``--seconds``.

    A claim whose write budget ran out (the board) or a broker call that hit
    SQLite's busy timeout (django-q2) changed nothing: it is counted apart and the
    loop goes on, as a worker would poll again.
    """
    from django.db.utils import DatabaseError

    if impl == "board":
        take = board_claim_loop(args.agent)
    elif impl in ROUTE_IMPLS:
        take = board_cycle_loop(args.agent, routed=impl != "plain", governed=impl == "governed")
    elif impl == "django_q2":
        take = django_q2_loop()
    else:
        take = raw_claim_loop(args.backend, args.url, args.agent, with_event=impl == "raw_event")
    print(json.dumps({"ready": True}), flush=True)
    barrier = Path(args.barrier)
    while not barrier.exists():
        time.sleep(0.001)
    start = float(barrier.read_text())
    count = lost = errors = 0
    ran_dry = False
    cpu = time.process_time()
    while time.time() < start + args.seconds:
        try:
            got = take()
        except DatabaseError:  # WriteBudgetExceeded, or SQLite's "database is locked"
            errors += 1
            continue
        if got is None:
            ran_dry = True
            break
        if got is False:
            lost += 1
        else:
            count += 1
    cpu = time.process_time() - cpu
    return {
        "count": count,
        "lost": lost,
        "errors": errors,
        "end": time.time(),
        "cpu": cpu,
        "claim_s": CLAIM_SECONDS[0],
        "ran_dry": ran_dry,
    }


# --- the driver: throughput ----------------------------------------------------------


def seed_tasks(db: BenchDB, count: int) -> None:
    db.reset()
    base = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    db.insert_tasks(
        db.task_row(f"t{i:07d}", base + dt.timedelta(microseconds=10 * i)) for i in range(count)
    )


def route_tasks(db: BenchDB, count: int) -> None:
    """Give the seeded tasks ``TASK_ROUTES`` in turn (by the index in their ids)."""
    conn = db.connect()
    try:
        p = "?" if db.backend == "sqlite" else "%s"
        for i, route in enumerate(TASK_ROUTES):
            if route is None:
                continue
            column, value = route
            cast = "::jsonb" if db.backend != "sqlite" and column == "route_labels" else ""
            ids = [f"t{n:07d}" for n in range(i, count, len(TASK_ROUTES))]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join(p for _ in chunk)
                conn.execute(
                    f"UPDATE tasks SET {column} = {p}{cast} WHERE id IN ({marks})",  # noqa: S608
                    [value, *chunk],
                )
        if db.backend == "sqlite":
            conn.commit()
    finally:
        conn.close()


def clear_budgets(db: BenchDB) -> None:
    conn = db.connect()
    try:
        conn.execute("DELETE FROM budgets")
        if db.backend == "sqlite":
            conn.commit()
    finally:
        conn.close()


def create_cap_budget() -> None:
    """The governed loop's cap budget over the team, far from its limit."""
    import django

    django.setup()
    from board.store import spend

    spend.create_budget(
        "default",
        {"scope": "team", "scope_id": "default", "window": "month",
         "limit_cents": GOVERNED_CAP_CENTS, "mode": "cap"},
    )  # fmt: skip


def run_one(db: BenchDB, impl: str, procs: int, seconds: float, tasks: int) -> dict[str, Any]:
    """One timed run of ``impl`` on freshly seeded data (``tasks`` tasks, or messages)."""
    seed_tasks(db, 0 if impl == "django_q2" else tasks)
    if impl in ("routed", "governed"):
        route_tasks(db, tasks)
    clear_budgets(db)  # only the governed loop's claims are covered by one
    if impl == "governed":
        subprocess.run([sys.executable, __file__, "--cap-budget"], env=db.env, check=True)
    if impl == "django_q2":
        subprocess.run([sys.executable, __file__, "--enqueue", str(tasks)], env=db.env, check=True)
    # A fresh barrier per run: a worker that found an old one would start at once.
    barrier = db.tmp / f"barrier-{impl}-{procs}-{time.monotonic_ns()}"
    argv = [sys.executable, __file__, "--worker", impl, "--barrier", str(barrier),
            "--seconds", str(seconds), "--url", db.url, "--backend", db.backend]  # fmt: skip
    # Each loop its own claimers: the routed loop registers its ids, the plain
    # loop's must stay unknown to the registry.
    prefix = f"{impl}-" if impl in ROUTE_IMPLS else ""
    workers = [
        subprocess.Popen(
            [*argv, "--agent", f"{prefix}w{i}"], env=db.env, stdout=subprocess.PIPE, text=True
        )
        for i in range(procs)
    ]
    for w in workers:
        assert json.loads(w.stdout.readline()) == {"ready": True}
    start = time.time()
    staged = barrier.with_suffix(".staged")
    staged.write_text(repr(start))
    staged.replace(barrier)  # whole: a worker never reads it half written
    results = [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]
    if any(w.returncode for w in workers):
        raise RuntimeError(f"a {impl} worker failed")
    done = sum(r["count"] for r in results)
    elapsed = max(r["end"] for r in results) - start
    if done >= tasks:
        print(f"  warning: {impl} drained all {tasks}; raise --tasks", file=sys.stderr)
    elif impl not in ("django_q2", "routed", "governed") and any(r["ran_dry"] for r in results):
        # A loop that found nothing while work was left measured no claims (every
        # task is anyone's here; the routed loop's may be routed to no worker of it).
        raise RuntimeError(f"a {impl} worker found nothing to claim with {tasks - done} left")
    return {
        "done": done,
        "seconds": round(elapsed, 3),
        "per_sec": round(done / elapsed),
        "lost": sum(r["lost"] for r in results),
        "errors": sum(r["errors"] for r in results),
        # The loops' own CPU (user + system) per claim or message, in µs.
        "cpu_us": round(sum(r["cpu"] for r in results) / max(done, 1) * 1e6),
        # Claims per second of claim_next time, per process, summed (cycle loops).
        "claims_per_claim_s": round(
            sum(r["count"] / r["claim_s"] for r in results if r.get("claim_s"))
        ),
    }


def measure_routes(db: BenchDB, procs: int, args: argparse.Namespace) -> dict[str, Any]:
    """One row of the routes section: plain and routed, ``--rounds`` ABBA rounds."""
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in ROUTE_IMPLS}
    for r in range(args.rounds):
        for impl in ROUTE_IMPLS if r % 2 == 0 else reversed(ROUTE_IMPLS):
            runs[impl].append(run_one(db, impl, procs, args.seconds, args.tasks))

    def ratio(impl: str) -> float:
        pairs = zip(runs[impl], runs["plain"], strict=True)
        return round(
            statistics.median(
                a["claims_per_claim_s"] / max(b["claims_per_claim_s"], 1) for a, b in pairs
            ),
            2,
        )

    def median(impl: str) -> dict[str, Any]:
        ordered = sorted(runs[impl], key=lambda run: run["claims_per_claim_s"])
        return {
            **ordered[len(ordered) // 2],
            "rounds": [x["claims_per_claim_s"] for x in runs[impl]],
        }

    return {
        "backend": db.backend,
        "procs": procs,
        "plain": median("plain"),
        "routed": median("routed"),
        "governed": median("governed"),
        "routed_over_plain": ratio("routed"),
        "governed_over_plain": ratio("governed"),
    }


def routes_section(backends: list[str], args: argparse.Namespace) -> int:
    rows = []
    for backend in backends:
        db = BenchDB(backend)
        try:
            for n in (int(p) for p in args.procs.split(",") if p):
                row = measure_routes(db, n, args)
                rows.append(row)
                print(
                    f"{backend:<11} {n:>5} plain {row['plain']['claims_per_claim_s']:>8}/s "
                    f"routed {row['routed']['claims_per_claim_s']:>8}/s "
                    f"governed {row['governed']['claims_per_claim_s']:>8}/s "
                    f"routed/plain {row['routed_over_plain']:.2f} "
                    f"governed/plain {row['governed_over_plain']:.2f} "
                    f"(cycles done: {row['plain']['done']} / {row['routed']['done']} / "
                    f"{row['governed']['done']})"
                )
        finally:
            db.drop()
    met = bool(rows) and all(
        min(r["routed_over_plain"], r["governed_over_plain"]) >= TARGET_ROUTED for r in rows
    )
    print(
        f"routed and governed >= {TARGET_ROUTED}x plain claim-next in every cell: "
        f"{'met' if met else 'MISSED'}"
    )
    report = {"seconds_per_run": args.seconds, "rounds": args.rounds, "tasks": args.tasks,
              "cpus": os.cpu_count(), "target_routed_over_plain": TARGET_ROUTED,
              "rows": rows, "met": met}  # fmt: skip
    ROUTES_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    ROUTES_RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {ROUTES_RESULTS.relative_to(HERE.parent)}")
    return 0


def measure(db: BenchDB, procs: int, args: argparse.Namespace) -> dict[str, Any]:
    """One table row: ``--rounds`` rounds of every loop, ABBA, medians."""
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in IMPLS}
    for r in range(args.rounds):
        for impl in IMPLS if r % 2 == 0 else reversed(IMPLS):
            runs[impl].append(run_one(db, impl, procs, args.seconds, args.tasks))

    def ratio(over: str) -> float:
        pairs = zip(runs["board"], runs[over], strict=True)
        return round(statistics.median(a["per_sec"] / max(b["per_sec"], 1) for a, b in pairs), 2)

    def median_run(impl: str) -> dict[str, Any]:
        ordered = sorted(runs[impl], key=lambda run: run["per_sec"])
        return {**ordered[len(ordered) // 2], "rounds": [run["per_sec"] for run in runs[impl]]}

    return {
        "backend": db.backend,
        "procs": procs,
        **{impl: median_run(impl) for impl in IMPLS},
        "board_over_raw": ratio("raw"),
        "board_over_raw_event": ratio("raw_event"),
        "board_over_django_q2": ratio("django_q2"),
    }


# --- scale: plans and latency at 40k and 400k tasks -----------------------------------


def seed_history(db: BenchDB, count: int) -> None:
    """``count`` tasks, oldest first: 70 % done, 15 % ready, 5 % waiting on a
    dependency, 5 % leased (leases live: nothing lapses), 5 % backlog. On SQLite
    without planner statistics, as the board's own databases are."""
    db.reset()
    base = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    far = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)

    def row(i: int) -> tuple[Any, ...]:
        at = base + dt.timedelta(milliseconds=i)
        kind = i % 20
        if kind < 14:
            return db.task_row(f"t{i:07d}", at, status="done")
        if kind == 17:
            return db.task_row(f"t{i:07d}", at, unmet_deps=1)
        if kind == 18:
            return db.task_row(f"t{i:07d}", at, status="in_progress", lease_until=far)
        if kind == 19:
            return db.task_row(f"t{i:07d}", at, status="backlog")
        return db.task_row(f"t{i:07d}", at)

    db.insert_tasks(row(i) for i in range(count))
    if db.backend == "sqlite":
        # The board never runs ANALYZE: plan as a board's own database is planned.
        conn = db.connect()
        conn.execute("DELETE FROM sqlite_stat1")
        conn.close()


def plans() -> dict[str, str]:
    """The plans of the claim's statements as ``claim_next`` issues them (in a worker):
    its claim-next statement (the candidate pick inside it) for the topological
    order over every team, over one team, and for the priority order; and the
    lapse probe."""
    from django.db import connection

    from board.store import claims

    vendor = connection.vendor
    at = connection.ops.adapt_datetimefield_value(dt.datetime.now(dt.UTC))
    claim = claims._set_params("bench", None, LEASE_MS)
    claimer = claims.Claimer("bench", None, [])  # an id the registry does not know

    def statement(dispatcher: str, teams: list[str] | None) -> tuple[str, list[Any]]:
        return claims.claim_next_statement(
            vendor, dispatcher, claimer, set_params=claim, teams=teams, excluded=[], label=None
        )

    statements = {
        "claim_next (topological)": statement("topological", None),
        "claim_next (topological, team)": statement("topological", ["default"]),
        "claim_next (priority)": statement("priority", None),
        "lapse probe": (f"{claims._ANY_LAPSED_SQL} LIMIT 1", [at]),
    }
    explain = "EXPLAIN QUERY PLAN" if vendor == "sqlite" else "EXPLAIN"
    out = {}
    for name, (sql, params) in statements.items():
        with connection.cursor() as cursor:
            cursor.execute(f"{explain} {sql}", params)
            out[name] = "\n".join(str(row[-1]) for row in cursor.fetchall())
    return out


def is_index_lookup(plan: str, vendor: str) -> bool:
    if vendor == "sqlite":
        return "INDEX" in plan and "SCAN tasks" not in plan and "TEMP B-TREE" not in plan
    return "Index" in plan and "Seq Scan" not in plan and "Sort" not in plan


def time_claims(count: int) -> dict[str, Any]:
    """Plans, then ``count`` claim_next calls timed one by one (in a worker)."""
    import django

    django.setup()
    from board import store

    explained = plans()
    for _ in range(50):  # warm up: connection, statement caches, imports
        store.claim_next("warm")
    times = []
    for _ in range(count):
        began = time.perf_counter()
        assert store.claim_next("bench") is not None
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return {
        "plans": explained,
        "p50_ms": round(times[len(times) // 2], 3),
        "p99_ms": round(times[int(len(times) * 0.99)], 3),
        "per_sec": round(count / (sum(times) / 1000)),
    }


def scale(backend: str, claims: int, rounds: int) -> dict[str, Any]:
    dbs = {size: BenchDB(backend, tag=f"_{size}") for size in SCALE_SIZES}
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in SCALE_SIZES}
    try:
        for size, db in dbs.items():
            seed_history(db, size)
        for r in range(rounds):
            for size in SCALE_SIZES if r % 2 == 0 else reversed(SCALE_SIZES):
                out = subprocess.run(
                    [sys.executable, __file__, "--time-claims", str(claims)],
                    env=dbs[size].env, capture_output=True, text=True, check=True,
                )  # fmt: skip
                runs[size].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        for db in dbs.values():
            db.drop()
    result: dict[str, Any] = {"backend": backend, "claims_per_run": claims}
    for size in SCALE_SIZES:
        ordered = sorted(runs[size], key=lambda run: run["per_sec"])
        median = ordered[len(ordered) // 2]
        result[str(size)] = {
            **median,
            "rounds": [run["per_sec"] for run in runs[size]],
            "index_lookups": {
                name: is_index_lookup(plan, backend) for name, plan in median["plans"].items()
            },
        }
    # Each round's p50 at 400k over its p50 at 40k (1.0: no growth), the median round.
    small, large = (runs[size] for size in SCALE_SIZES)
    growth = [b["p50_ms"] / a["p50_ms"] for a, b in zip(small, large, strict=True)]
    result["p50_growth"] = round(statistics.median(growth), 2)
    return result


# --- routed elsewhere: a claim's cost beside 20,000 tasks it may not take ---------------


def seed_elsewhere(db: BenchDB, elsewhere: int, mine: int) -> None:
    """``elsewhere`` ready tasks routed to others (ELSEWHERE_ROUTES in turn), then
    ``mine`` newer unrouted ones. On SQLite without planner statistics, as the
    board's own databases are."""
    db.reset()
    base = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    rows = [
        db.task_row(f"e{i:07d}", base + dt.timedelta(microseconds=10 * i)) for i in range(elsewhere)
    ]
    later = base + dt.timedelta(hours=1)
    rows += [
        db.task_row(f"m{i:07d}", later + dt.timedelta(microseconds=10 * i)) for i in range(mine)
    ]
    db.insert_tasks(rows)
    conn = db.connect()
    try:
        p = "?" if db.backend == "sqlite" else "%s"
        for n, (column, value) in enumerate(ELSEWHERE_ROUTES):
            cast = "::jsonb" if db.backend != "sqlite" and column == "route_labels" else ""
            ids = [f"e{i:07d}" for i in range(n, elsewhere, len(ELSEWHERE_ROUTES))]
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ", ".join(p for _ in chunk)
                conn.execute(
                    f"UPDATE tasks SET {column} = {p}{cast} WHERE id IN ({marks})",  # noqa: S608
                    [value, *chunk],
                )
        if db.backend == "sqlite":
            conn.commit()
            conn.execute("DELETE FROM sqlite_stat1")  # the board never runs ANALYZE
            conn.commit()
        else:
            conn.execute("ANALYZE tasks")
    finally:
        conn.close()


ELSEWHERE_AGENT = "elsewhere-w0"


def time_elsewhere(count: int) -> dict[str, Any]:
    """In a worker: register the claimer (once), then ``count`` claim_next calls timed
    one by one, each claim completed untimed. Also the claim statement's plan."""
    import django

    django.setup()
    from django.db import connection

    from board import store
    from board.store import claims
    from core import registry
    from core.models import Agent

    if not Agent.objects.filter(pk=ELSEWHERE_AGENT).exists():
        registry.create_agent(
            id=ELSEWHERE_AGENT, display_name="bench", team="default", runtime="command",
            labels=["ssd"],
        )  # fmt: skip

    cpu = [0.0]

    def one() -> float:
        began, began_cpu = time.perf_counter(), time.process_time()
        result = store.claim_next(ELSEWHERE_AGENT)
        took = time.perf_counter() - began
        cpu[0] += time.process_time() - began_cpu
        if result is None or not result.ok or result.task is None:
            raise SystemExit(f"claim-next took nothing: {result}")
        if not result.task.id.startswith("m"):
            raise SystemExit(f"claimed {result.task.id}, routed elsewhere")
        store.complete(result.task.id, None, ticket=result.ticket)
        return took * 1000

    for _ in range(20):  # warm up: connection, statement caches, imports
        one()
    cpu[0] = 0.0
    times = sorted(one() for _ in range(count))
    vendor = connection.vendor
    claimer = claims._gate(ELSEWHERE_AGENT, None)
    set_params = claims._set_params(ELSEWHERE_AGENT, None, LEASE_MS)
    sql, params = claims.claim_next_statement(
        vendor, "topological", claimer, set_params=set_params, teams=["default"], excluded=[],
        label=None,
    )  # fmt: skip
    explain = "EXPLAIN QUERY PLAN" if vendor == "sqlite" else "EXPLAIN"
    with connection.cursor() as cursor:
        cursor.execute(f"{explain} {sql}", params)
        plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
    return {
        "p50_ms": round(times[len(times) // 2], 3),
        "p90_ms": round(times[int(len(times) * 0.9)], 3),
        "per_sec": round(count / (sum(times) / 1000)),
        # The claiming process's own CPU per claim (no waits on the disk or server).
        "cpu_us": round(cpu[0] / count * 1e6),
        "plan": plan,
    }


def elsewhere(backend: str, claims: int, rounds: int) -> dict[str, Any]:
    """One backend: the claim's p50 with 20,000 older tasks routed elsewhere over its
    p50 with none, per ABBA round; the median round."""
    sizes = {"none": 0, "elsewhere": ELSEWHERE_TASKS}
    dbs = {name: BenchDB(backend, tag=f"_{name}") for name in sizes}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sizes}
    try:
        for name, db in dbs.items():
            seed_elsewhere(db, sizes[name], ELSEWHERE_MINE)
        for r in range(rounds):
            for name in sizes if r % 2 == 0 else reversed(list(sizes)):
                out = subprocess.run(
                    [sys.executable, __file__, "--time-elsewhere", str(claims)],
                    env=dbs[name].env, capture_output=True, text=True,
                )  # fmt: skip
                if out.returncode:
                    raise RuntimeError(f"{backend} {name}: {out.stderr[-2000:]}")
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        for db in dbs.values():
            db.drop()
    pairs = list(zip(runs["none"], runs["elsewhere"], strict=True))
    ratios = [b["p50_ms"] / a["p50_ms"] for a, b in pairs]
    cpu_ratios = [b["cpu_us"] / max(a["cpu_us"], 1) for a, b in pairs]
    return {
        "backend": backend,
        "claims_per_run": claims,
        **{
            name: {
                **sorted(runs[name], key=lambda x: x["p50_ms"])[len(runs[name]) // 2],
                "rounds_p50_ms": [x["p50_ms"] for x in runs[name]],
            }
            for name in sizes
        },  # fmt: skip
        "elsewhere_over_none": round(statistics.median(ratios), 2),
        "cpu_elsewhere_over_none": round(statistics.median(cpu_ratios), 2),
    }


def elsewhere_section(backends: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for backend in backends:
        row = elsewhere(backend, args.elsewhere_claims, args.scale_rounds)
        rows.append(row)
        print(
            f"{backend:<11} claim_next p50 with none {row['none']['p50_ms']} ms, with "
            f"{ELSEWHERE_TASKS:,} older routed elsewhere {row['elsewhere']['p50_ms']} ms: "
            f"{row['elsewhere_over_none']:.2f}x (CPU per claim {row['none']['cpu_us']} / "
            f"{row['elsewhere']['cpu_us']} µs: {row['cpu_elsewhere_over_none']:.2f}x)"
        )
        for line in row["elsewhere"]["plan"].splitlines():
            print(f"    {line}")
    met = bool(rows) and all(r["elsewhere_over_none"] <= TARGET_ELSEWHERE for r in rows)
    print(f"routed elsewhere <= {TARGET_ELSEWHERE}x none: {'met' if met else 'MISSED'}")
    report = {"tasks_elsewhere": ELSEWHERE_TASKS, "target": TARGET_ELSEWHERE, "rows": rows,
              "met": met, "load_before": round(os.getloadavg()[0], 2)}  # fmt: skip
    ELSEWHERE_RESULTS.parent.mkdir(parents=True, exist_ok=True)
    ELSEWHERE_RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {ELSEWHERE_RESULTS.relative_to(HERE.parent)}")
    return rows


# --- the report ----------------------------------------------------------------------


def print_throughput(rows: list[dict[str, Any]]) -> None:
    head = "".join(f" {HEADINGS[impl]:>12}" for impl in IMPLS)
    print(f"{'backend':<11} {'procs':>5}{head} {'/raw':>6} {'/raw+ev':>7} {'/djq2':>6}")
    for row in rows:
        cells = "".join(f" {row[impl]['per_sec']:>12}" for impl in IMPLS)
        print(
            f"{row['backend']:<11} {row['procs']:>5}{cells} {row['board_over_raw']:>6.2f} "
            f"{row['board_over_raw_event']:>7.2f} {row['board_over_django_q2']:>6.2f}"
        )


def print_scale(result: dict[str, Any]) -> None:
    backend = result["backend"]
    for size in SCALE_SIZES:
        cell = result[str(size)]
        print(f"== {backend}, {size:,} tasks: claim_next p50 {cell['p50_ms']} ms, "
              f"p99 {cell['p99_ms']} ms, {cell['per_sec']}/s (1 process)")  # fmt: skip
        for name, plan in cell["plans"].items():
            verdict = "index lookup" if cell["index_lookups"][name] else "NOT AN INDEX LOOKUP"
            print(f"  {name}: {verdict}")
            for line in plan.splitlines():
                print(f"    {line}")
    print(f"== {backend}: claim_next p50 at 400k / at 40k = {result['p50_growth']} "
          "(median of the rounds)")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--procs", default="1,4,12")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--tasks", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3, help="ABBA rounds per cell (medians)")
    parser.add_argument("--no-scale", action="store_true", help="skip the 40k/400k section")
    parser.add_argument("--scale-claims", type=int, default=1000)
    parser.add_argument("--scale-rounds", type=int, default=4, help="ABBA rounds at each size")
    parser.add_argument("--routes", action="store_true", help="only the routes-and-limits section")
    parser.add_argument(
        "--elsewhere", action="store_true", help="only the routed-elsewhere section"
    )
    parser.add_argument("--elsewhere-claims", type=int, default=400)
    parser.add_argument("--time-elsewhere", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cap-budget", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=IMPLS + ROUTE_IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--enqueue", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--time-claims", type=int, help=argparse.SUPPRESS)
    for name in ("--agent", "--barrier", "--url", "--backend"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        print(json.dumps(worker(args.worker, args)), flush=True)
        return 0
    if args.enqueue is not None:
        enqueue_messages(args.enqueue)
        return 0
    if args.time_claims is not None:
        print(json.dumps(time_claims(args.time_claims)), flush=True)
        return 0
    if args.cap_budget:
        create_cap_budget()
        return 0
    if args.time_elsewhere is not None:
        print(json.dumps(time_elsewhere(args.time_elsewhere)), flush=True)
        return 0

    backends = [b for b in args.backends.split(",") if b]
    if "postgresql" in backends and not pg_answers():
        print("PostgreSQL does not answer; skipping it", file=sys.stderr)
        backends.remove("postgresql")
    if args.elsewhere:
        elsewhere_section(backends, args)
        return 0
    if args.routes:
        elsewhere_section(backends, args)
        return routes_section(backends, args)
    report: dict[str, Any] = {
        "seconds_per_run": args.seconds,
        "rounds": args.rounds,
        "tasks": args.tasks,
        "cpus": os.cpu_count(),
        "load_before": round(os.getloadavg()[0], 2),
        "targets": {"board_over_raw": TARGET_RAW, "board_over_django_q2_sqlite_12": TARGET_DJQ},
        "throughput": [],
        "scale": [],
    }
    for backend in backends:
        db = BenchDB(backend)
        try:
            for n in (int(p) for p in args.procs.split(",") if p):
                report["throughput"].append(measure(db, n, args))
                print_throughput(report["throughput"][-1:])
        finally:
            db.drop()
    print()
    print_throughput(report["throughput"])
    if not args.no_scale:
        for backend in backends:
            report["scale"].append(scale(backend, args.scale_claims, args.scale_rounds))
            print_scale(report["scale"][-1])

    rows = report["throughput"]
    raw_met = bool(rows) and all(r["board_over_raw"] >= TARGET_RAW for r in rows)
    djq = [r["board_over_django_q2"] for r in rows if r["backend"] == "sqlite" and r["procs"] == 12]
    djq_met = bool(djq) and djq[0] >= TARGET_DJQ
    indexed = all(ok for s in report["scale"] for size in SCALE_SIZES
                  for ok in s[str(size)]["index_lookups"].values())  # fmt: skip
    report["met"] = {
        "board_over_raw": raw_met if rows else None,
        "board_over_django_q2": djq_met if djq else None,
        "index_lookups": indexed if report["scale"] else None,
    }
    if rows:
        print(f"board >= {TARGET_RAW}x raw in every cell: {'met' if raw_met else 'MISSED'}")
    if djq:
        print(f"board >= {TARGET_DJQ}x django-q2 at 12 processes on SQLite: "
              f"{'met' if djq_met else 'MISSED'} ({djq[0]}x)")  # fmt: skip
    if report["scale"]:
        print(
            f"claim-next statements and lapse probe are index lookups: {'yes' if indexed else 'NO'}"
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
