"""Approve-and-land is crash-safe: a real approving process SIGKILLed (with every
git it started) at random instants leaves the repository and the task agreeing
once a landing is recovered (the boot pass, or the next approve), and a later
approve lands — no stale ``index.lock`` answering 409."""

from __future__ import annotations

import json
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
from core.models import Event
from executor.runner import Executor
from tests.conftest import ROOT, read_json_line
from tests.fixtures.gitrepos import git
from worktrees import landing, service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

# Eight rounds cover each recovery (boot pass, next approve) with main checked out and
# detached, twice; `-m slow` runs the twenty-round soak.
KILLS = 8
SOAK_KILLS = 20
WRITE = (
    "import pathlib, os; pathlib.Path(os.environ['CLAWBOO_TASK_ID'] + '.txt').write_text('x\\n')"
)
# Every git call a little slower, so a random instant falls inside a git command
# (its lock files held) as often as between two.
SLOW_GIT = '#!/bin/sh\nsleep 0.03\nexec {git} "$@"\n'


@pytest.fixture
def slow_git(tmp_path: Path) -> Path:
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True)
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(SLOW_GIT.format(git=real.stdout.strip()))
    wrapper.chmod(0o755)
    return bin_dir


def start_approve(database_url: str, slow_git: Path, barrier: Path, task_id: str):
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
        "CLAWBOO_STATE_DIR": str(settings.CLAWBOO_STATE_DIR),
        "CLAWBOO_REPO_ROOTS": os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "PATH": f"{slow_git}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "workers.py"), "--barrier", str(barrier)]
        + ["approve", task_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its gits die with it
    )


def on_main(repo: Path, task_id: str) -> bool:
    return f"{task_id}.txt" in git(repo, "ls-tree", "--name-only", "main").splitlines()


def reviewed_task(n: int) -> str:
    # A gate that passes: what is under test is the landing, not the judge.
    task = store.create_task(title=f"Crash {n}", metadata={"verify_cmd": "true"}).task
    assert Executor("builder").work_once().worktree == "retained"
    assert store.get_task(task.id).status == "in_review"
    return task.id


@pytest.mark.parametrize(
    "kills", [KILLS, pytest.param(SOAK_KILLS, marks=pytest.mark.slow)], ids=["8", "20"]
)
def test_sigkill_mid_approve_leaves_repository_and_task_agreeing(
    command_agent, repo, database_url, slow_git, tmp_path, kills
):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    rng = random.Random(int(os.environ.get("CLAWBOO_CRASH_SEED", "30")))

    # One approval run to the end measures the window the kills are spread over.
    first = reviewed_task(0)
    barrier = tmp_path / "barrier-0"
    proc = start_approve(database_url, slow_git, barrier, first)
    assert read_json_line(proc) == {"ready": True}
    started = time.monotonic()
    barrier.touch()
    out, err = proc.communicate(timeout=120)
    window = time.monotonic() - started
    assert proc.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1])["result"] == "landed"

    outcomes = {"landed before the kill": 0, "completed": 0, "rolled_back": 0, "untouched": 0}
    recovered_by_approve = 0
    for n in range(1, kills + 1):
        task_id = reviewed_task(n)
        detached = n % 4 in (2, 3)  # half: main checked out nowhere (update-ref moves it)
        if detached:
            git(repo, "checkout", "-q", "--detach")
        barrier = tmp_path / f"barrier-{n}"
        proc = start_approve(database_url, slow_git, barrier, task_id)
        assert read_json_line(proc) == {"ready": True}
        barrier.touch()
        # The instant of the crash (not a wait), over the approval's later part:
        # where git moves and the board records it.
        time.sleep(rng.uniform(0.4 * window, window))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        if proc.returncode == 0:
            outcomes["landed before the kill"] += 1

        # Recovery: the boot pass on odd rounds, the next approve (of this very
        # task) on even ones.
        if n % 2:
            settled = {e["task_id"]: e["result"] for e in service.recover_landings()}
            outcomes[settled.get(task_id, "untouched")] += 1
        assert not store.pending_landings(str(repo)) or n % 2 == 0

        status = store.get_task(task_id).status
        if n % 2:
            # Repository and task agree: landed and done, or neither.
            assert on_main(repo, task_id) == (status == "done"), (n, status)
            assert status in ("done", "in_review"), (n, status)
        if status != "done":
            pending = bool(store.pending_landings(str(repo)))
            result = service.approve(task_id, by="reviewer")  # no 409 from a stale lock
            assert result["result"] == "landed", result
            recovered_by_approve += pending
        assert store.get_task(task_id).status == "done"
        assert on_main(repo, task_id)
        assert not store.pending_landings(str(repo))
        if detached:
            git(repo, "checkout", "-q", "main")
        # The user's checkout of main: nothing half-written left behind.
        assert git(repo, "status", "--porcelain") == "", n
        git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
        assert not list(git_dir.glob("**/*.lock")), n

    # Every task landed once: one commit each on main, none twice.
    messages = git(repo, "log", "--format=%b", "main")
    landed_ids = [line for line in messages.splitlines() if line.startswith("clawboo: land")]
    assert len(landed_ids) == len(set(landed_ids)) == kills + 1
    print("outcomes", outcomes, "by approve", recovered_by_approve, "window", round(window, 2))


