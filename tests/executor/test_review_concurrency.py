"""Two approvals of different tasks in one repository, from two processes at once:
the repository's landing lock lines them up, and both land."""

from __future__ import annotations

import sys

import pytest

from board import store
from executor.runner import Executor
from tests.fixtures.gitrepos import git

pytestmark = pytest.mark.django_db(transaction=True)

WRITE = (
    "import pathlib, os; pathlib.Path(os.environ['CLAWBOO_TASK_ID'] + '.txt').write_text('x\\n')"
)


def test_two_approvals_from_two_processes_both_land(command_agent, repo, race):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    # A verify command the gate passes: approval then needs no override.
    tasks = [
        store.create_task(title=f"Task {n}", metadata={"verify_cmd": "true"}).task for n in (1, 2)
    ]
    for _ in tasks:
        assert Executor("builder").work_once().worktree == "retained"
    base = git(repo, "rev-parse", "main")

    results = race([["approve", task.id] for task in tasks])

    assert [r["result"] for r in results] == ["landed", "landed"]
    commits = git(repo, "rev-list", "--reverse", f"{base}..main").splitlines()
    assert len(commits) == 2  # one after the other, none lost
    assert {r["commit"] for r in results} == set(commits)
    tree = set(git(repo, "ls-tree", "--name-only", "main").splitlines())
    assert {f"{t.id}.txt" for t in tasks} <= tree
    assert all(store.get_task(t.id).status == "done" for t in tasks)
    assert git(repo, "status", "--porcelain") == ""
