"""The review panel (the admin's and the API's) shows each run's log tail, reading
only that tail from the database."""

from __future__ import annotations

import tracemalloc

import pytest

from board import store
from board.models import ExecutionProcess
from tests.board.states import task_in
from worktrees import review

pytestmark = pytest.mark.django_db

BIG = "".join(f"line {i:08d} of a long run\n" for i in range(2_000_000))  # 52 MB


def a_run_with_a_log(log: str) -> str:
    task, ticket = task_in("in_progress")
    run = store.open_execution(task.id, ticket)
    store.close_execution(run.id, "failed", log="kept")
    # The store keeps a run's last 64 KB; an imported or older row holds what it was
    # given, and a panel read 64 KB a run even so.
    ExecutionProcess.objects.filter(pk=run.id).update(log=log)
    return task.id


def test_the_review_reads_only_the_tail_of_a_large_run_log(default_team):
    task_id = a_run_with_a_log(BIG)
    task = store.get_task(task_id)
    tracemalloc.start()
    try:
        panel = review.review_of(task, log_chars=4_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    [run] = panel["executions"]
    assert run["log_tail"] == BIG[-4_000:]
    assert run["log_tail"].splitlines()[-1] == "line 01999999 of a long run"
    assert run["log_truncated"] is True
    assert peak < 5_000_000  # the whole log is 52 MB


@pytest.mark.parametrize(
    ("log", "chars", "tail", "truncated"),
    [("short log\n", 4_000, "short log\n", False), ("abcdef", 3, "def", True), ("", 10, "", False)],
)
def test_the_review_shows_the_same_tail_as_before(default_team, log, chars, tail, truncated):
    task = store.get_task(a_run_with_a_log(log))
    [run] = review.review_of(task, log_chars=chars)["executions"]
    assert (run["log_tail"], run["log_truncated"]) == (tail, truncated)


def test_no_log_asked_for_reads_none(default_team):
    task = store.get_task(a_run_with_a_log("abc"))
    [run] = review.review_of(task, log_chars=0)["executions"]
    assert (run["log_tail"], run["log_truncated"]) == ("", True)