def test_a_landing_killed_before_git_moved_is_rolled_back_and_its_lock_cleared(command_agent, repo):
    """Deterministic: the record is written, git's index lock is left as a killed
    fast-forward leaves it, one of the landing's files half-written: the next
    approve rolls it back, clears the lock, and lands."""
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = reviewed_task(1)
    ws = store.get_workspace(task_id)
    with landing.land_lock(repo):
        prepared = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=task_id,
            title="Crash 1",
            base_branch="main",
            strategy="squash",
        )
    store.begin_landing(
        task_id, {**prepared.as_dict(), "by": "reviewer", "started_at": time.time() - 1}
    )
    (repo / f"{task_id}.txt").write_text("x\n")  # the fast-forward got this far
    (repo / ".git" / "index.lock").write_text("")
    assert service.approve(task_id, by="reviewer")["result"] == "landed"
    assert store.get_task(task_id).status == "done" and on_main(repo, task_id)
    assert not (repo / ".git" / "index.lock").exists()
    assert git(repo, "status", "--porcelain") == ""


def test_a_file_a_killed_fast_forward_left_half_written_is_rolled_back_not_kept(
    command_agent, repo
):
    """Deterministic (the issue's 409 "untracked working tree files would be
    overwritten"): git writes a file in place, so a fast-forward killed mid-write
    leaves the landing's new file cut short, untracked. That is the landing's, not a
    person's edit: the recovery removes it and the next approve lands."""
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = reviewed_task(1)
    ws = store.get_workspace(task_id)
    with landing.land_lock(repo):
        prepared = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=task_id,
            title="Crash 1",
            base_branch="main",
            strategy="squash",
        )
    store.begin_landing(
        task_id, {**prepared.as_dict(), "by": "reviewer", "started_at": time.time() - 1}
    )
    (repo / f"{task_id}.txt").write_text("x")  # 'x\n' cut short by the kill
    settled = {e["task_id"]: e["result"] for e in service.recover_landings()}
    assert settled == {task_id: "rolled_back"}
    assert not (repo / f"{task_id}.txt").exists()
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert service.approve(task_id, by="reviewer")["result"] == "landed"
    assert store.get_task(task_id).status == "done" and on_main(repo, task_id)


def test_a_file_a_person_wrote_where_a_landing_died_is_left_alone(command_agent, repo):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = reviewed_task(1)
    ws = store.get_workspace(task_id)
    with landing.land_lock(repo):
        prepared = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=task_id,
            title="Crash 1",
            base_branch="main",
            strategy="squash",
        )
    store.begin_landing(
        task_id, {**prepared.as_dict(), "by": "reviewer", "started_at": time.time() - 1}
    )
    (repo / f"{task_id}.txt").write_text("a person's own words\n")
    service.recover_landings()
    assert (repo / f"{task_id}.txt").read_text() == "a person's own words\n"


