"""Two hosts with state directories of their own share one repository (and the
database): a task worked on host A has its checkout under A's state dir, and host B
lands it -- B's merge-queue job drains the line, or a person's approval reaches B's
server. The landing removes A's checkout where git has it registered (not where B
would have put it), deletes the task's branch, and records the task ``done`` once.
Real processes, real git: the test is host A, a subprocess with its own
``CLAWBOO_STATE_DIR`` and hostname is host B."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from board import store
from board.models import Workspace
from core import repositories
from tests.conftest import ROOT
from tests.fixtures.gitrepos import git
from tests.worktrees.queue_fixtures import Harness, host_env
from worktrees import checkouts, service
from worktrees.models import MergeBatch, QueuedLanding

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

# Host B's process: named ``sys.argv[2]``, it drains the repository's merge queue, or
# approves the tasks named after it (a person's approval reaching B's server).
HOST_B = (
    "import json, socket, sys, django; django.setup(); "
    "socket.gethostname = lambda: sys.argv[2]; "
    "from executor import merge_queue; from worktrees import service; "
    "done = merge_queue.drain(sys.argv[1]) if sys.argv[3] == 'drain' else "
    "[service.approve(t, by='reviewer')['result'] for t in sys.argv[4:]]; "
    "print(json.dumps(done, default=str), flush=True)"
)


def run_host_b(
    database_url: str, repo: Path, state: Path, *args: str, name: str = "host-b"
) -> object:
    env = host_env(database_url, state)
    proc = subprocess.run(
        [sys.executable, "-c", HOST_B, str(repo), name, *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )
    assert proc.returncode == 0, (proc.stdout, proc.stderr[-4000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def task_checkouts(repo: Path) -> list[str]:
    """The task checkouts git still has registered for ``repo``."""
    return [
        path
        for path, entry in checkouts.registered_worktrees(repo).items()
        if entry.get("branch", "").startswith("refs/heads/" + checkouts.BRANCH_PREFIX)
    ]


@pytest.mark.parametrize("landing_mode", ["queue", "direct"])
def test_a_task_worked_on_one_host_lands_when_another_host_lands_it(
    queue_harness: Harness, database_url, tmp_path, landing_mode
):
    repo = queue_harness.repo
    repositories.update("app", {"landing_mode": landing_mode})
    start = git(repo, "rev-parse", "main")
    ids = [queue_harness.in_review(f"Task {n}", {f"t{n}.txt": f"{n}\n"}) for n in range(3)]
    a_checkouts = [Path(store.get_workspace(t).worktree_path) for t in ids]
    host_a = checkouts.worktree_root()
    assert all(path.is_relative_to(host_a) and path.is_dir() for path in a_checkouts)
    host_b = (tmp_path / "host-b-state").resolve()
    host_b.mkdir()

    if landing_mode == "queue":
        for task_id in ids:
            assert service.approve(task_id, by="reviewer")["result"] == "queued"
        report = run_host_b(database_url, repo, host_b, "drain")
        assert isinstance(report, dict) and sorted(report["landed"]) == sorted(ids), report
    else:
        assert run_host_b(database_url, repo, host_b, "approve", *ids) == ["landed"] * 3

    assert [store.get_task(t).status for t in ids] == ["done"] * 3
    assert sorted(queue_harness.landed_ids()) == sorted(ids)  # each exactly once
    assert len(git(repo, "rev-list", f"{start}..main").splitlines()) == 3
    for task_id in ids:
        assert f"t{ids.index(task_id)}.txt" in git(repo, "ls-tree", "--name-only", "main")
        assert checkouts.branch_tip(repo, checkouts.branch_for(task_id)) is None
    # Host A's checkouts went with their branches; host B made none of its own.
    assert task_checkouts(repo) == []
    assert not any(path.exists() for path in a_checkouts)
    assert not (host_b / "worktrees").exists() or not any((host_b / "worktrees").rglob("*"))
    rows = Workspace.objects.filter(task_id__in=ids)
    assert sorted(row.status for row in rows) == ["archived"] * 3
    assert all((row.landing or {}).get("state") == "landed" for row in rows)
    assert not QueuedLanding.objects.filter(state="queued").exists()
    assert not MergeBatch.objects.filter(state__in=["gating", "advancing"]).exists()


def test_a_task_lands_from_its_branch_when_its_hosts_checkout_is_out_of_sight(
    queue_harness: Harness, database_url, tmp_path
):
    """Host A's state dir on a disk host B does not see: B's drain lets A's
    registration go and makes the checkout again under its own state dir from the
    branch (which carries the work: a completion commits it), and lands it."""
    repo = queue_harness.repo
    task_id = queue_harness.in_review("Task", {"t.txt": "work\n"})
    a_checkout = Path(store.get_workspace(task_id).worktree_path)
    assert service.approve(task_id, by="reviewer")["result"] == "queued"
    # And a task host A is working now, in a checkout host B cannot see either.
    running = store.create_task(title="Running on A").task
    assert store.claim(running.id, "builder").outcome == "ok"
    a_running = Path(service.provision_task_workspace(running.id, str(repo)).worktree_path)
    out_of_sight = tmp_path / "host-a-disk"
    out_of_sight.mkdir()
    a_checkout.rename(out_of_sight / "landing")  # as host B sees them: not there
    a_running.rename(out_of_sight / "running")
    host_b = (tmp_path / "host-b-state").resolve()
    host_b.mkdir()

    report = run_host_b(database_url, repo, host_b, "drain")

    assert isinstance(report, dict) and report["landed"] == [task_id], report
    assert store.get_task(task_id).status == "done"
    assert git(repo, "show", "main:t.txt") == "work"
    assert queue_harness.landed_ids() == [task_id]
    assert checkouts.branch_tip(repo, checkouts.branch_for(task_id)) is None
    # Host A's live checkout keeps its registration (no ``worktree prune``).
    assert task_checkouts(repo) == [str(a_running)]
    assert (out_of_sight / "landing" / "t.txt").exists()  # host A's disk: A's to clean
    assert Workspace.objects.get(task_id=task_id).status == "archived"


# Host B's worker: it claims the task for its agent and checks it out for its run.
RECLAIM = (
    "import json, sys, django; django.setup(); "
    "from board import store; from worktrees import service; "
    "assert store.claim(sys.argv[1], 'builder').outcome == 'ok'; "
    "ws, _head = service.checkout_for_run(sys.argv[1], sys.argv[2]); "
    "print(json.dumps(ws.worktree_path), flush=True)"
)


def test_a_task_another_host_let_go_is_checked_out_here_with_the_work_left_in_its_checkout(
    queue_harness: Harness, database_url, tmp_path
):
    """Host A worked the task and let go of its claim (a lapse) with work not yet
    committed; host B claims it: A's checkout is committed (a pause commit on the
    branch), removed, and made again under B's state dir with that work in it."""
    repo = queue_harness.repo
    task = store.create_task(title="Half done").task
    assert store.claim(task.id, "builder").outcome == "ok"
    a_checkout = Path(service.provision_task_workspace(task.id, str(repo)).worktree_path)
    (a_checkout / "w.txt").write_text("half\n")
    store.release(task.id)
    host_b = (tmp_path / "host-b-state").resolve()
    host_b.mkdir()
    env = host_env(database_url, host_b)
    proc = subprocess.run(
        [sys.executable, "-c", RECLAIM, task.id, str(repo)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]

    b_checkout = Path(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert b_checkout.is_relative_to(host_b)
    assert (b_checkout / "w.txt").read_text() == "half\n"
    assert not a_checkout.exists()
    assert task_checkouts(repo) == [str(b_checkout)]
    assert store.get_workspace(task.id).worktree_path == str(b_checkout)
    branch = checkouts.branch_for(task.id)
    assert git(repo, "log", "-1", "--format=%s", branch) == checkouts.pause_message(task.id)


@pytest.mark.parametrize(
    "b_name",
    [
        pytest.param("host-b", id="another-host"),
        pytest.param(None, id="another-state-dir-of-this-host"),
    ],
)
def test_an_approval_on_one_host_leaves_another_hosts_landing_in_flight_alone(
    queue_harness: Harness, database_url, tmp_path, b_name
):
    """Host A is landing task X (its record written, the base not moved yet) under
    its own landing lock, which host B cannot see; B's approval of task Y settles
    only the landings B's lock proves dead, so it does not roll X's landing back
    (nor put back the files of a fast-forward that may be half-way on A)."""
    import socket
    import time

    from worktrees import landing

    repo = queue_harness.repo
    repositories.update("app", {"landing_mode": "direct"})
    x = queue_harness.in_review("X", {"x.txt": "x\n"})
    y = queue_harness.in_review("Y", {"y.txt": "y\n"})
    with landing.land_lock(repo):  # host A's landing of X, half-way (as _land_approved)
        outcome = landing.prepare(
            repo,
            Path(store.get_workspace(x).worktree_path),
            task_id=x,
            title="X",
            base_branch="main",
            strategy="squash",
        )
        record = {
            **outcome.as_dict(),
            "by": "reviewer",
            "started_at": time.time(),
            "host": socket.gethostname(),
            "state_dir": str(checkouts.state_dir()),
            "pid": os.getpid(),
        }
        store.begin_landing(x, record)
        host_b = (tmp_path / "host-b-state").resolve()
        host_b.mkdir()
        name = b_name or socket.gethostname()

        assert run_host_b(database_url, repo, host_b, "approve", y, name=name) == ["landed"]

        assert store.get_workspace(x).landing["state"] == "pending"  # left to host A
        assert store.get_task(x).status == "in_review"
        assert store.get_task(y).status == "done"
        assert queue_harness.landed_ids() == [y]
