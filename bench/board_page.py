"""The board page at size: its first paint and its live columns' cards with 100,000
tasks in one team (95,000 of them done), against smaller teams on the same server.

    python bench/board_page.py [--tasks 100000] [--done 95000] [--rounds 5] [--pages 10]
                               [--backends sqlite,postgresql]

Per backend: seeds a throwaway database with bulk SQL — the big team ``default``;
``fresh``, the same live work (5,000 tasks not done) with only 100 done, so the two
differ by their history alone; and ``tiny``, 100 tasks in the big one's proportions
— serves it with daphne, and loads ``/board/?team=…`` in headless Chromium
(Playwright, the Debian Chromium), each round in a fresh browser context (nothing
cached), the teams in a rotating order. It times, from navigation start:

* first contentful paint (the Paint Timing entry);
* the todo and in-progress columns' cards in the page (a MutationObserver);
* every column's total in its header (the counts request answered);
* the first done card.

Then, on one 100k page, it loads ``--pages`` more pages of done cards and reads the
page's JS heap and DOM size (CDP ``Performance.getMetrics`` after a forced GC), to
show the page holds what it was asked to load, not the team's history. It also
prints the plans (EXPLAIN) of the column queries at that size.

Prints a table and writes ``bench/results/board_page.json``. Target: first paint
and the todo/in-progress cards under 1 s at 100k tasks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
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
sys.path[:] = [str(HERE.parent)] + [p for p in sys.path if Path(p or ".").resolve() != HERE]

from bench.benchdb import BenchDB, pg_answers  # noqa: E402
from bench.server import free_port  # noqa: E402

RESULTS = HERE / "results" / "board_page.json"
TARGET_MS = 1000.0
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
USER, PASSWORD = "bench", "bench-pw-123"
TEAMS = ("tiny", "fresh", "default")
TINY = 100
FRESH_DONE = 100
# What is not done, by status: the shape of a team that has been busy for a while.
LIVE_SHARE = {
    "todo": 0.40,
    "backlog": 0.30,
    "in_progress": 0.06,
    "in_review": 0.06,
    "blocked": 0.08,
    "cancelled": 0.10,
}
LABELS = ("[]", "[]", '["ui"]', '["backend"]', '["backend", "bug"]')
SCOPE_DIRS = 10  # the scoped work's directories (src/0/** ...)

# Runs in the page before its own scripts: when each thing of interest appears.
MARKS_JS = """
window.__bench = {};
new MutationObserver((records, observer) => {
  const b = window.__bench, q = (s) => document.querySelector(s);
  if (!b.cards && q('.column[data-status=todo] .card') &&
      q('.column[data-status=in_progress] .card')) b.cards = performance.now();
  const total = q('.column[data-status=done] [data-count]');
  if (!b.counts && total && total.textContent !== '·') b.counts = performance.now();
  if (!b.done && q('.column[data-status=done] .card')) b.done = performance.now();
  if (b.cards && b.counts && b.done) observer.disconnect();
}).observe(document, {childList: true, subtree: true, characterData: true});
"""
METRICS_JS = """() => {
  const paint = (name) => {
    const e = performance.getEntriesByName(name)[0];
    return e ? e.startTime : null;
  };
  const nav = performance.getEntriesByType('navigation')[0];
  const api = performance.getEntriesByType('resource')
    .filter((r) => r.name.includes('/api/board/'))
    .map((r) => ({url: r.name.replace(location.origin, ''), ms: r.duration,
                  bytes: r.transferSize}));
  return {fcp: paint('first-contentful-paint'), first_paint: paint('first-paint'),
          dom_content_loaded: nav ? nav.domContentLoadedEventEnd : null,
          cards: window.__bench.cards, counts: window.__bench.counts,
          first_done_card: window.__bench.done, api};
}"""


# --- seeding -------------------------------------------------------------------------


def statuses(total: int, done: int, rng: random.Random) -> list[str]:
    rest = total - done
    out = ["done"] * (done - max(0, len(LIVE_SHARE) - rest))
    for status, share in LIVE_SHARE.items():
        out += [status] * max(1, round(rest * share))  # every column has a card
    out += ["todo"] * (total - len(out))
    rng.shuffle(out)
    return out


def team_rows(db: BenchDB, team: str, total: int, done: int, seed: int) -> Any:
    rng = random.Random(seed)
    base = dt.datetime.now(dt.UTC) - dt.timedelta(days=60)
    far = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)  # live leases: nothing lapses
    # History spread over two months, one task a few tens of seconds apart.
    step_ms = max(1, int(60 * 86_400_000 / max(total, 1)))
    for i, status in enumerate(statuses(total, done, rng)):
        row = list(
            db.task_row(
                f"{team[:1]}{i:07d}",
                base + dt.timedelta(milliseconds=i * step_ms),
                status=status,
                priority=rng.choice((0, 0, 0, 1, 2, 3)),
                lease_until=far if status == "in_progress" else None,
            )
        )
        row[1] = team
        row[8] = rng.choice(LABELS)
        yield tuple(row)


def seed(db: BenchDB, total: int, done: int) -> float:
    started = time.perf_counter()
    conn = db.connect()
    try:
        now = db.stamp(dt.datetime.now(dt.UTC))
        mark = "?" if db.backend == "sqlite" else "%s"
        for team, name in (("tiny", "Tiny team"), ("fresh", "Fresh team")):
            conn.execute(
                "INSERT INTO teams (id, name, last_event_seq, approval_required, created_at) "
                f"VALUES ({mark}, {mark}, 0, FALSE, {mark})",  # noqa: S608
                (team, name, now),
            )
    finally:
        conn.close()
    big = team_rows(db, "default", total, done, seed=42)
    live = total - done
    fresh = team_rows(db, "fresh", live + FRESH_DONE, FRESH_DONE, seed=3)
    tiny = team_rows(db, "tiny", TINY, round(TINY * done / total), seed=7)
    db.insert_tasks(row for rows in (big, fresh, tiny) for row in rows)
    if db.backend == "postgresql":
        # A table in steady state has been vacuumed (its visibility map set), as
        # autovacuum leaves it; a bulk load has not.
        conn = db.connect()
        try:
            conn.execute("VACUUM (ANALYZE) tasks")
        finally:
            conn.close()
    subprocess.run(
        [sys.executable, str(HERE.parent / "manage.py"), "createsuperuser", "--noinput",
         "--username", USER, "--email", "bench@example.com"],
        env={**db.env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}, check=True, capture_output=True,
    )  # fmt: skip
    return round(time.perf_counter() - started, 1)


def side() -> dict[str, int]:
    """Runs in a subprocess on the seeded database: what the cards and panels say
    beside the columns, in each team's proportions -- scoped work in progress and
    waiting to land with ready tasks held back by it (scope waits), stalled runs,
    and merge queues with tasks waiting to land -- so the columns' answer is timed
    with its side reads holding something. Bulk rows, as the seed's."""
    import django

    django.setup()
    from django.utils import timezone

    from board.models import ExecutionProcess, Task
    from core.models import Repository
    from worktrees.models import EntryState, QueuedLanding

    now = timezone.now()
    made = {"scoped": 0, "stalled": 0, "queue_repositories": 0, "queued": 0}
    for team in TEAMS:

        def ids(status: str, n: int, team: str = team) -> list[str]:
            rows = Task.objects.filter(team_id=team, status=status).order_by("id")
            return list(rows.values_list("id", flat=True)[:n])

        busy, review, ready = ids("in_progress", 40), ids("in_review", 40), ids("todo", 400)
        half = len(review) // 2  # scoped, and waiting in a merge queue
        for k in range(SCOPE_DIRS):
            glob = [f"src/{k}/**"]
            held = [f"src/{k}/a.py"] if k % 2 == 0 else [f"lib/{k}/a.py"]  # half overlap
            Task.objects.filter(pk__in=(busy + review[:half])[k::SCOPE_DIRS]).update(
                touches=glob, scope=glob
            )
            Task.objects.filter(pk__in=ready[k::SCOPE_DIRS]).update(touches=held, scope=held)
        made["scoped"] += len(busy) + len(review[:half]) + len(ready)
        ExecutionProcess.objects.bulk_create(
            ExecutionProcess(task_id=t, agent_id="bench-bot", runtime="command", attempt=1,
                             started_at=now, stalled_at=now)
            for t in busy[:10]
        )  # fmt: skip
        made["stalled"] += len(busy[:10])
        queued = review[half:]
        for n in range(3):
            path = f"/srv/bench/{team}/app{n}"
            Repository.objects.create(id=f"{team}-app{n}", team_id=team, path=path,
                                      landing_mode="queue")  # fmt: skip
            QueuedLanding.objects.bulk_create(
                QueuedLanding(task_id=t, repo_path=path, base_branch="main",
                              state=EntryState.QUEUED, by="bench", approved_at=now, queued_at=now)
                for t in queued[n::3]
            )  # fmt: skip
            made["queue_repositories"] += 1
        made["queued"] += len(queued)
    return made


