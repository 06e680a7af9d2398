"""Two merge-queue drains at once -- two processes of one host, or of two hosts sharing
the database and the repository's state dir -- never gate in the repository's one
scratch checkout at the same time: the drains queue on the repository's landing lock
(a lock file in the state dir), and a batch still open (one per repository, a
database constraint) makes a drain leave the line be. Real processes, real git."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from tests.conftest import ROOT
from tests.fixtures.gitrepos import git
from tests.worktrees.queue_fixtures import Harness, host_env
from worktrees import service
from worktrees.models import MergeBatch, QueuedLanding

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

# The job process as a host runs it (``host`` its name), started on the word "go".
DRAIN = (
    "import socket, sys, django; django.setup(); "
    "socket.gethostname = lambda: sys.argv[2]; "
    "print('ready', flush=True); sys.stdin.readline(); "
    "from executor import merge_queue; print(merge_queue.drain(sys.argv[1]), flush=True)"
)
# The gate says when it starts and ends in which checkout, and whether anything else
# touched its checkout meanwhile (its own file gone, or HEAD moved under it).
GATE = (
    'echo "start $$ $PWD" >> {log}; head=$(git rev-parse HEAD); touch .gate-$$; '
    "sleep 0.4; "
    '[ -e .gate-$$ ] && [ "$(git rev-parse HEAD)" = "$head" ] || echo "trampled $$" >> {log}; '
    'echo "end $$ $PWD" >> {log}'
)


def start_drain(database_url: str, repo: Path, host: str, state: Path) -> subprocess.Popen[str]:
    env = host_env(database_url, state, CLAWBOO_MERGE_BATCH="2")
    return subprocess.Popen(
        [sys.executable, "-c", DRAIN, str(repo), host],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )


def go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()


def gate_starts(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith("start")]


def gates_overlapped(lines: list[str]) -> list[str]:
    """The gate runs that started while another was running (none: one at a time)."""
    running: set[str] = set()
    overlapped = []
    for line in lines:
        word, pid, *_ = line.split()
        if word == "start":
            if running:
                overlapped.append(line)
            running.add(pid)
        elif word == "end":
            running.discard(pid)
    return overlapped


@pytest.mark.parametrize(
    "hosts",
    [
        pytest.param(("one", "one"), id="two-processes-of-one-host"),
        pytest.param(("a", "b"), id="two-hosts-sharing-the-repository"),
    ],
)
def test_two_drains_at_once_never_gate_in_one_checkout_together_and_land_each_task_once(
    queue_harness: Harness, database_url, tmp_path, hosts
):
    from core import repositories

    repo = queue_harness.repo
    log = tmp_path / "gate-runs.log"
    repositories.update("app", {"verify_cmd": GATE.format(log=log)})
    start = git(repo, "rev-parse", "main")
    ids = []
    for n in range(6):
        ids.append(queue_harness.in_review(f"Task {n}", {f"t{n}.txt": f"{n}\n"}))
        assert service.approve(ids[-1], by="reviewer")["result"] == "queued"
    # The task checkouts the drains land live in the state dir, which hosts sharing
    # a repository share with it (its landing lock and scratch checkout too).
    state = Path(settings.CLAWBOO_STATE_DIR)

    for round_ in range(4):  # until the line is empty (a drain another's batch turned away)
        if not QueuedLanding.objects.filter(state="queued").exists():
            break
        drains = [start_drain(database_url, repo, host, state) for host in hosts]
        for proc in drains:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        # The second starts while the first gates: it must neither gate in the same
        # checkout nor take the first's batch for one a dead job left.
        go(drains[0])
        gated_before = len(gate_starts(log))
        deadline = time.monotonic() + 60
        while len(gate_starts(log)) == gated_before and drains[0].poll() is None:
            assert time.monotonic() < deadline, "the first drain never gated"
            time.sleep(0.02)
        go(drains[1])
        for proc in drains:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, (round_, out, err[-3000:])

    lines = log.read_text().splitlines()
    assert lines, "no gate ran"
    assert not [line for line in lines if line.startswith("trampled")], lines
    assert gates_overlapped(lines) == [], lines
    assert all(store.get_task(t).status == "done" for t in ids)
    assert sorted(queue_harness.landed_ids()) == sorted(ids)  # each exactly once
    assert len(git(repo, "rev-list", f"{start}..main").splitlines()) >= len(ids)
    assert not MergeBatch.objects.filter(state__in=["gating", "advancing"]).exists()
    assert not MergeBatch.objects.filter(state="abandoned").exists()  # no live one taken
