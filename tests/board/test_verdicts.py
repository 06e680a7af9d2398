"""Write verdicts (issue 3 / seed 001): every decline reason, their precedence, soft
and hard fail, and did_write_land's three answers."""

from __future__ import annotations

import pytest

from board import store
from board.errors import IllegalTransition
from board.models import Task
from tests.board.states import task_in

pytestmark = pytest.mark.django_db


def declined(outcome) -> tuple[str, str | None, str | None]:
    return (outcome.outcome, outcome.reason, outcome.status)


def test_the_precedence_is_the_seeds():
    assert store.DECLINE_PRECEDENCE == (
        "immutable-assignee",
        "terminal",
        "not-my-task",
        "disallowed",
        "parked",
        "lost-claim",
    )


def test_immutable_assignee(default_team):
    task, _ = task_in("in_progress")
    assert declined(store.set_assignee(task.id, "bob")) == (
        "declined",
        "immutable-assignee",
        "in_progress",
    )


def test_terminal(default_team):
    task, _ = task_in("done")
    before = store.get_task(task.id)
    # cancel is advisory on a settled task with no options at all
    assert declined(store.cancel(task.id)) == ("declined", "terminal", "done")
    assert declined(store.complete(task.id, "again", if_allowed=True)) == (
        "declined",
        "terminal",
        "done",
    )
    assert declined(store.set_assignee(task.id, "bob")) == ("declined", "terminal", "done")
    after = store.get_task(task.id)
    assert (after.revision, after.completed_at, after.output) == (
        before.revision,
        before.completed_at,
        before.output,
    )


def test_not_my_task(default_team):
    mine, my_ticket = task_in("in_progress")
    theirs, _ = task_in("in_progress")
    assert declined(store.complete(theirs.id, ticket=my_ticket)) == (
        "declined",
        "not-my-task",
        "in_progress",
    )


def test_disallowed(default_team):
    todo, _ = task_in("todo")
    assert declined(store.unblock(todo.id, if_allowed=True)) == ("declined", "disallowed", "todo")
    assert declined(store.fail(todo.id, "x", if_allowed=True)) == ("declined", "disallowed", "todo")
    with pytest.raises(IllegalTransition):  # without the guard it throws
        store.unblock(todo.id)


def test_parked(default_team):
    task, ticket = task_in("in_review")
    assert declined(store.complete(task.id, ticket=ticket, refuse_when_parked=True)) == (
        "declined",
        "parked",
        "in_review",
    )
    # Without the guard settling a parked task is legitimate.
    assert store.complete(task.id, ticket=ticket).recorded


def test_lost_claim_after_a_release_and_a_reclaim(default_team):
    task, old = task_in("in_progress")
    assert store.release(task.id).recorded
    assert store.claim(task.id, "bob").ok
    assert declined(store.fail(task.id, "gave up", ticket=old)) == (
        "declined",
        "lost-claim",
        "in_progress",
    )


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        # terminal beats not-my-task: a finished task with the wrong ticket
        ("done+wrong-ticket", "terminal"),
        # not-my-task beats disallowed
        ("wrong-ticket+disallowed", "not-my-task"),
        # disallowed beats parked
        ("disallowed+parked", "disallowed"),
        # parked beats lost-claim
        ("parked+lost-claim", "parked"),
    ],
)
def test_when_several_reasons_hold_the_first_in_precedence_is_reported(
    default_team, setup, expected
):
    _, other_ticket = task_in("in_progress")
    if setup == "done+wrong-ticket":
        task, _ = task_in("done")
        verdict = store.complete(task.id, ticket=other_ticket, if_allowed=True)
    elif setup == "wrong-ticket+disallowed":
        task, _ = task_in("in_progress")
        verdict = store.unblock(task.id, ticket=other_ticket, if_allowed=True)
    elif setup == "disallowed+parked":
        task, ticket = task_in("in_review")
        verdict = store.unblock(task.id, ticket=ticket, if_allowed=True, refuse_when_parked=True)
    else:
        task, old = task_in("in_progress")
        store.release(task.id)
        fresh = store.claim(task.id, "bob")
        store.await_review(task.id, ticket=fresh.ticket)
        verdict = store.complete(task.id, ticket=old, refuse_when_parked=True)
    assert verdict.reason == expected


def test_a_decline_writes_nothing(default_team):
    task, _ = task_in("done")
    before = store.get_task(task.id)
    store.cancel(task.id)
    assert store.get_task(task.id).revision == before.revision


def test_unchanged_when_the_task_already_holds_that_state(default_team):
    task, _ = task_in("todo")
    assert store.set_priority(task.id, 0).outcome == "unchanged"
    assert store.add_label(task.id, "x").recorded
    assert store.add_label(task.id, "x").outcome == "unchanged"


def test_soft_fail_requeues_with_feedback_and_hard_fail_blocks(default_team):
    task = store.create_task(title="t", max_attempts=2).task
    got = store.claim(task.id, "ada")
    assert store.fail(task.id, "flaky test", ticket=got.ticket).recorded
    soft = store.get_task(task.id)
    assert (soft.status, soft.feedback, soft.assignee_agent_id) == ("todo", "flaky test", None)
    again = store.claim(task.id, "bob")
    assert again.task.attempts == 2
    assert store.fail(task.id, "still broken", ticket=again.ticket).recorded
    hard = store.get_task(task.id)
    assert (hard.status, hard.error) == ("blocked", "still broken")


def test_did_write_land_answers_true_false_and_none(default_team):
    task, ticket = task_in("in_progress")
    landed = store.begin_write(store.get_task(task.id))
    assert store.complete(task.id, "out", ticket=ticket, write=landed).recorded
    assert store.did_write_land(store.get_task(task.id), landed) is True

    other, _ = task_in("done")
    refused = store.begin_write(store.get_task(other.id))
    store.cancel(other.id, write=refused)  # declined: terminal
    assert store.did_write_land(store.get_task(other.id), refused) is False

    # A receipt that aged out of the last four cannot be vouched for either way.
    busy, _ = task_in("todo")
    early = store.begin_write(store.get_task(busy.id))
    store.block(busy.id, write=early)
    for _ in range(2):
        store.unblock(busy.id, write=store.begin_write(store.get_task(busy.id)))
        store.block(busy.id, write=store.begin_write(store.get_task(busy.id)))
    assert store.did_write_land(store.get_task(busy.id), early) is None

    # Deleted and recreated under the same id: another incarnation.
    gone, _ = task_in("todo", id="reused")
    token = store.begin_write(store.get_task(gone.id))
    Task.objects.filter(pk="reused").delete()  # the data layer has no delete verb yet
    store.create_task(title="new", id="reused")
    assert store.did_write_land(store.get_task("reused"), token) is None
    assert store.did_write_land(None, token) is None


@pytest.mark.parametrize(
    ("verb", "status"),
    [("unblock", "todo"), ("release", "todo"), ("resume_from_review", "in_progress")],
)
def test_a_single_edge_verb_refuses_a_task_already_at_its_target(default_team, verb, status):
    task, ticket = task_in(status)
    before = store.get_task(task.id)
    with pytest.raises(IllegalTransition):
        getattr(store, verb)(task.id)
    assert store.get_task(task.id).revision == before.revision
    guarded = {"if_allowed": True} if verb != "release" else {}
    if guarded:
        assert getattr(store, verb)(task.id, **guarded).reason == "disallowed"
