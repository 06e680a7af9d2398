"""One task in review, two reviewers' decisions at once from two real processes:
exactly one decision holds. Two approvals land the change once; an approval racing
a request-changes either lands it (the task done, the request refused) or sends it
back (nothing lands, the approval refused) -- never a change on the base branch
under a task its reviewer sent back to be redone (it would land again)."""

from __future__ import annotations

import sys

import pytest

from board import store
from board.errors import IllegalTransition
from executor.runner import Executor
from tests.api.conftest import make_client
from tests.fixtures.gitrepos import git
from worktrees import service

pytestmark = pytest.mark.django_db(transaction=True)

WRITE = (
    "import pathlib, os; pathlib.Path(os.environ['CLAWBOO_TASK_ID'] + '.txt').write_text('x\\n')"
)
ROUNDS = 3


def in_review(title: str) -> str:
    task = store.create_task(title=title, metadata={"verify_cmd": "true"}).task
    assert Executor("builder").work_once().worktree == "retained"
    assert store.get_task(task.id).status == "in_review"
    return task.id


def landed_commits(repo, base: str) -> list[str]:
    return git(repo, "rev-list", f"{base}..main").splitlines()


def test_two_approvals_of_one_task_at_once_land_it_once(command_agent, repo, race):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = in_review("Task")
    base = git(repo, "rev-parse", "main")

    results = race([["approve", task_id, "--refusal"], ["approve", task_id, "--refusal"]])

    landed = [r for r in results if r["ok"] and r["result"] == "landed"]
    assert len(landed) == 1, results
    assert [r["error"] for r in results if not r["ok"]] == ["IllegalTransition"], results
    assert landed_commits(repo, base) == [landed[0]["commit"]]
    assert store.get_task(task_id).status == "done"


def test_an_approval_racing_a_request_for_changes_lands_only_what_stays_approved(
    command_agent, repo, race
):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    for n in range(ROUNDS):
        task_id = in_review(f"Task {n}")
        base = git(repo, "rev-parse", "main")

        approval, request = race([["approve", task_id, "--refusal"], ["request-changes", task_id]])

        task = store.get_task(task_id)
        assert approval["ok"] != request["ok"], (n, approval, request)  # exactly one holds
        if approval["ok"]:
            assert approval["result"] == "landed", (n, approval)
            assert task.status == "done", n
            assert landed_commits(repo, base) == [approval["commit"]], n
        else:
            assert approval["error"] == "IllegalTransition", (n, approval)
            assert task.status == "in_progress", n
            assert landed_commits(repo, base) == [], (n, "sent back, yet landed")
            # Out of the way, so the builder's next run takes the next round's task.
            store.cancel(task_id)


def test_a_request_for_changes_while_the_approval_lands_is_refused_and_writes_nothing(
    command_agent, repo
):
    # The landing is begun (its record committed, git about to move): the task stays
    # in review until the landing settles, done or rolled back.
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = in_review("Task")
    store.begin_landing(task_id, {"result": "landed", "base_branch": "main"})
    before = store.get_task(task_id)
    reviewer = make_client("rita", staff=True)  # names the agent it moves to

    answers = [
        reviewer.post(
            f"/api/board/tasks/{task_id}/request-changes", {"feedback": "no"}, format="json"
        ),
        reviewer.post(
            f"/api/board/tasks/{task_id}/transition",
            {"to": "in_progress", "agent_id": "builder"},
            format="json",
        ),
    ]

    for answer in answers:
        assert answer.status_code == 409, answer.content
        assert answer.json()["error"] == "landing_underway", answer.json()
    after = store.get_task(task_id)
    assert (after.status, after.updated_at, after.feedback) == (
        "in_review",
        before.updated_at,
        before.feedback,
    )
    store.roll_back_landing(task_id, "git never moved")
    sent = reviewer.post(
        f"/api/board/tasks/{task_id}/request-changes", {"feedback": "no"}, format="json"
    )
    assert sent.status_code == 200, sent.content  # settled: the reviewer decides again


def test_an_approval_whose_task_was_sent_back_before_its_landing_began_moves_nothing(
    command_agent, repo, monkeypatch
):
    # The reviewer's request lands between the approval's check and its landing.
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = in_review("Task")
    base = git(repo, "rev-parse", "main")
    prepare = service.landing.prepare

    def prepare_then_sent_back(*args, **kwargs):
        outcome = prepare(*args, **kwargs)
        store.request_changes(task_id, "redo it", by="rita")
        return outcome

    monkeypatch.setattr(service.landing, "prepare", prepare_then_sent_back)

    with pytest.raises(IllegalTransition):
        service.approve(task_id, by="reviewer")

    assert git(repo, "rev-parse", "main") == base
    task = store.get_task(task_id)
    assert task.status == "in_progress"
    ws = store.live_workspace(task_id)
    assert ws is not None and not ws.landing  # no landing begun; the checkout stays
