"""The transition table over all 49 (from, to) pairs, against seed 000's table
written out here independently of ``board.transitions``."""

from __future__ import annotations

import itertools

import pytest

from board import store
from board.errors import IllegalTransition
from board.transitions import allowed_transitions_from, is_terminal, is_transition_allowed
from core import registry
from tests.board.states import task_in

STATUSES = ["backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"]
SEED_TABLE = {
    "backlog": {"todo", "blocked", "cancelled"},
    "todo": {"in_progress", "blocked", "backlog", "cancelled"},
    "in_progress": {"in_review", "done", "blocked", "todo", "cancelled"},
    "in_review": {"done", "in_progress", "blocked", "cancelled"},
    "blocked": {"todo", "in_progress", "backlog", "cancelled"},
    "done": set(),
    "cancelled": set(),
}
PAIRS = list(itertools.product(STATUSES, STATUSES))


def test_the_table_is_the_seeds():
    assert len(PAIRS) == 49
    for source in STATUSES:
        assert set(allowed_transitions_from(source)) == SEED_TABLE[source]
        assert is_terminal(source) == (source in ("done", "cancelled"))


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_each_pair_moves_or_is_refused_with_the_allowed_list(default_team, source, target):
    registry.create_agent(id="bob", display_name="Bob", team="default", runtime="human")
    task, _ = task_in(source)
    legal = target == source or target in SEED_TABLE[source]
    assert is_transition_allowed(source, target) == legal
    # A move into in_progress takes a claim for a named agent (tests/board/test_moves.py).
    claim = {"agent_id": "bob"} if target == "in_progress" and source != target else {}

    if legal:
        moved = store.transition(task.id, target, **claim)
        assert moved.status == target
        fresh = store.get_task(task.id)
        assert fresh.status == target
        if source == target:  # same-status is an idempotent no-op
            assert fresh.revision == task.revision
        else:
            assert fresh.revision == task.revision + 1
        if (source, target) == ("in_progress", "todo"):  # the release path
            assert fresh.assignee_agent_id is None and fresh.assignee_runtime is None
    else:
        with pytest.raises(IllegalTransition) as refused:
            store.transition(task.id, target, **claim)
        assert refused.value.from_status == source
        assert refused.value.to_status == target
        assert set(refused.value.allowed) == SEED_TABLE[source]
        assert refused.value.as_dict()["allowed"] == list(allowed_transitions_from(source))
        fresh = store.get_task(task.id)
        assert (fresh.status, fresh.revision) == (source, task.revision)
    if source in ("done", "cancelled"):  # terminal: nothing but same-status
        assert legal == (target == source)


@pytest.mark.django_db
def test_release_clears_assignee_runtime_and_verdict(default_team):
    task, _ = task_in("in_progress")
    store.set_verdict(task.id, "fail", "red tests")
    store.transition(task.id, "todo")
    fresh = store.get_task(task.id)
    assert (fresh.assignee_agent_id, fresh.assignee_runtime, fresh.verdict) == (None, None, None)
    assert fresh.lease_until is None
    assert store.claim(task.id, "bob").ok  # re-claimable


@pytest.mark.django_db
@pytest.mark.parametrize("status", ["in_progress", "in_review"])
def test_a_locked_status_keeps_its_assignee(default_team, status):
    task, _ = task_in(status)
    verdict = store.set_assignee(task.id, "mallory")
    assert (verdict.outcome, verdict.reason) == ("declined", "immutable-assignee")
    assert store.get_task(task.id).assignee_agent_id == "ada"


@pytest.mark.django_db
def test_approving_a_task_that_is_done_says_it_is_done_already(default_team):
    # `clawboo task approve` of a task that had landed read "cannot move from done to
    # done", as if the approval had just failed.
    from board.store import review

    task, _ = task_in("done")
    with pytest.raises(IllegalTransition) as refused:
        review.approve(task.id, by="alice")
    assert refused.value.detail == f"task {task.id!r} is done already"
    assert refused.value.as_dict()["allowed"] == []
    assert store.get_task(task.id).revision == task.revision
