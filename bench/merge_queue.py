"""Many agents, one repository: the merge queue beside direct landing, in one run.

    python bench/merge_queue.py [--agents 8] [--tasks 40] [--hot 0.3] [--clash 0.1]

Each mode gets a fresh repository and board (SQLite), registered with
``landing_mode`` ``direct`` (today's path: each approval lands alone) or ``queue``.
Round by round, every agent takes its next task from the same base (a real git
worktree), writes a file of its own, and with probability ``--hot`` also adds a
setting to one of three shared hot files; with probability ``--clash`` such a
setting reuses a name another agent picked this round (green alone, red together:
the gate fails on a name defined twice). Each task goes to review; this process
plays the person, who approves each task once, and the agents, who rework what
comes back (merge the base, keep both sides of a conflict, rename a clashing
setting). In ``direct`` a conflict comes back to the person's approve and needs
their approval again after the rework: a conflict that **reaches a person**. In
``queue`` this process also plays the q2 worker (a drain after each round's
approvals); what comes back after its round re-enters the queue on the person's
approval of what the round handed back (a conflict reaching a person too, but one the
agent resolved, the base never red meanwhile).

Prints one row per mode and writes ``bench/results/merge_queue.json``: tasks landed,
conflicts met, conflicts that reached a person, person actions, gate runs of the
landing path, base commits whose gate is red (checked at every commit the base
reached), landings per minute (landed tasks over the wall time of the landing
path: approvals, drains and the agents' reworks), and the queue's ratios against
direct.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "merge_queue.json"
HOT_FILES = ("hot/settings0.txt", "hot/settings1.txt", "hot/settings2.txt")

# The repository's gate: a setting defined twice across the hot files is red.
CHECK = """import pathlib, sys
seen = {}
for path in sorted(pathlib.Path("hot").glob("*.txt")):
    for line in path.read_text().splitlines():
        name = line.split("=")[0].strip()
        if name and name in seen:
            sys.exit(f"{name} defined twice: {seen[name]} and {path}")
        seen[name] = str(path)
"""


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", *args],
        cwd=cwd, capture_output=True, text=True, check=check, timeout=120,
    )  # fmt: skip


def defined_twice(texts: list[str]) -> bool:
    seen: set[str] = set()
    for text in texts:
        for line in text.splitlines():
            name = line.split("=")[0].strip()
            if name and name in seen:
                return True
            seen.add(name)
    return False


def setup_django(base: Path) -> None:
    os.environ["CLAWBOO_STATE_DIR"] = str(base / "state")
    os.environ["DJANGO_SETTINGS_MODULE"] = "clawboo.settings"
    os.environ["DATABASE_URL"] = f"sqlite:///{base / 'bench.sqlite3'}"
    os.environ["CLAWBOO_REPO_ROOTS"] = str(base)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


class Mode:
    """One landing mode's run: its repository, its agents, what happened."""

    def __init__(self, base: Path, mode: str, agents: int) -> None:
        from core import registry, repositories
        from worktrees import queue

        self.mode = mode
        self.repo = base / f"repo-{mode}"
        self.repo.mkdir()
        git(self.repo, "init", "-q", "-b", "main")
        (self.repo / "hot").mkdir()
        for name in HOT_FILES:
            (self.repo / name).write_text("")
        (self.repo / "check.py").write_text(CHECK)
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-qm", "seed")
        self.start = git(self.repo, "rev-parse", "main").stdout.strip()
        repositories.register(
            team="default", path=str(self.repo), id=f"app-{mode}",
            landing_mode=mode, verify_cmd=f"{sys.executable} check.py",
        )  # fmt: skip
        self.agents = [f"{mode}-agent{i}" for i in range(agents)]
        for agent in self.agents:
            registry.create_agent(
                id=agent, display_name=agent, team="default", runtime="command",
                settings={"argv": ["true"]},
            )  # fmt: skip
        # This process is the q2 worker: the queue drains when the bench says.
        queue.kick = lambda repo_path: None  # type: ignore[assignment]
        self.landing_s = 0.0
        self.stats = {
            "tasks": 0, "landed": 0, "conflicts": 0, "conflicts_reaching_a_person": 0,
            "gate_failures_returned": 0, "person_actions": 0, "reworks": 0,
        }  # fmt: skip
        self.lines: dict[str, list[tuple[str, str]]] = {}  # task -> [(hot file, line)]

    # --- the agents ---------------------------------------------------------------------

    def work(self, agent: str, n: int, hot: list[tuple[str, str]]) -> str:
        from board import store
        from worktrees import service

        task = store.create_task(title=f"{agent} task {n}").task
        assert store.claim(task.id, agent).outcome == "ok"
        ws = service.provision_task_workspace(task.id, str(self.repo))
        path = Path(ws.worktree_path)
        (path / "own").mkdir(exist_ok=True)
        (path / "own" / f"{agent}-{n}.txt").write_text(f"{agent} {n}\n")
        for name, line in hot:
            with (path / name).open("a") as handle:
                handle.write(line + "\n")
        self.lines[task.id] = hot
        service.complete(task.id, checkpoint=True)
        self.stats["tasks"] += 1
        return task.id

    def rework(self, task_id: str) -> None:
        """Bring the branch up to date keeping both sides, and rename a clashing
        setting when the gate said so; then hand it to review again."""
        from board import store
        from worktrees import service

        task = store.get_task(task_id)
        path = Path(store.get_workspace(task_id).worktree_path)
        git(path, "add", "-A")
        git(path, "commit", "-qm", "wip", check=False)
        merged = git(path, "merge", "-q", "--no-edit", "main", check=False)
        if merged.returncode != 0:
            for name, line in self.lines[task_id]:
                base_text = git(self.repo, "show", f"main:{name}").stdout
                if line not in base_text.splitlines():
                    base_text += line + "\n"
                (path / name).write_text(base_text)
            git(path, "add", "-A")
            git(path, "commit", "-qm", "merge main, both sides kept")
        if "gate failed" in (task.feedback or ""):
            self.stats["gate_failures_returned"] += 1
            renamed = []
            for name, line in self.lines[task_id]:
                key, _, value = line.partition(" = ")
                fresh = f"{key}_{task_id[:6]} = {value}"
                text = (path / name).read_text().replace(line + "\n", fresh + "\n")
                (path / name).write_text(text)
                renamed.append((name, fresh))
            self.lines[task_id] = renamed
        self.stats["reworks"] += 1
        service.complete(task_id, checkpoint=True)

    # --- the landing path -------------------------------------------------------------------

    def land(self, task_ids: list[str]) -> None:
        from board import store
        from executor import merge_queue
        from worktrees import service

        started = time.perf_counter()
        for task_id in task_ids:
            self.stats["person_actions"] += 1
            result = service.approve(task_id, by="person")
            while result["result"] == "conflict":  # direct: back to the agent, then to me
                self.stats["conflicts"] += 1
                self.stats["conflicts_reaching_a_person"] += 1
                self.rework(task_id)
                self.stats["person_actions"] += 1
                result = service.approve(task_id, by="person")
        if self.mode == "queue":
            for _ in range(20):
                report = merge_queue.drain(str(self.repo))
                back = report["returned"]
                # Blocked: its rounds spent, a person must decide (none expected).
                self.stats["conflicts_reaching_a_person"] += len(report["blocked"])
                for task_id in back:
                    conflict = "conflict" in (store.get_task(task_id).feedback or "")
                    self.stats["conflicts"] += conflict
                    self.rework(task_id)
                    # What a round hands back is not the work the person approved: it
                    # goes back in line on their approval (GOVERNANCE §6).
                    self.stats["person_actions"] += 1
                    self.stats["conflicts_reaching_a_person"] += conflict
                    service.approve(task_id, by="person")
                if not back and not report["blocked"]:
                    break
        self.landing_s += time.perf_counter() - started

    def finish(self) -> dict[str, Any]:
        from board.models import Task
        from worktrees.models import MergeBatch

        history = git(self.repo, "rev-list", "--first-parent", f"{self.start}..main").stdout
        red = 0
        for commit in history.split():
            texts = [git(self.repo, "show", f"{commit}:{name}").stdout for name in HOT_FILES]
            red += defined_twice(texts)
        landed = Task.objects.filter(status="done", title__startswith=f"{self.mode}-agent").count()
        gate_runs = sum(MergeBatch.objects.filter(repo_path=str(self.repo)).values_list(
            "gate_runs", flat=True))  # fmt: skip
        return {
            "mode": self.mode,
            **self.stats,
            "landed": landed,
            "gate_runs": gate_runs,
            "base_commits": len(history.split()),
            "red_base_commits": red,
            "landing_seconds": round(self.landing_s, 2),
            "landings_per_minute": round(60 * landed / self.landing_s, 1)
            if self.landing_s
            else 0.0,
        }


