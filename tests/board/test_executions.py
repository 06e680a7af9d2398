"""Execution processes (issue 3): opened only after a successful claim, closed once
with outcome, tokens, cents and git commits."""

from __future__ import annotations

import pytest

from board import store
from board.errors import ClaimConflict
from tests.board.states import task_in

pytestmark = pytest.mark.django_db


def test_an_execution_opens_after_a_claim_and_closes_with_its_ledger(default_team):
    task, ticket = task_in("in_progress")
    run = store.open_execution(task.id, ticket, pid=4242, git_before="a" * 40)
    assert (run.status, run.attempt, run.agent_id, run.pid) == ("running", 1, "ada", 4242)
    assert store.running_execution(task.id) == run

    closed = store.close_execution(
        run.id, "succeeded", tokens_in=1200, tokens_out=300, cost_cents=7, git_after="b" * 40
    )
    assert (closed.status, closed.git_before, closed.git_after) == (
        "succeeded",
        "a" * 40,
        "b" * 40,
    )
    assert closed.finished_at is not None
    fresh = store.get_task(task.id)
    assert (fresh.cost_tokens, fresh.cost_cents) == (1500, 7)
    # Closing again (a recovery pass got there first) changes nothing.
    again = store.close_execution(run.id, "failed", tokens_in=99)
    assert again.status == "succeeded"
    assert store.get_task(task.id).cost_tokens == 1500


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "timed_out", "cancelled"])
def test_every_outcome_closes_a_run(default_team, outcome):
    task, ticket = task_in("in_progress")
    run = store.open_execution(task.id, ticket)
    assert store.close_execution(run.id, outcome).status == outcome


def test_an_execution_is_refused_without_a_live_claim(default_team):
    task, ticket = task_in("in_progress")
    store.release(task.id)
    with pytest.raises(ClaimConflict):
        store.open_execution(task.id, ticket)
    store.claim(task.id, "bob")
    with pytest.raises(ClaimConflict):  # the old attempt's ticket
        store.open_execution(task.id, ticket)
    assert list(store.list_executions(task.id)) == []


def test_settling_the_task_closes_its_running_execution(default_team):
    task, ticket = task_in("in_progress")
    run = store.open_execution(task.id, ticket)
    store.complete(task.id, ticket=ticket)
    assert store.list_executions(task.id).get(pk=run.id).status == "succeeded"


def test_a_claim_opens_one_run(default_team):
    task, ticket = task_in("in_progress")
    run = store.open_execution(task.id, ticket)
    store.close_execution(run.id, "failed", error="the worker gave up on it")

    with pytest.raises(ClaimConflict, match="already had its run"):
        store.open_execution(task.id, ticket)
    assert [r.id for r in store.list_executions(task.id)] == [run.id]


def test_a_fix_round_opens_the_claims_next_run(default_team):
    task, ticket = task_in("in_progress")
    first = store.open_execution(task.id, ticket)
    store.close_execution(first.id, "succeeded")
    sent = store.send_back_for_fix(
        task.id, ticket, evidence="1 failed", detail={"fix_cycles": 1}, feedback="fix the test"
    )
    assert sent.recorded

    second = store.open_execution(task.id, ticket)
    store.close_execution(second.id, "succeeded")
    assert (second.attempt, first.attempt) == (1, 1)  # one claim, two rounds
    with pytest.raises(ClaimConflict):  # one run per round
        store.open_execution(task.id, ticket)


def test_a_claim_resumed_from_review_opens_its_next_run(default_team):
    task, ticket = task_in("in_progress")
    store.close_execution(store.open_execution(task.id, ticket).id, "succeeded")
    store.transition(task.id, "in_review")
    assert store.resume_from_review(task.id, "one more thing", ticket=ticket).recorded

    assert store.open_execution(task.id, ticket).status == "running"


def test_a_new_claim_opens_its_own_run(default_team):
    task, ticket = task_in("in_progress")
    store.close_execution(store.open_execution(task.id, ticket).id, "failed")
    store.release(task.id, ticket=ticket)
    again = store.claim(task.id, "ada", "command")

    assert store.open_execution(task.id, again.ticket).attempt == 2


def test_an_executor_does_not_start_again_a_claim_whose_run_ended(default_team):
    # A person's claim for ada is started once; its run ended (the task's move was
    # never recorded: the worker died, a write failed) and the lease is still live.
    task, _ = task_in("in_progress")
    started = store.start_assigned("ada")
    assert started is not None and started.task.id == task.id
    store.close_execution(started.execution.id, "failed", error="executor died")

    assert store.start_assigned("ada") is None
    assert store.list_executions(task.id).count() == 1


def test_an_executor_starts_the_fix_round_of_a_claim(default_team):
    task, _ = task_in("in_progress")
    started = store.start_assigned("ada")
    assert started is not None
    store.close_execution(started.execution.id, "succeeded")
    store.send_back_for_fix(
        task.id, started.ticket, evidence="e", detail={"fix_cycles": 1}, feedback="fix it"
    )

    again = store.start_assigned("ada")
    assert again is not None and again.task.id == task.id and again.ticket == started.ticket


def test_a_claim_taken_to_run_opens_its_execution_in_the_same_write(default_team):
    task = store.create_task(title="run me").task
    claimed = store.claim_next("ada", runtime="command", pid=4242)
    assert claimed is not None and claimed.task is not None and claimed.execution is not None
    run = claimed.execution
    assert (run.task_id, run.status, run.pid, run.runtime) == (task.id, "running", 4242, "command")
    assert run.attempt == store.get_task(task.id).attempts == 1
    assert store.running_execution(task.id) == run
    # The ticket is the one the run settles with: its execution closes under it.
    assert store.complete(task.id, ticket=claimed.ticket).outcome == "recorded"
    assert store.list_executions(task.id).get(pk=run.id).status == "succeeded"


def test_a_claim_of_one_task_taken_to_run_opens_its_execution_in_the_same_write(default_team):
    task = store.create_task(title="run me").task
    claimed = store.claim(task.id, "ada", "openclaw", pid=4242)
    assert claimed.ok and claimed.execution is not None
    run = claimed.execution
    assert (run.task_id, run.status, run.pid, run.runtime) == (task.id, "running", 4242, "openclaw")
    assert run.attempt == store.get_task(task.id).attempts == 1
    assert store.running_execution(task.id) == run
    # Without a pid, as before: the claim alone.
    other = store.create_task(title="claimed only").task
    assert store.claim(other.id, "ada").execution is None
    assert list(store.list_executions(other.id)) == []


def test_a_claim_taken_without_a_pid_opens_no_execution(default_team):
    task = store.create_task(title="claimed only").task
    claimed = store.claim_next("ada", runtime="command")
    assert claimed is not None and claimed.execution is None
    assert list(store.list_executions(task.id)) == []


def test_the_run_a_claim_opened_in_its_own_write_is_that_claims_one_run(default_team):
    task = store.create_task(title="run me once").task
    claimed = store.claim_next("ada", runtime="command", pid=4242)
    assert claimed is not None and claimed.execution is not None
    store.close_execution(claimed.execution.id, "failed", error="the worker gave up on it")

    with pytest.raises(ClaimConflict, match="already had its run"):
        store.open_execution(task.id, claimed.ticket)
