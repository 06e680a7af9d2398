"""The breaker's and the preflight's knobs, set in a real worker's environment, are
the ones it obeys (they used to be read with getattr defaults and ignored)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from board.models import ExecutionProcess
from core import registry
from core.models import Agent

ROOT = Path(__file__).resolve().parents[2]


def work(database_url: str, state_dir: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "work", *args],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "CLAWBOO_STATE_DIR": str(state_dir),
            "CLAWBOO_HEARTBEAT_MS": "1000",
            "PYTHONPATH": str(ROOT),
            **env,
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_until(check, seconds: float, what: str) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > seconds:
            raise AssertionError(f"not within {seconds}s: {what}")
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.mark.django_db(transaction=True)
def test_clawboo_breaker_failures_7_pauses_the_agent_after_7_failed_runs(database_url, state_dir):
    registry.create_agent(
        id="flaky",
        display_name="Flaky",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    )
    for n in range(10):
        store.create_task(title=f"job {n}", file_mutating=False)
    worker = work(
        database_url, state_dir, "--agent", "flaky", "--once", CLAWBOO_BREAKER_FAILURES="7"
    )
    _, err = worker.communicate(timeout=180)
    assert worker.returncode == 0, err[-2000:]
    agent = Agent.objects.get(pk="flaky")
    assert agent.state == "paused" and agent.paused_by == "breaker"
    assert ExecutionProcess.objects.filter(agent_id="flaky", status="failed").count() == 7
    assert ExecutionProcess.objects.count() == 7


@pytest.mark.timing
@pytest.mark.django_db(transaction=True)
def test_clawboo_health_probe_ms_1000_re_probes_within_a_second(database_url, state_dir, tmp_path):
    tool = tmp_path / "tool"  # missing at first: the preflight fails
    registry.create_agent(
        id="tooled",
        display_name="Tooled",
        team="default",
        runtime="command",
        settings={"argv": [str(tool)]},
    )
    task = store.create_task(title="needs the tool", file_mutating=False).task
    # The safety-net poll is long: only the probe interval can bring it back soon.
    worker = work(
        database_url,
        state_dir,
        "--agent",
        "tooled",
        "--poll-ms",
        "60000",
        CLAWBOO_HEALTH_PROBE_MS="1000",
    )
    try:
        unhealthy = lambda: Agent.objects.filter(pk="tooled", health_ok=False).exists()  # noqa: E731
        wait_until(unhealthy, 60, "the first preflight failed")
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
        taken = lambda: store.get_task(task.id).status != "todo"  # noqa: E731
        elapsed = wait_until(taken, 10, "the agent re-probed and took the task")
        print(f"re-probed and claimed {elapsed:.2f}s after the tool appeared")
        # ~1 s (the interval) plus a claim; the default (30 s) or the poll (60 s)
        # would be far past this.
        assert elapsed < 4.0
        assert Agent.objects.get(pk="tooled").health_ok is True
    finally:
        worker.kill()
        worker.wait(10)


@pytest.mark.django_db
@pytest.mark.timeout(60)
def test_an_agents_timeout_s_edited_while_its_worker_runs_bounds_the_next_run():
    # A worker is long-lived; its agent's settings are read afresh at every claim,
    # and timeout_s with them (it used to be fixed when the worker started).
    from executor.runner import Executor

    registry.create_agent(
        id="hangs",
        display_name="Hangs",
        team="default",
        runtime="command",
        settings={"argv": ["sleep", "300"]},
    )
    executor = Executor("hangs")
    registry.update_agent("hangs", {"settings": {"argv": ["sleep", "300"], "timeout_s": 1}})
    store.create_task(title="never ends", file_mutating=False)
    started = time.monotonic()
    report = executor.work_once()
    assert report.outcome == "timed_out", report.error
    assert time.monotonic() - started < 30