def run_mode(base: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)  # the same work in both modes
    run = Mode(base, mode, args.agents)
    for n in range(args.tasks):
        picked: list[str] = []
        round_ids = []
        for agent in run.agents:
            hot: list[tuple[str, str]] = []
            if rng.random() < args.hot:
                name = rng.choice(HOT_FILES)
                clash = picked and rng.random() < args.clash
                key = rng.choice(picked) if clash else f"{agent.split('-')[-1]}_{n}"
                picked.append(key)
                hot.append((name, f"{key} = {n}"))
            round_ids.append(run.work(agent, n, hot))
        run.land(round_ids)
    return run.finish()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=40, help="tasks per agent")
    parser.add_argument("--hot", type=float, default=0.3, help="share of tasks on hot files")
    parser.add_argument("--clash", type=float, default=0.1, help="hot tasks that clash")
    parser.add_argument("--batch", type=int, default=8, help="CLAWBOO_MERGE_BATCH")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    os.environ["CLAWBOO_MERGE_BATCH"] = str(args.batch)

    with tempfile.TemporaryDirectory(prefix="clawboo-bench-mq-") as tmp:
        base = Path(tmp).resolve()
        setup_django(base)
        rows = [run_mode(base, mode, args) for mode in ("direct", "queue")]
    direct, queued = rows
    ratios = {
        "landings_per_minute": round(
            queued["landings_per_minute"] / max(direct["landings_per_minute"], 0.001), 2
        ),
        "conflicts_reaching_a_person": [
            queued["conflicts_reaching_a_person"],
            direct["conflicts_reaching_a_person"],
        ],
        "red_base_commits": [queued["red_base_commits"], direct["red_base_commits"]],
    }
    columns = (
        "mode", "tasks", "landed", "conflicts", "conflicts_reaching_a_person",
        "person_actions", "gate_runs", "red_base_commits", "landings_per_minute",
    )  # fmt: skip
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))
    print(f"queue / direct landings per minute: {ratios['landings_per_minute']}x")
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows, "ratios": ratios}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
