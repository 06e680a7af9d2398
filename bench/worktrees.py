"""Benchmark: Clawboo provision/complete vs bare ``git worktree add``/``remove``.

    python bench/worktrees.py [--files 5000] [--rounds 7]

Generates a repository of N files in a temp dir, then alternates, round by
round, a bare ``git worktree add -b`` / ``git worktree remove`` + ``branch -D``
with Clawboo's provision (validate, resolve, orphan check, add, verify both,
scaffold commit) and complete (work diff against the baseline, remove, delete
branch) of the same repo. Prints medians and writes ``bench/results/worktrees.json``.
Target: provision <= 1.5x bare git.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TARGET_RATIO = 1.5


def sh(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=300)


def make_repo(path: Path, files: int) -> None:
    path.mkdir(parents=True)
    sh(path, "init", "-q", "-b", "main")
    for i in range(files):
        d = path / f"pkg{i % 50:02d}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i:05d}.py").write_text(f"VALUE_{i} = {i}\n" * 20)
    sh(path, "add", "-A")
    sh(path, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "seed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "worktrees.json")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="clawboo-bench-") as tmp:
        base = Path(tmp).resolve()
        state = base / "state"
        import django
        from django.conf import settings

        settings.configure(
            CLAWBOO_STATE_DIR=state, CLAWBOO_REPO_ROOTS=[base / "repos"], INSTALLED_APPS=[]
        )
        django.setup()
        from worktrees import checkouts
        from worktrees.scaffold import TaskBrief

        repo = base / "repos" / "big"
        started = time.perf_counter()
        make_repo(repo, args.files)
        print(f"generated {args.files} files in {time.perf_counter() - started:.1f}s")
        bare_dir = base / "bare"
        bare_dir.mkdir()

        timings: dict[str, list[float]] = {
            k: [] for k in ("bare_add", "bare_remove", "provision", "complete")
        }
        for i in range(args.rounds):
            path = bare_dir / f"wt{i}"
            t0 = time.perf_counter()
            sh(repo, "worktree", "add", "-q", "-b", f"bare-{i}", str(path), "HEAD")
            t1 = time.perf_counter()
            sh(repo, "worktree", "remove", "--force", str(path))
            sh(repo, "branch", "-D", f"bare-{i}")
            t2 = time.perf_counter()
            timings["bare_add"].append(t1 - t0)
            timings["bare_remove"].append(t2 - t1)

            task_id = f"bench-{i}"
            t0 = time.perf_counter()
            real_repo = checkouts.resolve_repo(str(repo))
            sha = checkouts.resolve_commit(real_repo, "HEAD", "base_ref")
            co = checkouts.provision_worktree(real_repo, TaskBrief(task_id=task_id), sha)
            t1 = time.perf_counter()
            diff = checkouts.work_diff(co.path, co.base_commit)
            assert diff.empty
            checkouts.remove_worktree_and_branch(real_repo, task_id)
            t2 = time.perf_counter()
            timings["provision"].append(t1 - t0)
            timings["complete"].append(t2 - t1)

    med = {k: statistics.median(v) * 1000 for k, v in timings.items()}
    ratios = {
        "provision_vs_bare_add": med["provision"] / med["bare_add"],
        "complete_vs_bare_remove": med["complete"] / med["bare_remove"],
    }
    rows = [
        (
            "provision (clawboo)",
            med["provision"],
            "bare git worktree add -b",
            med["bare_add"],
            ratios["provision_vs_bare_add"],
        ),
        (
            "complete (clawboo)",
            med["complete"],
            "bare worktree remove + branch -D",
            med["bare_remove"],
            ratios["complete_vs_bare_remove"],
        ),
    ]
    print(f"\n{args.files} files, {args.rounds} rounds, medians\n")
    print(f"{'operation':<22}{'ms':>9}   {'baseline':<34}{'ms':>9}{'ratio':>8}")
    for name, ours, bname, theirs, ratio in rows:
        print(f"{name:<22}{ours:>9.1f}   {bname:<34}{theirs:>9.1f}{ratio:>7.2f}x")
    ok = ratios["provision_vs_bare_add"] <= TARGET_RATIO
    print(f"\ntarget provision <= {TARGET_RATIO}x bare: {'met' if ok else 'NOT met'}")

    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout
    result = {
        "files": args.files,
        "rounds": args.rounds,
        "median_ms": {k: round(v, 2) for k, v in med.items()},
        "all_ms": {k: [round(x * 1000, 2) for x in v] for k, v in timings.items()},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
        "target_provision_ratio": TARGET_RATIO,
        "target_met": ok,
        "git": git_version.strip(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
