"""A pull request the forge opened for a process that died before the board recorded
it is adopted, never opened again: without that, every later publish and approval
met the forge's "a pull request already exists" and the task sat in review until a
person closed the orphan on the forge by hand."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings

from board import store
from board.models import TaskComment
from executor.runner import Executor
from tests.conftest import ROOT
from tests.forges.conftest import Setup
from tests.forges.standin import PR
from worktrees import pull_requests

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

CREATES = ("pulls/create", "repoCreatePullRequest")


def _in_review_unpublished(monkeypatch: pytest.MonkeyPatch) -> str:
    """A task in review whose pull request was never opened: review's own publish is
    left out, for the test to run (and kill) in a process of its own."""
    monkeypatch.setattr(pull_requests, "publish_quietly", lambda task_id: None)
    task = store.create_task(title="Add the feature", repository="app").task
    assert Executor("builder").work_once().worktree == "retained"
    monkeypatch.undo()
    assert store.get_task(task.id).status == "in_review"
    assert store.get_task(task.id).pull_request is None
    return task.id


def _start_publish(database_url: str, task_id: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
        "CLAWBOO_STATE_DIR": str(settings.CLAWBOO_STATE_DIR),
        "CLAWBOO_REPO_ROOTS": os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
    }
    return subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "workers.py"), "publish", task_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its gits die with it
    )


def _creates(setup: Setup) -> int:
    return sum(1 for r in setup.forge.requests if r[0] in CREATES)


def test_a_publish_killed_after_the_forge_opened_its_pull_request_is_adopted_and_lands(
    forge_repo: Setup, database_url: str, monkeypatch: pytest.MonkeyPatch, api: Any
):
    forge = forge_repo.forge
    task_id = _in_review_unpublished(monkeypatch)
    worker: dict[str, subprocess.Popen[str]] = {}

    def die_before_the_answer(pr: PR) -> None:
        # The forge has opened it; the process that asked dies before it hears so,
        # and so before the board records the number.
        os.killpg(worker["publish"].pid, signal.SIGKILL)
        worker["publish"].wait(timeout=30)

    forge.after_create = die_before_the_answer
    worker["publish"] = _start_publish(database_url, task_id)
    worker["publish"].communicate(timeout=120)
    forge.after_create = None
    assert worker["publish"].returncode == -signal.SIGKILL
    assert [(p.number, p.state) for p in forge.prs.values()] == [(1, "open")]
    assert store.get_task(task_id).pull_request is None  # the board never heard

    # The poll publishes it again: the orphan is found and taken, not opened twice.
    assert pull_requests.poll() == 1
    record = store.get_task(task_id).pull_request
    assert record["number"] == 1 and record["state"] == "open"
    assert record["branch"] == f"clawboo/task-{task_id}" and record["base"] == "main"
    assert _creates(forge_repo) == 1 and len(forge.prs) == 1
    notes = TaskComment.objects.filter(task_id=task_id).values_list("body", flat=True)
    assert any("#1 found open on the forge" in n for n in notes), list(notes)

    # And the task lands through it.
    forge.set_check(forge.head_of(1), "ci", "success", "all good")
    merged = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert merged.status_code == 200, merged.json()
    assert store.get_task(task_id).status == "done"
    assert forge.prs[1].merged and len(forge.prs) == 1


def test_a_pull_request_opened_between_the_look_up_and_the_open_is_adopted(
    forge_repo: Setup, monkeypatch: pytest.MonkeyPatch
):
    forge = forge_repo.forge
    task_id = _in_review_unpublished(monkeypatch)
    raced: list[PR] = []

    def another_publish_gets_there_first(head: str, base: str) -> None:
        if not raced:
            raced.append(forge.open_by_hand(head, base))

    forge.before_create = another_publish_gets_there_first
    record = pull_requests.publish(task_id)
    forge.before_create = None
    assert record is not None and record["number"] == raced[0].number == 1
    assert len(forge.prs) == 1
    refused = [r for r in forge.requests if r[0] in CREATES]
    assert len(refused) == 1  # the forge said "already exists" once, and it was taken
    assert store.get_task(task_id).pull_request["number"] == 1


def test_a_closed_pull_request_of_the_branch_is_not_adopted(
    forge_repo: Setup, monkeypatch: pytest.MonkeyPatch
):
    forge = forge_repo.forge
    task_id = _in_review_unpublished(monkeypatch)
    old = forge.open_by_hand(f"clawboo/task-{task_id}", "main", "an earlier round")
    forge.close_by_hand(old.number)
    record = pull_requests.publish(task_id)
    assert record is not None and record["number"] == 2 and forge.prs[2].state == "open"
    assert json.dumps(forge.prs[1].state) == '"closed"'
