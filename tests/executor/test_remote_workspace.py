"""A remote worker's checkout (``executor.rest.workspace``) where its cache directory
is given as a relative path, as ``--cache-dir worker-cache`` gives it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from executor import rest


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def test_a_relative_cache_dir_gives_a_checkout_the_run_can_start_in(tmp_path, monkeypatch):
    # git made the worktree under the clone (repos/<hash>/worker-cache/worktrees/ID) and
    # the run started in ./worker-cache/worktrees/ID, which was not there: every run
    # failed, each retry found the branch "already checked out", the breaker paused it.
    origin = tmp_path / "origin"
    origin.mkdir()
    git("init", "-q", "-b", "main", cwd=origin)
    (origin / "calc.py").write_text("")
    git("add", "calc.py", cwd=origin)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one", cwd=origin)
    monkeypatch.chdir(tmp_path)
    repo = {"id": "shop", "remote": str(origin), "base_branch": "main"}
    checkout = rest.workspace(Path("worker-cache"), {"id": "t1"}, repo)
    assert (checkout.cwd / "calc.py").is_file()
    assert checkout.cwd == (tmp_path / "worker-cache" / "worktrees" / "t1").resolve()
    # Its next attempt (a task sent back) checks it out again in the same place.
    again = rest.workspace(Path("worker-cache"), {"id": "t1"}, repo)
    assert (again.cwd / "calc.py").is_file()