def test_a_landing_killed_while_git_rewrote_packed_refs_is_completed_and_its_file_cleared(
    command_agent, repo
):
    """Deterministic (the 20-round soak met it): git moved main, then died deleting
    the task's branch, leaving ``packed-refs.new`` beside its lock; every later ref
    deletion fails on that file. The boot pass clears both and completes it."""
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = reviewed_task(1)
    ws = store.get_workspace(task_id)
    with landing.land_lock(repo):
        prepared = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=task_id,
            title="Crash 1",
            base_branch="main",
            strategy="squash",
        )
        store.begin_landing(
            task_id, {**prepared.as_dict(), "by": "reviewer", "started_at": time.time() - 1}
        )
        landing.advance(repo, prepared)
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir"))
    for name in ("packed-refs.lock", "packed-refs.new"):
        (git_dir / name).write_text("")
    settled = {e["task_id"]: e["result"] for e in service.recover_landings()}
    assert settled == {task_id: "completed"}
    assert store.get_task(task_id).status == "done" and on_main(repo, task_id)
    assert not (git_dir / "packed-refs.new").exists()
    assert f"clawboo/task-{task_id}" not in git(repo, "branch", "--list")


def test_the_board_side_of_an_approval_is_one_event(command_agent, repo):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = reviewed_task(1)
    before = Event.objects.filter(task_id=task_id).count()
    assert service.approve(task_id, by="reviewer")["result"] == "landed"
    after = list(Event.objects.filter(task_id=task_id).order_by("seq")[before:])
    assert [e.kind for e in after] == ["completed"]
    payload = after[0].payload["task"]
    assert payload["status"] == "done" and payload["worktree_ref"] is None
    ws = store.last_workspace(task_id)
    assert ws is not None and ws.status == "archived" and ws.landing["state"] == "landed"


def test_a_landing_killed_after_git_moved_is_completed_by_the_next_approve_in_the_repo(
    command_agent, repo
):
    """Deterministic: task A's landing moved main and died before the board knew.
    Approving B completes A (done, checkout gone) and lands B on top; approving A
    again is refused as already done."""
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    first, second = reviewed_task(1), reviewed_task(2)
    ws = store.get_workspace(first)
    with landing.land_lock(repo):
        prepared = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=first,
            title="Crash 1",
            base_branch="main",
            strategy="squash",
        )
        store.begin_landing(
            first, {**prepared.as_dict(), "by": "reviewer", "started_at": time.time()}
        )
        landing.advance(repo, prepared)
    assert on_main(repo, first) and store.get_task(first).status == "in_review"

    assert service.approve(second, by="reviewer")["result"] == "landed"
    assert store.get_task(first).status == "done"
    assert store.last_workspace(first).status == "archived"
    assert not Path(ws.worktree_path).exists()
    assert store.get_task(second).status == "done" and on_main(repo, second)
    assert git(repo, "status", "--porcelain") == ""


def test_approving_again_a_task_whose_landing_died_after_git_moved_finishes_it(command_agent, repo):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = reviewed_task(1)
    ws = store.get_workspace(task_id)
    with landing.land_lock(repo):
        prepared = landing.prepare(
            repo,
            Path(ws.worktree_path),
            task_id=task_id,
            title="Crash 1",
            base_branch="main",
            strategy="squash",
        )
        store.begin_landing(
            task_id, {**prepared.as_dict(), "by": "reviewer", "started_at": time.time()}
        )
        landing.advance(repo, prepared)
    result = service.approve(task_id, by="reviewer")
    assert result["result"] == "landed" and result["commit"] == prepared.commit
    assert set(result) == {*landing.Landing.__dataclass_fields__, "task"}
    assert result["task"].status == "done"
    assert git(repo, "rev-list", "--count", f"{prepared.previous_tip}..main") == "1"


# With a qcluster and nobody acting, each round waits for the schedule (a minute
# apart, its scheduler looking every 30 s): two rounds in CI, `-m slow` the twenty.
SCHEDULED_KILLS = 2
SCHEDULED_SOAK_KILLS = 20
SETTLE_S = 90


