"""While an approval's change is being landed (its landing begun, or its merge-queue
batch holding it), no move takes the task out of review: not request-changes (crash6)
and not cancel, block, an agent's resume or a transition either -- one rule in the
one place a status moves (``board.store.moves.move``). Before, a task cancelled or
blocked mid-landing stayed cancelled or blocked with its change on the base."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

from board import store
from board.errors import LandingUnderway
from executor.runner import Executor
from tests.fixtures.gitrepos import git
from worktrees import service

pytestmark = pytest.mark.django_db(transaction=True)

WRITE = (
    "import pathlib, os; pathlib.Path(os.environ['CLAWBOO_TASK_ID'] + '.txt').write_text('x\\n')"
)

# Every road out of review a person, an operator or an agent has, by the data layer.
MOVES: dict[str, Callable[[str], Any]] = {
    "cancel": lambda tid: store.cancel(tid),
    "block": lambda tid: store.block(tid, "parked by hand"),
    "resume_from_review": lambda tid: store.resume_from_review(tid, "again", agent_id="builder"),
    "transition to blocked": lambda tid: store.transition(tid, "blocked"),
    "transition to cancelled": lambda tid: store.transition(tid, "cancelled"),
    "request_changes": lambda tid: store.request_changes(tid, "redo", by="rita"),
}


def in_review(title: str) -> str:
    task = store.create_task(title=title, metadata={"verify_cmd": "true"}).task
    assert Executor("builder").work_once().worktree == "retained"
    assert store.get_task(task.id).status == "in_review"
    return task.id


@pytest.mark.parametrize("verb", list(MOVES))
def test_no_move_takes_a_task_out_of_review_while_its_landing_is_under_way(
    command_agent, repo, verb: str
):
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = in_review("Task")
    store.begin_landing(task_id, {"result": "landed", "base_branch": "main"})
    before = store.get_task(task_id)

    with pytest.raises(LandingUnderway):
        MOVES[verb](task_id)

    after = store.get_task(task_id)
    assert (after.status, after.revision, after.feedback) == (
        "in_review",
        before.revision,
        before.feedback,
    )
    # Settled (git never moved): the move is the person's again.
    store.roll_back_landing(task_id, "git never moved")
    MOVES[verb](task_id)
    assert store.get_task(task_id).status != "in_review"


@pytest.mark.parametrize("verb", ["cancel", "block"])
def test_a_cancel_or_block_while_the_approval_lands_is_refused_and_the_task_lands_done(
    command_agent, repo, monkeypatch, verb: str
):
    # An operator's "Cancel tasks" in the Django admin (store.cancel), or a block,
    # arrives while git moves the base (between the landing's begin and its finish):
    # refused, and the task ends done with its change -- not cancelled or blocked
    # with its change on main all the same.
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = in_review("Task")
    advance = service.landing.advance
    refusals: list[str] = []

    def advance_while_someone_moves_it(*args: Any, **kwargs: Any) -> Any:
        try:
            MOVES[verb](task_id)
        except LandingUnderway as exc:
            refusals.append(exc.code)
        return advance(*args, **kwargs)

    monkeypatch.setattr(service.landing, "advance", advance_while_someone_moves_it)
    result = service.approve(task_id, by="reviewer")

    assert refusals == ["landing_underway"]
    assert result["result"] == "landed"
    assert store.get_task(task_id).status == "done"
    assert f"{task_id}.txt" in git(repo, "ls-tree", "--name-only", "main").splitlines()


def test_an_operator_cannot_cancel_a_task_its_merge_queue_batch_holds(command_agent, repo):
    # The queue's hold is the same rule's other state (landing ``queued``).
    command_agent("builder", argv=[sys.executable, "-c", WRITE])
    task_id = in_review("Task")
    store.hold_for_batch([task_id], 1, "main")
    with pytest.raises(LandingUnderway):
        store.cancel(task_id)
    assert store.get_task(task_id).status == "in_review"
