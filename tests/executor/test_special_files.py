"""An agent's FIFOs, symlinks to FIFOs and symlinks out of its checkout are never
read (nor written through): the run, the diff, the re-claim and the completion all
finish, on a real repository with the `command` runtime."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from board import store
from executor.runner import Executor
from worktrees import agent_files, checkouts

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(180)]

# First run: booby-trap the checkout and fail; second run: do the work.
TRAPS = """
import os, pathlib, sys
here = pathlib.Path.cwd()
marker = pathlib.Path(sys.argv[1])
if not marker.exists():
    marker.write_text("trapped")
    os.mkfifo(here / "pipe")
    os.symlink("pipe", here / "link")
    os.symlink("/etc/hostname", here / "outside")
    for name in ("TASK.md", "task-progress.md", "init.sh"):
        (here / name).unlink()
        os.mkfifo(here / name)
    os.symlink("pipe", here / "AGENT_HANDOFF.json")
    sys.exit(3)
(here / "feature.txt").write_text("ok\\n")
"""


def test_fifos_and_symlinks_in_a_checkout_never_hang_the_worker(command_agent, tmp_path):
    script = tmp_path / "traps.py"
    script.write_text(TRAPS)
    command_agent("builder", argv=[sys.executable, str(script), str(tmp_path / "marker")])
    task = store.create_task(title="Trapped", max_attempts=3).task

    started = time.monotonic()
    first = Executor("builder").work_once()
    assert first.outcome == "failed" and first.worktree == "kept"
    worktree = Path(store.get_task(task.id).worktree_ref)
    assert (worktree / "pipe").is_fifo() and (worktree / "TASK.md").is_fifo()

    # The re-claim reads TASK.md, the progress file and the handoff: all FIFOs now.
    second = Executor("builder").work_once()
    assert second.outcome == "succeeded", second
    assert time.monotonic() - started < 60
    task = store.get_task(task.id)
    assert task.status in ("in_review", "done")
    # TASK.md was replaced by a regular file, not written through the FIFO.
    assert (worktree / "TASK.md").is_file() and not (worktree / "TASK.md").is_symlink()

    diff = checkouts.work_diff(worktree, store.get_workspace(task.id).base_commit)
    counted = {entry["path"]: entry["insertions"] for entry in diff.files}
    assert counted["feature.txt"] == 1
    # The checkpoint committed the symlinks as links (git counts the link text);
    # the FIFO git skips; read for an untracked count, none of them is followed.
    assert counted["link"] == 1 and counted["outside"] == 1
    assert "pipe" not in counted
    for name in ("pipe", "link", "outside"):
        assert checkouts._count_lines(worktree / name) is None


def test_only_regular_files_are_read_and_writes_replace_what_is_there(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    os.symlink("pipe", tmp_path / "link")
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    os.symlink(target, tmp_path / "out")
    (tmp_path / "plain.txt").write_text("one\ntwo")
    started = time.monotonic()
    for name in ("pipe", "link", "out"):
        with pytest.raises(agent_files.NotARegularFile):
            agent_files.read_text(tmp_path / name)
    with pytest.raises(agent_files.NotARegularFile):
        agent_files.read_bytes(Path("/dev/zero"))
    assert time.monotonic() - started < 5
    assert agent_files.read_text(tmp_path / "plain.txt") == "one\ntwo"
    assert agent_files.count_lines(tmp_path / "plain.txt") == 2
    with pytest.raises(agent_files.FileTooLarge):
        agent_files.read_bytes(tmp_path / "plain.txt", max_bytes=3)
    agent_files.write_text(tmp_path / "out", "new\n")
    agent_files.write_text(tmp_path / "pipe", "new\n")
    assert target.read_text() == "keep me\n"
    assert (tmp_path / "out").read_text() == "new\n" and not (tmp_path / "out").is_symlink()
    assert (tmp_path / "pipe").is_file()
