"""Real OS processes over the test database: two tickers racing, and SIGKILL mid-fire."""

from __future__ import annotations

import datetime as dt
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from board.models import Task
from core import registry
from routines import store
from routines.models import Routine, RoutineFire
from routines.ticker import Ticker
from tests.fixtures.routines import START

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("ticker_proc.py")
pytestmark = pytest.mark.django_db(transaction=True)


def spawn(database_url: str, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "CLAWBOO_LOG_LEVEL": "WARNING",
        "CLAWBOO_DB_WRITE_BUDGET_MS": "10000",
        "PYTHONPATH": str(ROOT),
    }
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def read_marker(proc: subprocess.Popen[str], marker: str, timeout_s: float = 60) -> str:
    """Poll the child's stdout for a line starting with ``marker`` (with a deadline)."""
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if line.startswith(marker):
                return line
            if not line and proc.poll() is not None:
                break
    proc.kill()
    raise AssertionError(f"no {marker!r} from child: {proc.stderr.read() if proc.stderr else ''}")


def kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


@pytest.fixture
def agent(database_url, clock):
    registry.ensure_team("ops", "Ops")
    # 200 fires each claim a task for Ada: no limit in the way.
    return registry.create_agent(
        id="ada", display_name="Ada", team="ops", runtime="command", max_concurrent=1000
    )


def test_two_ticker_processes_fire_each_slot_exactly_once(agent, database_url, tmp_path):
    routines = [
        store.create_routine(agent_id="ada", team="ops", cron_spec=f"{i % 60} * * * *")
        for i in range(200)
    ]
    expected = {r.id: r.next_run_at for r in routines}
    start = str(START.timestamp())
    procs = [spawn(database_url, tmp_path, "race", start, "60") for _ in range(2)]
    won = [int(read_marker(p, "WON", timeout_s=240).split()[1]) for p in procs]
    for proc in procs:
        proc.wait(timeout=30)
    assert sum(won) == 200
    fires = list(RoutineFire.objects.values_list("routine_id", "slot_at", "outcome"))
    assert len(fires) == 200  # none missed, none twice (the unique constraint holds)
    assert {rid: slot for rid, slot, _ in fires} == expected
    # Each fire claimed its task and ran it, or -- once the breaker paused Ada, whose
    # stand-in runs fail -- left it on the board for when she is resumed.
    assert {outcome for *_, outcome in fires} <= {"dispatched", "satisfied"}
    assert Task.objects.filter(scheduled_by="clawboo").count() == 200
    assert set(Routine.objects.values_list("status", flat=True)) == {"idle"}


def test_sigkill_between_claim_and_dispatch_requeues_and_fires_once(
    agent, database_url, tmp_path, clock
):
    routine = store.create_routine(agent_id="ada", team="ops", cron_spec="0 * * * *")
    clock.shift(dt.timedelta(hours=1))
    proc = spawn(database_url, tmp_path, "hold-after-claim", str(time.time()))
    read_marker(proc, "CLAIMED")
    kill(proc)
    assert Routine.objects.get(pk=routine.id).status == "claimed"
    ticker = Ticker()
    assert ticker.boot_resume().requeued == [routine.id]
    assert ticker.tick().claimed == [routine.id]
    assert RoutineFire.objects.filter(routine_id=routine.id).count() == 1
    assert Task.objects.filter(scheduled_by="clawboo").count() == 1
    assert Routine.objects.get(pk=routine.id).status == "idle"


@pytest.mark.parametrize("spec", ["0 * * * *", "once@2030-01-07T09:00Z"])
def test_sigkill_between_dispatch_and_record_heals_on_boot(
    agent, database_url, tmp_path, clock, spec
):
    routine = store.create_routine(agent_id="ada", team="ops", cron_spec=spec)
    clock.shift(dt.timedelta(hours=1))
    proc = spawn(database_url, tmp_path, "hold-after-dispatch", str(time.time()))
    read_marker(proc, "DISPATCHED")
    kill(proc)
    assert Routine.objects.get(pk=routine.id).status == "running"
    report = Ticker().boot_resume()
    row = Routine.objects.get(pk=routine.id)
    if routine.is_one_shot:
        assert report.errored == [routine.id]
        assert (row.status, row.next_run_at) == ("error", None)
        assert row.last_error == "orphaned mid-dispatch (restart)"
    else:
        assert report.rearmed == [routine.id]
        assert (row.status, row.next_run_at) == ("idle", store.now_ms() + 3_600_000)
    clock.shift(dt.timedelta(minutes=30))
    assert Ticker().tick().claimed == []  # never re-fired
    assert RoutineFire.objects.filter(routine_id=routine.id).count() == 1
    assert Task.objects.filter(scheduled_by="clawboo").count() == 1
