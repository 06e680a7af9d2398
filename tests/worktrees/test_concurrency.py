from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from board import store
from tests.fixtures.gitrepos import git
from worktrees import checkouts
from worktrees.locks import path_lock

ROOT = Path(__file__).resolve().parents[2]


def test_the_path_lock_serializes_threads_and_is_reentrant(tmp_path, settings):
    settings.CLAWBOO_STATE_DIR = tmp_path
    entered = threading.Event()
    order: list[str] = []

    with path_lock(tmp_path / "wt"):
        with path_lock(tmp_path / "wt"):  # re-entrant in one thread
            order.append("main")

        def other() -> None:
            with path_lock(tmp_path / "wt"):
                order.append("other")
                entered.set()

        thread = threading.Thread(target=other)
        thread.start()
        assert not entered.wait(0.2)  # blocked while we hold it
        order.append("main-release")
    assert entered.wait(10)
    thread.join(10)
    assert order == ["main", "main-release", "other"]


def test_the_path_lock_excludes_another_process(tmp_path, settings):
    settings.CLAWBOO_STATE_DIR = tmp_path
    from worktrees.locks import lock_file_for

    script = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "    print('got')\n"
        "except BlockingIOError:\n"
        "    print('busy')\n"
    )
    target = tmp_path / "wt"
    with path_lock(target):
        held = subprocess.run(
            [sys.executable, "-c", script, str(lock_file_for(os.path.abspath(target)))],
            capture_output=True,
            text=True,
            timeout=30,
        )
    free = subprocess.run(
        [sys.executable, "-c", script, str(lock_file_for(os.path.abspath(target)))],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert held.stdout.strip() == "busy"
    assert free.stdout.strip() == "got"


@pytest.mark.django_db(transaction=True)
def test_two_processes_provisioning_one_task_get_one_worktree(
    database_url, repo, state_dir, repos_root, tmp_path
):
    task = store.create_task(title="race").task
    go = tmp_path / "go"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state_dir),
        "CLAWBOO_REPO_ROOTS": str(repos_root),
        "PYTHONPATH": str(ROOT),
    }
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests/worktrees/provision_worker.py"),
                task.id,
                str(repo),
                str(go),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for _ in range(2)
    ]
    try:
        for proc in workers:
            assert proc.stdout.readline().strip() == "ready"
        go.touch()
        results = []
        for proc in workers:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()

    assert all(r["outcome"] in ("ok", "refused") for r in results), results
    oks = [r for r in results if r["outcome"] == "ok"]
    assert oks
    assert len({r["id"] for r in oks}) == 1
    path = checkouts.worktree_path_for(repo, task.id)
    listed = git(repo, "worktree", "list", "--porcelain")
    assert listed.count(f"worktree {path}\n") == 1
    assert git(repo, "worktree", "prune", "--dry-run", "-v") == ""
    assert git(path, "rev-parse", "--abbrev-ref", "HEAD") == f"clawboo/task-{task.id}"
    scaffolds = git(repo, "log", "--format=%s", f"clawboo/task-{task.id}").count("scaffold")
    assert scaffolds == 1
    ws = store.live_workspace(task.id)
    assert ws.worktree_path == str(path)
