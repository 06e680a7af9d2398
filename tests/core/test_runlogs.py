"""The full log of each run: kept line by line as printed, bounded, readable in
pieces, and pruned with the rest of the history."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from django.utils import timezone

from core import retention, runlogs


@pytest.fixture
def state(tmp_path, settings):
    settings.CLAWBOO_STATE_DIR = tmp_path
    return tmp_path


def test_a_run_log_keeps_every_line_as_printed_and_marks_stderr(state):
    log = runlogs.RunLog("default", "t1", 7)
    log.write("stdout", "first\n")
    log.write("stderr", "oops")
    log.write("stdout", "last")
    # Each line is on disk before the run ends: a watcher reads it at once.
    assert runlogs.read("default", "t1", 7) == b"first\n[stderr] oops\nlast\n"
    log.close()
    log.write("stdout", "after the end")
    assert runlogs.read("default", "t1", 7, offset=6, limit=7) == b"[stderr"
    assert runlogs.newest("default", "t1") == 7 and runlogs.newest("default", "t2") is None


def test_a_log_stops_at_its_bound_and_says_so(state, settings):
    settings.CLAWBOO_RUNLOG_MAX_BYTES = 1024
    log = runlogs.RunLog("default", "t1", 1)
    for i in range(200):
        log.write("stdout", f"line {i}")
    log.close()
    text = runlogs.read("default", "t1", 1).decode()
    assert len(text) <= 1024 + len(runlogs.TRUNCATED.format(limit=1024))
    assert text.endswith(runlogs.TRUNCATED.format(limit=1024))
    assert text.startswith("line 0\nline 1\n")


def test_ids_that_would_leave_the_team_folder_are_refused(state):
    for team, task in (("..", "t"), ("default", "../x"), ("a/b", "t"), ("default", ".")):
        with pytest.raises(ValueError):
            runlogs.path_for(team, task, 1)


@pytest.mark.django_db
def test_prune_deletes_the_logs_older_than_the_retention(state, settings):
    settings.CLAWBOO_HISTORY_RETENTION_DAYS = 30
    for execution in (1, 2):
        runlogs.RunLog("default", "t1", execution).close()
    old = timezone.now() - dt.timedelta(days=31)
    os.utime(runlogs.path_for("default", "t1", 1), (old.timestamp(), old.timestamp()))
    assert retention.prune().run_logs == 1
    assert not runlogs.exists("default", "t1", 1) and runlogs.exists("default", "t1", 2)


def test_a_printed_line_cannot_pass_for_another_stream_or_the_truncation_line(state):
    log = runlogs.RunLog("default", "t1", 3)
    log.write("stdout", "[stderr] not really")
    log.write("stdout", "two\nlines")
    log.write("stdout", "")
    log.close()
    text = runlogs.read("default", "t1", 3).decode()
    assert text == "[stdout] [stderr] not really\ntwo\nlines\n\n"
