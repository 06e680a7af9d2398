"""End to end: trivial tasks through the whole executor pipeline with real workers.

    python bench/e2e.py [--tasks 200] [--workers 4]

Each task is file-mutating, so every run provisions a git worktree (with its
scaffold commit), runs the ``command`` runtime (a command that writes one file of
the task's own: :mod:`bench.pipeline`), runs the verify command, checkpoints and
parks the work in review; this process plays the person who approves each review,
landing the change on ``main`` (``done``). N worker processes drain the board on
one SQLite file. A worker refused (its agent paused by the breaker, say) or a run
that stops moving fails the bench with the reason. Prints tasks/minute (the last
task landed) and where the workers' time went (git, the runtime, the board,
verification), and writes ``bench/results/e2e.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "e2e.json"


def setup_env(base: Path) -> None:
    # The repository lives beside the state dir: worktrees refuse a repo inside it.
    os.environ["CLAWBOO_STATE_DIR"] = str(base / "state")
    os.environ["DJANGO_SETTINGS_MODULE"] = "clawboo.settings"
    os.environ.pop("DATABASE_URL", None)
    os.environ["CLAWBOO_REPO_ROOTS"] = str(base / "repos")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def worker(agent: str) -> None:
    from executor.runner import Executor

    executor = Executor(agent)
    done = failed = 0
    timings: dict[str, float] = {}
    while True:
        report = executor.work_once()
        if report.outcome == "idle":
            break
        if report.outcome == "refused":
            raise SystemExit(f"{agent}: refused: {report.error}")
        done += report.outcome == "succeeded"
        failed += report.outcome != "succeeded"
        for name, spent in report.timings.items():
            timings[name] = timings.get(name, 0.0) + spent
    print(json.dumps({"agent": agent, "done": done, "failed": failed, "timings": timings}))


def make_repo(path: Path) -> None:
    path.mkdir(parents=True)
    run = {"cwd": path, "check": True, "capture_output": True, "timeout": 60}
    subprocess.run(["git", "init", "-q", "-b", "main"], **run)  # type: ignore[call-overload]
    for i in range(20):
        (path / f"file{i}.txt").write_text(f"line {i}\n")
    subprocess.run(["git", "add", "-A"], **run)  # type: ignore[call-overload]
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@localhost",  # type: ignore[call-overload]
            "commit",
            "-q",
            "-m",
            "initial",
        ],
        **run,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        setup_env(Path(args.state))
        worker(args.worker)
        return 0

    state = Path(tempfile.mkdtemp(prefix="clawboo-e2e-"))
    procs: list[subprocess.Popen[str]] = []
    try:
        repo = state / "repos" / "app"
        make_repo(repo)
        setup_env(state)
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        from bench import pipeline
        from board import store
        from core import registry

        agents = [f"bench-{i}" for i in range(args.workers)]
        for agent in agents:
            registry.create_agent(
                id=agent,
                display_name=agent,
                team="default",
                runtime="command",
                settings=pipeline.agent_settings(repo),
            )
        for i in range(args.tasks):
            store.create_task(title=f"trivial {i}")
        started = time.monotonic()
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", agent, "--state", str(state)],
                stdout=subprocess.PIPE,
                text=True,
                cwd=ROOT,
            )
            for agent in agents
        ]
        # The reviewer: approve what waits in review until the board is done.
        deadline = time.monotonic() + 3600
        progress = (time.monotonic(), -1)
        while store.list_tasks().exclude(status="done").exists():
            landed = pipeline.approve_reviews()
            why = pipeline.stall(agents)
            if why is not None:
                raise SystemExit(f"the run stalled: {why}")
            board = store.list_tasks()
            moved = board.exclude(status="todo").count() + board.filter(status="done").count()
            if moved != progress[1]:
                progress = (time.monotonic(), moved)
            elif time.monotonic() - progress[0] > 120 or time.monotonic() > deadline:
                raise SystemExit(f"the run stalled: nothing moved for 120 s ({moved} started)")
            if not landed:
                time.sleep(0.05)
        wall = time.monotonic() - started
        results = [
            json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in procs
        ]
        done = sum(r["done"] for r in results)
        failed = sum(r["failed"] for r in results)
        totals: dict[str, float] = {}
        for result in results:
            for name, spent in result["timings"].items():
                totals[name] = totals.get(name, 0.0) + spent
        busy = sum(totals.values()) or 1.0
        shares = {name: round(100 * spent / busy, 1) for name, spent in sorted(totals.items())}
        left = store.list_tasks().exclude(status="done").count()
        summary: dict[str, Any] = {
            "tasks": args.tasks,
            "workers": args.workers,
            "done": done,
            "failed": failed,
            "not_done_on_board": left,
            "wall_s": round(wall, 2),
            "tasks_per_minute": round(done / wall * 60, 1),
            "time_share_pct": shares,
        }
        print(
            f"{done} tasks done ({failed} failed, {left} not done) by {args.workers} workers "
            f"in {wall:.1f}s: {summary['tasks_per_minute']} tasks/minute"
        )
        print("share of worker time: " + ", ".join(f"{k} {v}%" for k, v in shares.items()))
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2))
        print(f"wrote {RESULTS.relative_to(ROOT)}")
        return 0 if left == 0 and failed == 0 else 1
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
