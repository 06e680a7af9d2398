"""Crash recovery and cross-runtime continuation through the executor."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from board import store
from core import registry
from executor.runner import Executor
from tests.fixtures.runs import VERIFY_OK
from tests.runtimes.stand_ins import install_stand_in, real_lines

ROOT = Path(__file__).resolve().parents[2]

# First run: leave partial work and a progress note, then hang (to be killed).
# Any later run in the same checkout finishes the job from what it finds there.
SLOW_SCRIPT = """
import pathlib, sys, time
here = pathlib.Path.cwd()
partial = here / "partial.txt"
if not partial.exists():
    partial.write_text("step 1 done\\n")
    progress = here / "task-progress.md"
    progress.write_text(progress.read_text().replace("## Done", "## Done\\n- step 1", 1))
    print("started", flush=True)
    time.sleep(120)
    sys.exit(1)
(here / "feature.txt").write_text("ok\\n")
print("resumed and finished")
"""


def poll(predicate, deadline_s: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def slow_agent_worker(
    repo: Path, state_dir: Path, tmp_path: Path, database_url: str
) -> tuple[Path, subprocess.Popen[bytes]]:
    """Register the ``slow`` command agent and start ``manage.py work --once`` for it
    as a real process in its own session; return the agent's script and the worker."""
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW_SCRIPT)
    registry.create_agent(
        id="slow",
        display_name="Slow",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, str(slow)], "repo_path": str(repo)},
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state_dir),
        "CLAWBOO_REPO_ROOTS": str(repo.parent),
        "CLAWBOO_HEARTBEAT_MS": "200",
        "PYTHONPATH": str(ROOT),
    }
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "work", "--agent", "slow", "--once"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return slow, worker


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_is_swept_and_a_second_worker_finishes_in_the_same_worktree(
    repo, state_dir, tmp_path, database_url, settings
):
    task = store.create_task(title="Two-step job", metadata={"verify_cmd": VERIFY_OK}).task
    slow, worker = slow_agent_worker(repo, state_dir, tmp_path, database_url)
    try:
        worktree = Path(poll(lambda: store.get_task(task.id).worktree_ref, what="a worktree"))
        poll(lambda: (worktree / "partial.txt").exists(), what="partial work")
        assert store.running_execution(task.id) is not None
    finally:
        # The crash: the worker and the agent it ran die without a word.
        os.killpg(worker.pid, signal.SIGKILL)
        for pid in _agent_pids(slow):
            os.kill(pid, signal.SIGKILL)
        worker.wait(timeout=10)
    assert store.get_task(task.id).status == "in_progress"

    released = store.release_stale(ttl=dt.timedelta(0))
    assert released == [task.id]
    task = store.get_task(task.id)
    assert task.status == "todo" and task.abandonments == 1
    assert store.list_executions(task.id).get().status == "timed_out"

    report = Executor("slow").work_once()
    assert report.task_id == task.id and report.outcome == "succeeded"
    task = store.get_task(task.id)
    assert task.status == "in_review" and task.attempts == 2
    assert Path(task.worktree_ref) == worktree
    assert (worktree / "partial.txt").exists() and (worktree / "feature.txt").exists()


@pytest.mark.django_db(transaction=True)
def test_an_agent_dies_with_its_sigkilled_worker(repo, state_dir, tmp_path, database_url):
    task = store.create_task(title="Long job", metadata={"verify_cmd": VERIFY_OK}).task
    slow, worker = slow_agent_worker(repo, state_dir, tmp_path, database_url)
    try:
        worktree = Path(poll(lambda: store.get_task(task.id).worktree_ref, what="a worktree"))
        poll(lambda: (worktree / "partial.txt").exists(), what="the agent at work")
        assert _agent_pids(slow)
    finally:
        worker.kill()  # SIGKILL to the worker alone: nothing of ours runs after it
        worker.wait(timeout=10)
    # The agent ran in its own session, out of reach of a killpg on the worker; it
    # must still not outlive the worker and keep editing the task's worktree.
    poll(lambda: not _agent_pids(slow), deadline_s=10, what="the agent to die")


def _agent_pids(script: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(script) in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory


@pytest.mark.django_db
def test_a_different_runtime_resumes_from_the_handoff_without_the_native_session(repo, bin_dir):
    claude = install_stand_in(
        bin_dir, "claude", stdout=real_lines("claude-code/run1-write-file.stream.jsonl")
    )
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines("codex/run1-write-file.jsonl"))
    for agent_id, runtime in (("cc", "claude-code"), ("cx", "codex"), ("cc2", "claude-code")):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id,
            team="default",
            runtime=runtime,
            settings={"repo_path": str(repo)},
        )
    first = store.create_task(title="Hand me over").task
    run1 = Executor("cc", keep_for_resume=True).work_once()
    assert run1.outcome == "succeeded" and run1.worktree == "kept"
    task = store.get_task(first.id)
    assert task.status == "todo" and task.assignee_agent_id is None
    state = store.get_workspace(first.id)
    from worktrees import handoff

    doc = handoff.read_handoff(Path(state.worktree_path))
    assert doc["runtime"] == "claude-code" and doc["nativeSessionId"]

    run2 = Executor("cx").work_once()
    assert run2.task_id == first.id and run2.outcome == "succeeded"
    argv = codex.call()["argv"]
    assert "resume" not in argv  # another runtime's session id means nothing to codex
    assert codex.call()["cwd"] == state.worktree_path
    assert "Next best step" in argv[-1] or "Already done" in argv[-1]

    # The same runtime does continue its native session.
    second = store.create_task(title="Same runtime").task
    Executor("cc", keep_for_resume=True).work_once()
    session = handoff.read_handoff(Path(store.get_workspace(second.id).worktree_path))[
        "nativeSessionId"
    ]
    Executor("cc2").work_once()
    assert f"--resume={session}" in claude.call()["argv"]


@pytest.mark.django_db(transaction=True)
def test_work_all_picks_up_an_agent_registered_after_it_started(repo, state_dir, database_url):
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state_dir),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "work", "--all", "--poll-ms", "100"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert worker.stdout is not None
        assert "no agents yet" in worker.stdout.readline()  # started before the agent
        registry.create_agent(
            id="late",
            display_name="Late",
            team="default",
            runtime="command",
            settings={"argv": ["true"]},
        )
        task = store.create_task(title="For the newcomer", file_mutating=False).task
        poll(lambda: store.get_task(task.id).status == "done", what="the task done")
        assert store.get_task(task.id).assignee_agent_id == "late"
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=20)


@pytest.mark.django_db
def test_a_run_whose_failure_was_not_recorded_is_not_run_again_on_its_claim(
    default_team, monkeypatch
):
    # The run fails and the executor cannot record its task's failure (the write
    # raises): the claim stays live with its run closed. The next pass must not
    # open run after run on that claim; the lease lapses and a new claim retries it.
    registry.create_agent(
        id="flaky",
        display_name="Flaky",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    )
    task = store.create_task(title="t", file_mutating=False).task
    executor = Executor("flaky")

    def refused(*args, **kwargs):
        raise RuntimeError("the board refused the write")

    with monkeypatch.context() as patched:
        patched.setattr(store, "fail", refused)
        first = executor.work_once()
    assert (first.task_id, store.get_task(task.id).status) == (task.id, "in_progress")

    second = executor.work_once()

    assert second.outcome == "idle" and second.task_id is None
    assert [run.attempt for run in store.list_executions(task.id)] == [1]
