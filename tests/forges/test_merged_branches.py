"""Once the forge merges a task's pull request — approved on the board, merged by a
person on the forge, seen by webhook or by the poll — the ``clawboo/task-<id>``
branch Clawboo pushed is deleted on the forge too. One the forge already deleted
(GitHub's ``delete_branch_on_merge``) is no error; a refused delete is a log line
and the task is done all the same."""

from __future__ import annotations

import logging

import pytest

from board import store
from executor.runner import Executor
from tests.forges.conftest import TOKEN, Setup
from worktrees import pull_requests

pytestmark = pytest.mark.django_db

DELETES = ("git/delete-ref", "repoDeleteBranch")


def _green_in_review(setup: Setup) -> tuple[str, str]:
    task = store.create_task(title="Add the feature", repository="app").task
    assert Executor("builder").work_once().task_id == task.id
    setup.forge.set_check(setup.forge.head_of(1), "ci", "success")
    branch = f"clawboo/task-{task.id}"
    assert setup.forge.has_branch(branch)
    return task.id, branch


def _deletes(setup: Setup) -> list[str]:
    return [path for op, path, _, _ in setup.forge.requests if op in DELETES]


def test_approving_merges_then_deletes_the_task_branch_on_the_forge(forge_repo: Setup, api):
    task_id, branch = _green_in_review(forge_repo)
    answer = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert answer.status_code == 200, answer.json()
    assert store.get_task(task_id).status == "done"
    assert not forge_repo.forge.has_branch(branch)
    assert forge_repo.forge.has_branch("main")
    # Each vendor's own operation: GitHub's ref keeps its slashes (a multi-segment
    # parameter), Gitea's branch is one segment.
    expected = (
        f"/repos/octo/app/git/refs/heads/{branch}"
        if forge_repo.kind == "github"
        else f"/api/v1/repos/octo/app/branches/clawboo%2Ftask-{task_id}"
    )
    assert _deletes(forge_repo) == [expected]


def test_a_branch_the_forge_deleted_on_merge_is_no_error(forge_repo: Setup, caplog):
    caplog.set_level(logging.INFO, logger="worktrees.pull_requests")
    forge_repo.forge.delete_branch_on_merge = True
    task_id, branch = _green_in_review(forge_repo)
    forge_repo.forge.merge_by_hand(1, by="maria")  # a person, on the forge
    assert pull_requests.poll() == 1
    assert store.get_task(task_id).status == "done"
    assert not forge_repo.forge.has_branch(branch)
    assert len(_deletes(forge_repo)) == 1  # asked once; GitHub 422 / Gitea 404 is fine
    assert f"branch {branch} was already gone" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_refused_branch_delete_is_a_log_line_and_the_task_is_done(forge_repo: Setup, api, caplog):
    caplog.set_level(logging.INFO)
    forge_repo.forge.refuse_branch_delete = True
    task_id, branch = _green_in_review(forge_repo)
    answer = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["result"] == "merging"
    task = store.get_task(task_id)
    assert task.status == "done" and task.pull_request["state"] == "merged"
    assert forge_repo.forge.has_branch(branch)  # the forge kept it
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and f"could not delete branch {branch}" in warned[0]
    assert TOKEN not in caplog.text
