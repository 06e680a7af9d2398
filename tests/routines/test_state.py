"""The state a person is told (armed, running, late, error, paused, spent), derived in
one place from the ledger row and the clock."""

from __future__ import annotations

import datetime as dt

import pytest

from routines import store
from routines.models import Routine, RoutineStatus
from routines.occurrence import MISSED_GRACE_MS

pytestmark = pytest.mark.django_db


def make(agent, **fields) -> Routine:
    routine = store.create_routine(agent_id=agent.id, team=agent.team_id, cron_spec="0 9 * * *")
    Routine.objects.filter(pk=routine.pk).update(**fields)  # a ledger row as a test needs it
    return store.get_routine(routine.pk)


def test_an_idle_routine_with_a_slot_ahead_is_armed(agent, clock):
    routine = make(agent)
    assert store.state_of(routine) == "armed"
    assert store.offered_moves(routine) == ("pause", "run-now")


def test_a_slot_left_unfired_past_the_grace_is_late(agent, clock):
    routine = make(agent)
    slot = routine.next_run_at
    assert store.state_of(routine, slot + MISSED_GRACE_MS) == "armed"
    assert store.state_of(routine, slot + MISSED_GRACE_MS + 1) == "late"


def test_a_queued_fire_is_running_until_it_waits_too_long(agent, clock):
    at = store.now_ms()
    routine = make(agent, status=RoutineStatus.QUEUED, fire_slot=at)
    assert store.state_of(routine, at + 1_000) == "running"
    assert store.state_of(routine, at + MISSED_GRACE_MS + 1) == "late"
    assert store.offered_moves(routine) == ("pause",)


@pytest.mark.parametrize("status", [RoutineStatus.CLAIMED, RoutineStatus.RUNNING])
def test_an_in_flight_fire_is_running_however_long_it_takes(agent, clock, status):
    routine = make(agent, status=status, fire_slot=store.now_ms())
    later = store.now_ms() + int(dt.timedelta(hours=3).total_seconds() * 1000)
    assert store.state_of(routine, later) == "running"
    assert store.offered_moves(routine) == ()


def test_paused_error_and_spent(agent, clock):
    assert store.state_of(make(agent, status=RoutineStatus.PAUSED)) == "paused"
    errored = make(agent, status=RoutineStatus.ERROR, last_error="boom")
    assert store.state_of(errored) == "error"
    assert store.offered_moves(errored) == ("pause", "resume")
    assert store.state_of(make(agent, next_run_at=None)) == "spent"
    assert store.offered_moves(make(agent, status=RoutineStatus.PAUSED)) == ("resume",)
