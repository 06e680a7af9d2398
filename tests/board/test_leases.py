"""Leases, heartbeats and tickets (issue 3), on a driven clock."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from board import store
from board.store.claims import ABANDONED_ERROR

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock():
    with time_machine.travel(timezone.now(), tick=False) as traveller:
        yield traveller


def test_a_claim_stamps_the_lease_attempt_and_first_start(default_team, clock):
    task = store.create_task(title="t").task
    at = timezone.now()
    result = store.claim(task.id, "ada", "command")
    claimed = result.task
    assert claimed.lease_duration_ms == 120_000  # the default: two minutes
    assert claimed.lease_until == at + dt.timedelta(minutes=2)
    assert (claimed.attempts, claimed.started_at) == (1, at)
    assert result.ticket

    custom = store.claim(store.create_task(title="u").task.id, "ada", lease_ms=5_000).task
    assert custom.lease_until == at + dt.timedelta(seconds=5)


def test_an_unrenewed_one_second_lease_goes_to_the_next_worker_as_attempt_two(default_team, clock):
    task = store.create_task(title="t").task
    started = timezone.now()
    first = store.claim_next("ada", lease_ms=1_000)
    assert first.task.id == task.id

    clock.shift(dt.timedelta(milliseconds=1_500))  # no renewal
    second = store.claim_next("bob", lease_ms=1_000)

    assert second is not None and second.task.id == task.id
    assert second.task.attempts == 2
    assert second.task.assignee_agent_id == "bob"
    assert second.task.started_at == started  # stamped on the first claim only
    assert store.get_task(task.id).abandonments == 1
    late = store.complete(task.id, {"by": "ada"}, ticket=first.ticket, if_allowed=True)
    assert (late.outcome, late.reason, late.status) == ("declined", "lost-claim", "in_progress")
    assert store.complete(task.id, {"by": "bob"}, ticket=second.ticket).recorded
    assert store.get_task(task.id).output == {"by": "bob"}


def test_after_three_lapses_the_task_is_blocked_instead_of_handed_out(default_team, clock):
    task = store.create_task(title="t").task
    for attempt in (1, 2, 3):
        got = store.claim_next(f"w{attempt}", lease_ms=1_000)
        assert got.task.id == task.id and got.task.attempts == attempt
        clock.shift(dt.timedelta(seconds=2))

    assert store.claim_next("w4", lease_ms=1_000) is None
    parked = store.get_task(task.id)
    assert parked.status == "blocked"
    assert parked.abandonments == 3
    assert parked.error == ABANDONED_ERROR.format(n=3)
    assert parked.assignee_agent_id is None


@pytest.mark.parametrize("back_to", ["todo", "backlog"])
def test_a_task_a_person_unblocks_after_three_lapses_gets_three_lapses_afresh(
    default_team, clock, back_to
):
    task = store.create_task(title="t").task
    for attempt in (1, 2, 3):
        assert store.claim_next(f"w{attempt}", lease_ms=1_000).task.id == task.id
        clock.shift(dt.timedelta(seconds=2))
    assert store.claim_next("w4", lease_ms=1_000) is None
    assert store.get_task(task.id).status == "blocked"

    # A person looked, fixed what made its workers die, and moved it back.
    store.transition(task.id, back_to, actor="ada")
    if back_to == "backlog":
        store.transition(task.id, "todo", actor="ada")
    assert store.get_task(task.id).abandonments == 0
    # One more lapse (a worker restarted) is its first, not its fourth: back to todo.
    assert store.claim_next("w5", lease_ms=1_000).task.id == task.id
    clock.shift(dt.timedelta(seconds=2))
    again = store.claim_next("w6", lease_ms=1_000)

    assert again is not None and again.task.id == task.id
    assert store.get_task(task.id).abandonments == 1


def test_a_heartbeat_pushes_the_lease_out_and_a_lapsed_one_is_declined(default_team, clock):
    task = store.create_task(title="t").task
    got = store.claim(task.id, "ada", lease_ms=1_000)
    clock.shift(dt.timedelta(milliseconds=800))
    assert store.heartbeat(task.id, got.ticket).recorded
    clock.shift(dt.timedelta(milliseconds=800))  # 1.6 s after the claim, still ours
    assert store.claim_next("bob") is None
    assert store.complete(task.id, ticket=got.ticket).recorded

    other = store.create_task(title="u").task
    mine = store.claim(other.id, "ada", lease_ms=1_000)
    clock.shift(dt.timedelta(seconds=2))
    late = store.renew_lease(other.id, mine.ticket)
    assert (late.outcome, late.reason) == ("declined", "lost-claim")


def test_adopt_lapsed_lease_takes_the_task_back_only_if_nobody_else_has(default_team, clock):
    a = store.create_task(title="a").task
    mine = store.claim(a.id, "ada", lease_ms=1_000)
    clock.shift(dt.timedelta(seconds=2))
    adopted = store.renew_lease(a.id, mine.ticket, adopt_lapsed_lease=True)
    assert adopted.recorded
    fresh = store.get_task(a.id)
    assert (fresh.attempts, fresh.assignee_agent_id) == (1, "ada")  # same attempt
    assert fresh.lease_until == timezone.now() + dt.timedelta(seconds=1)

    b = store.create_task(title="b").task
    lost = store.claim(b.id, "ada", lease_ms=1_000)
    clock.shift(dt.timedelta(seconds=2))
    assert store.claim(b.id, "bob").ok  # someone else took it meanwhile
    too_late = store.renew_lease(b.id, lost.ticket, adopt_lapsed_lease=True)
    assert (too_late.outcome, too_late.reason) == ("declined", "lost-claim")


def test_a_task_parked_for_review_ignores_its_lease(default_team, clock):
    task = store.create_task(title="t").task
    got = store.claim(task.id, "ada", lease_ms=1_000)
    assert store.await_review(task.id, ticket=got.ticket).recorded
    clock.shift(dt.timedelta(hours=1))
    assert store.claim_next("bob") is None  # nothing reclaims a parked task
    assert store.resume_from_review(task.id, "looks good", ticket=got.ticket).recorded
    fresh = store.get_task(task.id)
    assert (fresh.status, fresh.feedback) == ("in_progress", "looks good")