def start_qcluster(database_url: str, log_path: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CLAWBOO_STATE_DIR": str(settings.CLAWBOO_STATE_DIR),
        "CLAWBOO_REPO_ROOTS": os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "CLAWBOO_Q_WORKERS": "1",
        "CLAWBOO_DB_WRITE_BUDGET_MS": "10000",
    }
    argv = [sys.executable, str(ROOT / "manage.py"), "qcluster"]
    # The scheduler's first look 15 s after the cluster starts, not 30
    # (tests/fast_scheduler_settings.py).
    argv += ["--settings", "tests.fast_scheduler_settings"]
    with log_path.open("wb") as out:
        return subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    try:  # the leader and whatever of its group outlived it
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def agree(repo: Path, task_id: str) -> bool:
    """Board and repository agree, nothing left pending: landed and done, or
    neither (in review, approvable again)."""
    if store.pending_landings(str(repo)):
        return False
    status = store.get_task(task_id).status
    return status in ("done", "in_review") and on_main(repo, task_id) == (status == "done")


@pytest.mark.parametrize(
    "kills",
    [SCHEDULED_KILLS, pytest.param(SCHEDULED_SOAK_KILLS, marks=pytest.mark.slow)],
    ids=["2", "20"],
)
def test_the_landing_recover_schedule_settles_a_killed_approve_with_nobody_acting(
    command_agent, repo, database_url, slow_git, tmp_path, kills
):
    """A real qcluster (the README's separate commands, no `up` boot pass): each
    approving process SIGKILLed at a random instant; within 90 s the
    ``clawboo.landing-recover`` schedule has made board and repository agree; a
    later approve of every task lands once, on a checkout git can still use."""
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    rng = random.Random(int(os.environ.get("CLAWBOO_CRASH_SEED", "41")))
    first = reviewed_task(0)
    barrier = tmp_path / "barrier-0"
    proc = start_approve(database_url, slow_git, barrier, first)
    assert read_json_line(proc) == {"ready": True}
    started = time.monotonic()
    barrier.touch()
    out, err = proc.communicate(timeout=120)
    window = time.monotonic() - started
    assert proc.returncode == 0, err

    log_path = tmp_path / "qcluster.log"
    cluster = start_qcluster(database_url, log_path)
    settled_in: list[float] = []
    killed_ids: list[str] = []
    left_pending = 0  # rounds the schedule had to settle
    try:
        for n in range(1, kills + 1):
            task_id = reviewed_task(n)
            killed_ids.append(task_id)
            barrier = tmp_path / f"barrier-{n}"
            proc = start_approve(database_url, slow_git, barrier, task_id)
            assert read_json_line(proc) == {"ready": True}
            barrier.touch()
            time.sleep(rng.uniform(0.2 * window, window))  # the instant of the crash
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
            killed = time.monotonic()
            left_pending += bool(store.pending_landings(str(repo)))
            deadline = killed + SETTLE_S
            while not agree(repo, task_id):
                assert cluster.poll() is None, log_path.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, (
                    n,
                    store.get_task(task_id).status,
                    log_path.read_text(errors="replace")[-3000:],
                )
                time.sleep(0.5)
            settled_in.append(round(time.monotonic() - killed, 1))
            assert git(repo, "status", "--porcelain", "--untracked-files=all") == "", n
    finally:
        stop_group(cluster)

    # A later approve of every task lands it (once); the done ones stay done.
    for task_id in killed_ids:
        if store.get_task(task_id).status != "done":
            assert service.approve(task_id, by="reviewer")["result"] == "landed"
        assert store.get_task(task_id).status == "done" and on_main(repo, task_id)
    messages = git(repo, "log", "--format=%b", "main")
    landed_ids = [line for line in messages.splitlines() if line.startswith("clawboo: land")]
    assert len(landed_ids) == len(set(landed_ids)) == kills + 1
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    print("settled in (s)", settled_in, "pending", left_pending, "window", round(window, 2))
