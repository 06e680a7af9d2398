"""The merge queue is crash-safe: its job process SIGKILLed (with every git and gate
it started) at random instants leaves the base at a tip whose every commit passes
the gate, at the old tip or the new one of a batch (never between), and the queue
resumes (the next drain); in the end each task landed exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from board.models import Workspace, WorkspaceStatus
from executor import merge_queue
from tests.conftest import ROOT
from tests.fixtures.gitrepos import git
from tests.worktrees.queue_fixtures import GATE, Harness, host_env
from worktrees import queue, service
from worktrees.models import MergeBatch, QueuedLanding

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

# The job process: Django set up, then "ready", then the drain (what a q2 worker runs).
DRAIN = (
    "import sys, django; django.setup(); print('ready', flush=True); "
    "from executor import merge_queue; merge_queue.drain(sys.argv[1])"
)
KILLS = 6
# A drain of four approvals (stacking, the gate, bisecting, landing) on a loaded
# machine takes several seconds; the kills are spread over that.
WINDOW_S = 8.0
SOAK_KILLS = 20
# Every git call a little slower, so a random instant falls inside a git command
# (its lock files held) as often as between two.
SLOW_GIT = '#!/bin/sh\nsleep 0.01\nexec {git} "$@"\n'


@pytest.fixture
def slow_git(tmp_path: Path) -> Path:
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True)
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(SLOW_GIT.format(git=real.stdout.strip()))
    wrapper.chmod(0o755)
    return bin_dir


def start_drain(database_url: str, slow_git: Path, repo: Path) -> subprocess.Popen[str]:
    env = host_env(
        database_url,
        settings.CLAWBOO_STATE_DIR,
        CLAWBOO_MERGE_BATCH="4",
        PATH=f"{slow_git}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return subprocess.Popen(
        [sys.executable, "-c", DRAIN, str(repo)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its gits and gates die with it
    )


def kill_group(pid: int) -> None:
    """SIGKILL the drain and every git and gate of its session (none, if it ended)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def held_in_review() -> list[str]:
    """Tasks whose workspace a landing still holds in review (a batch's, a direct one's)."""
    live = Workspace.objects.exclude(status=WorkspaceStatus.ARCHIVED)
    held = live.filter(landing__state__in=[store.LANDING_QUEUED, store.LANDING_PENDING])
    return list(held.values_list("task_id", flat=True))


def culprit_fix(path: Path) -> None:
    (path / "b.flag").unlink()
    (path / "b.txt").write_text("b, without the flag\n")


@pytest.mark.parametrize(
    "kills", [KILLS, pytest.param(SOAK_KILLS, marks=pytest.mark.slow)], ids=["6", "20"]
)
def test_sigkill_of_the_queue_job_keeps_the_base_green_and_lands_each_task_once(
    queue_harness: Harness, database_url, slow_git, tmp_path, settings, kills
):
    settings.CLAWBOO_MERGE_BATCH = 4
    repo = queue_harness.repo
    # A slower gate, so kills fall inside it too.
    command = GATE.format(pause="0.2", log=queue_harness.log)
    queue_harness.command = command
    from core import repositories

    repositories.update("app", {"verify_cmd": command})
    rng = random.Random(int(os.environ.get("CLAWBOO_CRASH_SEED", "43")))
    start = git(repo, "rev-parse", "main")
    ids: list[str] = []
    green: dict[str, bool] = {}

    def approve_more(count: int) -> None:
        for _ in range(count):
            n = len(ids)
            files = {f"t{n}.txt": f"{n}\n"}
            if n == 2:
                files["a.flag"] = "a\n"
            if n == 5:
                files["b.flag"] = "b\n"  # the culprit: red only stacked on task 2
            ids.append(queue_harness.in_review(f"Task {n}", files))
            assert service.approve(ids[-1], by="reviewer")["result"] == "queued"

    def check_base(round_: int) -> None:
        tip = git(repo, "rev-parse", "main")
        tips = {start} | {
            c for b in MergeBatch.objects.all() for c in (b.base_before, b.target) if c
        }
        assert tip in tips, (round_, "the base is between two batch tips")
        for commit in queue_harness.base_history(start):
            if commit not in green:
                green[commit] = queue_harness.passes_at(commit, tmp_path / "check")
            assert green[commit], (round_, commit)
        landed = queue_harness.landed_ids()
        assert len(landed) == len(set(landed)), round_

    def fix_returned() -> None:
        for entry in QueuedLanding.objects.filter(state="returned"):
            if store.get_task(entry.task_id).status == "in_progress":
                queue_harness.fix_round(entry.task_id, culprit_fix)
                service.approve(entry.task_id, by="reviewer")

    approve_more(8)
    outcomes = {"finished before the kill": 0}
    recovered = 0
    for n in range(kills):
        if not queue.waiting(str(repo), 1) and not queue.open_batches(str(repo)):
            approve_more(4)
        proc = start_drain(database_url, slow_git, repo)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # The instant of the crash, somewhere in the drain's batches; a drain that
        # ends before it is not waited out (the kill then finds it gone, as before).
        kill_at = time.monotonic() + rng.uniform(0.0, WINDOW_S)
        while proc.poll() is None and time.monotonic() < kill_at:
            time.sleep(0.02)
        kill_group(proc.pid)
        proc.communicate(timeout=30)
        if proc.returncode == 0:
            outcomes["finished before the kill"] += 1
        check_base(n)
        if n % 2:
            recovered += merge_queue.recover(str(repo))  # the boot pass; else the next drain
            assert not queue.open_batches(str(repo))
            # Nothing a killed batch held stays held: any task in review may be sent back.
            assert held_in_review() == [], n
            for task_id in ids:
                on_base = task_id in queue_harness.landed_ids()
                assert on_base == (store.get_task(task_id).status == "done"), (n, task_id)
        fix_returned()

    # The queue resumes: drains (no kill) until every task landed.
    for _ in range(4):
        merge_queue.drain(str(repo))
        fix_returned()
    check_base(kills)
    assert all(store.get_task(t).status == "done" for t in ids), [
        (t, store.get_task(t).status) for t in ids
    ]
    assert sorted(queue_harness.landed_ids()) == sorted(ids)  # each exactly once
    assert QueuedLanding.objects.filter(state="landed").count() == len(ids)
    assert held_in_review() == []
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
    assert not list(git_dir.glob("**/*.lock"))
    assert git(repo, "status", "--porcelain") == ""
    states = dict.fromkeys(["abandoned", "landed"], 0)
    for b in MergeBatch.objects.all():
        states[b.state] = states.get(b.state, 0) + 1
    print("outcomes", outcomes, "tasks", len(ids), "batches", states, "recoveries", recovered)