def explain() -> dict[str, Any]:
    """Runs in a subprocess on the seeded database: the plans of the board's reads,
    and what each costs on the server (median of 5, ms)."""
    import django

    django.setup()
    from django.db.models import Count

    from board import store
    from core.api.pagination import RecentTaskCursorPagination, TaskCursorPagination

    def column(status: str, recent: bool) -> Any:
        pager = RecentTaskCursorPagination if recent else TaskCursorPagination
        qs = store.list_tasks(team="default", status=status, dropped=False)
        return qs.order_by(*pager.ordering)[:26]

    counts = store.list_tasks(team="default", dropped=False).order_by().values_list("status")
    reads = {
        "done_page": column("done", recent=True),
        "todo_page": column("todo", recent=False),
        "counts": counts.annotate(n=Count("pk")),
    }
    timings = {}
    for name, qs in reads.items():
        runs = []
        for _ in range(6):
            started = time.perf_counter()
            list(qs.all())
            runs.append((time.perf_counter() - started) * 1000)
        timings[name] = round(statistics.median(runs[1:]), 2)
    timings["columns_answer"], queries = columns_answer()
    return {
        "plans": {name: qs.explain() for name, qs in reads.items()},
        "server_ms": timings,
        "columns_answer_queries": queries,
    }


def columns_answer() -> tuple[float, int]:
    """The board page's first request, served whole in this process (its view, as the
    URLs route it, for the bench's person): median ms of 5 and its SQL queries."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.urls import resolve
    from rest_framework.test import APIRequestFactory, force_authenticate

    path = "/api/board/columns"
    query = {"team": "default", "limit": "50", "terminal_limit": "25", "counts": "false"}
    view, user = resolve(path).func, get_user_model().objects.get(username=USER)
    runs, queries = [], 0
    for _ in range(6):
        request = APIRequestFactory().get(path, query, HTTP_HOST="127.0.0.1")
        force_authenticate(request, user=user)
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as captured:
            response = view(request)
            response.render()
        runs.append((time.perf_counter() - started) * 1000)
        queries = len(captured)
        assert response.status_code == 200, response.content
    return round(statistics.median(runs[1:]), 2), queries


# --- the server and the browser ------------------------------------------------------


class Daphne:
    def __init__(self, db: BenchDB) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**db.env, "CLAWBOO_HTTP_RATE_LIMIT": "0"}
        env.pop("CLAWBOO_REDIS_URL", None)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
             "clawboo.asgi:application"],
            env=env, cwd=HERE.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.base + "/board/login/", timeout=2).read()  # noqa: S310
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("daphne did not start") from None
                time.sleep(0.1)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def logged_in_state(browser: Any, base: str) -> Any:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base}/board/login/")
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("#login")
    page.wait_for_url(base + "/board/")
    state = context.storage_state()
    context.close()
    return state


def load(browser: Any, base: str, state: Any, team: str) -> tuple[Any, Any, dict[str, Any]]:
    """One cold load of the team's board: a fresh context (no cache), timed."""
    context = browser.new_context(storage_state=state, viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.add_init_script(MARKS_JS)
    page.goto(f"{base}/board/?team={team}")
    page.wait_for_function(
        "window.__bench.cards && window.__bench.counts && window.__bench.done", timeout=60_000
    )
    # Settled (nothing in flight for half a second) before the requests are counted:
    # a read started once the cards are drawn is counted too, not raced.
    page.wait_for_load_state("networkidle")
    return context, page, page.evaluate(METRICS_JS)


def heap(context: Any, page: Any) -> dict[str, float]:
    cdp = context.new_cdp_session(page)
    cdp.send("HeapProfiler.collectGarbage")
    cdp.send("Performance.enable")
    metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    cards = page.evaluate("document.querySelectorAll('.card').length")
    return {
        "js_heap_used_mb": round(metrics["JSHeapUsedSize"] / 2**20, 2),
        "dom_nodes": int(metrics["Nodes"]),
        "cards": cards,
    }


def load_more(page: Any, pages: int) -> None:
    column = page.locator(".column[data-status=done]")
    for _ in range(pages):
        before = column.locator(".card").count()
        column.locator("[data-load-more]").click()
        page.wait_for_function(
            "n => document.querySelectorAll('.column[data-status=done] .card').length > n",
            arg=before,
            timeout=30_000,
        )


def median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def measure(db: BenchDB, rounds: int, pages: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    server = Daphne(db)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            state = logged_in_state(browser, server.base)
            context, _page, _ = load(browser, server.base, state, "default")  # warm the server
            context.close()
            samples: dict[str, list[dict[str, Any]]] = {team: [] for team in TEAMS}
            for i in range(rounds):
                order = TEAMS[i % len(TEAMS) :] + TEAMS[: i % len(TEAMS)]
                for team in order:
                    context, _page, timing = load(browser, server.base, state, team)
                    samples[team].append(timing)
                    context.close()
            memory: dict[str, Any] = {}
            for team in TEAMS:
                context, page, _ = load(browser, server.base, state, team)
                memory[f"{team}_loaded"] = heap(context, page)
                if team == "default":
                    load_more(page, pages)
                    memory[f"default_after_{pages}_more_pages"] = heap(context, page)
                context.close()
            browser.close()
    finally:
        server.stop()
    out: dict[str, Any] = {"memory": memory}
    for team, runs in samples.items():
        summary = {}
        for key in ("fcp", "first_paint", "dom_content_loaded", "cards", "counts"):
            values = [r[key] for r in runs if r[key] is not None]
            summary[key] = {"median_ms": median(values), "max_ms": round(max(values), 1)}
        summary["first_done_card"] = {"median_ms": median([r["first_done_card"] for r in runs])}
        for endpoint in ("columns", "counts"):
            took = [a["ms"] for r in runs for a in r["api"] if f"/api/board/{endpoint}" in a["url"]]
            summary[f"api_{endpoint}_ms"] = {
                "median_ms": median(took),
                "max_ms": round(max(took), 1),
            }
        summary["api_calls"] = len(runs[-1]["api"])
        summary["api_paths"] = sorted(a["url"].split("?")[0] for a in runs[-1]["api"])
        out[team] = summary
    return out


# --- the run -----------------------------------------------------------------------


def in_django(db: BenchDB, step: str) -> Any:
    """One step of this script run in a Django process on the seeded database: its
    JSON answer (its error output, if it failed)."""
    done = subprocess.run(
        [sys.executable, __file__, step], env=db.env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{step} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def run(backend: str, tasks: int, done: int, rounds: int, pages: int) -> dict[str, Any]:
    db = BenchDB(backend)
    try:
        seeded = seed(db, tasks, done)
        beside = in_django(db, "--side")
        reads = in_django(db, "--explain")
        result = measure(db, rounds, pages)
    finally:
        db.drop()
    big, fresh, tiny = result["default"], result["fresh"], result["tiny"]
    result.update(
        {
            "tasks": tasks,
            "done": done,
            "tiny_tasks": TINY,
            "fresh_tasks": tasks - done + FRESH_DONE,
            "seed_seconds": seeded,
            "side": beside,
            "rounds": rounds,
            "explain": reads["plans"],
            "server_ms": reads["server_ms"],
            "columns_answer_queries": reads["columns_answer_queries"],
            "ratio_fcp_vs_fresh": round(big["fcp"]["median_ms"] / fresh["fcp"]["median_ms"], 2),
            "ratio_cards_vs_fresh": round(
                big["cards"]["median_ms"] / fresh["cards"]["median_ms"], 2
            ),
            "ratio_fcp_vs_tiny": round(big["fcp"]["median_ms"] / tiny["fcp"]["median_ms"], 2),
            "ratio_cards_vs_tiny": round(big["cards"]["median_ms"] / tiny["cards"]["median_ms"], 2),
            "target_met": max(big["fcp"]["median_ms"], big["cards"]["median_ms"]) < TARGET_MS,
        }
    )
    return result


def report(backend: str, r: dict[str, Any]) -> None:
    print(
        f"== {backend}: 'default' {r['tasks']:,} tasks ({r['done']:,} done), 'fresh' "
        f"{r['fresh_tasks']:,} (the same live work, {FRESH_DONE} done), 'tiny' "
        f"{r['tiny_tasks']}; seeded in {r['seed_seconds']}s; median of {r['rounds']} cold loads"
    )
    head = f"  {'from navigation start, ms':<34}{'tiny':>9}{'fresh':>9}{'default':>9}"
    print(head + f"{'÷fresh':>8}{'÷tiny':>7}")
    for key, name in (
        ("fcp", "first contentful paint"),
        ("dom_content_loaded", "DOMContentLoaded"),
        ("cards", "todo + in-progress cards shown"),
        ("first_done_card", "first done card shown"),
        ("counts", "every column's total shown"),
        ("api_columns_ms", "GET /api/board/columns took"),
        ("api_counts_ms", "GET /api/board/counts took"),
    ):
        a, f, b = (r[team][key]["median_ms"] for team in TEAMS)
        ratios = f"{b / f if f else 0:>8.2f}{b / a if a else 0:>7.2f}"
        print(f"  {name:<34}{a:>9.1f}{f:>9.1f}{b:>9.1f}{ratios}")
    print("  memory (after a forced GC):")
    for name, m in r["memory"].items():
        print(
            f"    {name:<34} JS heap {m['js_heap_used_mb']:>6.2f} MB   "
            f"{m['dom_nodes']:>6} DOM nodes   {m['cards']:>5} cards"
        )
    print(
        "  server, one read (median ms): "
        + ", ".join(f"{name} {ms}" for name, ms in r["server_ms"].items())
        + f"; the columns' answer: {r['columns_answer_queries']} SQL queries"
    )
    print("  beside the columns: " + ", ".join(f"{k} {v}" for k, v in r["side"].items()))
    for name, plan in r["explain"].items():
        print(f"  EXPLAIN {name}:")
        for line in plan.splitlines():
            print(f"    {line}")
    verdict = "met" if r["target_met"] else "MISSED"
    print(f"  target (first paint and todo/in-progress cards < {TARGET_MS:.0f} ms): {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--done", type=int, default=95_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--explain", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.explain:
        print(json.dumps(explain()))
        return 0
    if args.side:
        print(json.dumps(side()))
        return 0
    if not Path(CHROMIUM).exists():
        print(f"no Chromium at {CHROMIUM}", file=sys.stderr)
        return 1
    backends = [b for b in args.backends.split(",") if b]
    if "postgresql" in backends and not pg_answers():
        print("PostgreSQL does not answer; skipping it", file=sys.stderr)
        backends.remove("postgresql")
    results: dict[str, Any] = {}
    for backend in backends:
        results[backend] = run(backend, args.tasks, args.done, args.rounds, args.pages)
        report(backend, results[backend])
    out = {
        "target_ms": TARGET_MS,
        "machine": {"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2)},
        "results": results,
        "target_met": all(r["target_met"] for r in results.values()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
