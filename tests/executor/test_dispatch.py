"""Idle workers are woken by the board's changes, not by their poll: work that
becomes claimable is claimed at once, from another process, on both databases."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from board import store
from core import registry, wakeups
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.timing
def test_a_commit_wakes_a_waiter_of_this_process_at_once(default_team):
    since = wakeups.seen(wakeups.BOARD)
    woke: list[float] = []

    def waiter() -> None:
        started = time.monotonic()
        if wakeups.wait(wakeups.BOARD, since, 10):
            woke.append(time.monotonic() - started)

    thread = threading.Thread(target=waiter)
    thread.start()
    store.create_task(title="new work")
    thread.join(10)
    assert woke and woke[0] < 1.0


def test_only_writes_that_may_free_work_wake_workers(default_team, monkeypatch):
    woken: list[str] = []
    monkeypatch.setattr(wakeups, "notify", woken.append)
    task = store.create_task(title="t").task
    assert woken == [wakeups.BOARD]
    store.add_comment(task.id, "just a note", "ada")
    store.claim(task.id, "ada")
    assert woken == [wakeups.BOARD]  # a comment and a claim free no work


def _idle_worker(database_url: str, state_dir: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": state_dir,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    # A poll far longer than the test: only a wake can make it claim in time.
    return subprocess.Popen(
        [sys.executable, "manage.py", "work", "--agent", "quick", "--poll-ms", "60000"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


@pytest.mark.timing
def test_an_idle_worker_in_another_process_claims_new_work_at_once(
    default_team, database_url, tmp_path
):
    registry.create_agent(
        id="quick", display_name="Quick", team="default", runtime="command",
        settings={"argv": ["true"]},
    )  # fmt: skip
    worker = _idle_worker(database_url, str(tmp_path / "state"))
    try:
        assert worker.stdout is not None
        assert "work: quick" in worker.stdout.readline()
        # Not a wait for a condition: the worker finds nothing and goes idle (for
        # 60 s), so only a wake can explain a claim within the second that follows.
        time.sleep(1.0)
        latencies = []
        for n in range(3):
            task = store.create_task(title=f"hop {n}", file_mutating=False).task
            created = time.monotonic()
            while store.get_task(task.id).status == "todo":
                assert time.monotonic() - created < 5, "the idle worker was not woken"
                time.sleep(0.005)
            latencies.append(time.monotonic() - created)
            while store.get_task(task.id).status == "in_progress":
                time.sleep(0.01)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=20)
    assert max(latencies) < 1.0, latencies
