"""A remote worker's first clone of a repository says its progress in the worker's log
while it runs (``git clone --progress``, parsed), and is still given up after
``CLAWBOO_WORKER_GIT_TIMEOUT_S``: a large repository's clone said "cloning …" and then
nothing for minutes."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor import gitprogress, rest
from tests.fixtures.gitrepos import make_repo


def test_gits_progress_updates_are_read_as_phase_percent_and_amount():
    receiving = gitprogress.parse(
        "Receiving objects:  45% (450/1000), 1.20 MiB | 2.00 MiB/s        "
    )
    assert receiving == gitprogress.Progress(
        "Receiving objects", 45, 450, 1000, "1.20 MiB | 2.00 MiB/s", False
    )
    assert receiving.line() == "receiving objects 45% (450/1000), 1.20 MiB | 2.00 MiB/s"
    done = gitprogress.parse("remote: Counting objects: 100% (302/302), done.")
    assert done is not None and done.finished and done.amount == ""
    assert done.line() == "counting objects 100% (302/302), done"
    for other in ("Cloning into bare repository 'x'...", "fatal: repository not found", ""):
        assert gitprogress.parse(other) is None


def many_objects(tmp_path: Path) -> Path:
    seed = make_repo(tmp_path / "seed", files=200)
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(seed), str(remote)], check=True)  # noqa: S607
    return remote


def test_the_workers_first_clone_says_its_progress_in_its_log(tmp_path, monkeypatch, caplog):
    # Every update said (the interval set to 0): a real clone's, through the worker's log.
    monkeypatch.setattr(gitprogress, "EVERY_S", 0.0)
    remote = f"file://{many_objects(tmp_path)}"
    caplog.set_level(logging.INFO, logger="clawboo.worker")
    checkout = rest.workspace(tmp_path / "cache", {"id": "t1"}, {"id": None, "remote": remote})
    assert (checkout.cwd / "file7.txt").exists()
    lines = [r.getMessage() for r in caplog.records if r.name == "clawboo.worker"]
    assert lines[0] == f"task t1: cloning {remote} (the first of its tasks on this host)…"
    progress = [line for line in lines if line.startswith("task t1: cloning: ")]
    assert any("receiving objects 100% (" in line for line in progress), lines
    assert progress[-1].endswith(", done"), lines


def test_a_quick_clone_says_nothing_more_than_before(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="clawboo.worker")
    remote = f"file://{many_objects(tmp_path)}"
    rest.workspace(tmp_path / "cache", {"id": "t1"}, {"id": None, "remote": remote})
    said = [r.getMessage() for r in caplog.records if r.name == "clawboo.worker"]
    assert [line for line in said if "cloning" in line] == [
        f"task t1: cloning {remote} (the first of its tasks on this host)…"
    ]


@pytest.fixture
def slow_git(tmp_path, monkeypatch) -> Path:
    """A ``git`` on PATH whose clone moves but never ends: progress every 0.1 s."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys, time\n"
        "for i in range(1, 10**6):\n"
        "    sys.stderr.write(f'Receiving objects:  {min(i, 99)}% ({i}/100000), {i} KiB\\r')\n"
        "    sys.stderr.flush()\n"
        "    time.sleep(0.1)\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return fake


def test_a_clone_still_moving_at_the_timeout_is_given_up_saying_how_far_it_got(
    tmp_path, monkeypatch, slow_git
):
    monkeypatch.setenv("CLAWBOO_WORKER_GIT_TIMEOUT_S", "3")
    monkeypatch.setattr(gitprogress, "EVERY_S", 0.5)
    said: list[str] = []
    clone = tmp_path / "clone"
    started = time.monotonic()
    with pytest.raises(rest.GitFailed) as failed:
        rest.clone_remote("https://example.invalid/big.git", clone, said.append)
    assert time.monotonic() - started < 30  # the timeout, not the fake's endless clone
    message = str(failed.value)
    assert message.startswith("git clone: not done within 3s (it reached receiving objects "), (
        message
    )
    assert message.endswith(
        "a large repository needs more time, CLAWBOO_WORKER_GIT_TIMEOUT_S on this host"
    )
    # Said as it went, at most every half second: not each of its ~30 updates.
    assert 1 <= len(said) <= 7, said
    assert all(line.startswith("receiving objects ") for line in said), said
    assert not clone.exists()
