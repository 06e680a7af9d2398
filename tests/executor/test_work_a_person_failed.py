"""GOVERNANCE §6: a verdict a person set against work stands until a person lifts
it (board.store.moves.clear_verdict), also for the server's own worker: the work
given back and run again reaches review, never ``done`` -- and its run is no failure
of the agent's (its breaker is not tripped by a person's verdict)."""

from __future__ import annotations

import pytest

from board import store
from core.models import Agent
from executor.runner import Executor

pytestmark = pytest.mark.django_db(transaction=True)


def test_work_a_person_failed_is_run_again_into_review_not_done(command_agent):
    command_agent("builder")
    task = store.create_task(title="judged by hand", file_mutating=False).task
    ticket = store.claim(task.id, "builder", "command").ticket
    store.set_verdict(task.id, "fail", "not what was asked", by="ada")
    store.release(task.id, ticket=ticket)

    report = Executor("builder").work_once()

    assert report.outcome == "succeeded"
    after = store.get_task(task.id)
    assert (after.status, after.verdict) == ("in_review", "fail")
    agent = Agent.objects.get(pk="builder")
    assert (agent.state, agent.breaker_failures) == ("active", 0)
