from __future__ import annotations

import datetime as dt
import itertools

import pytest

from board import store as board_store
from core import storage
from core.errors import ValidationFailed
from routines import store
from routines.errors import (
    BoundRecurringScheduleError,
    DuplicateFiringOwnerError,
    HumanParticipantRefused,
    IllegalRoutineTransition,
    RoutineBusy,
)
from routines.models import TRANSITIONS, Routine, RoutineStatus
from routines.ticker import Ticker

STATUSES = list(RoutineStatus.values)
pytestmark = pytest.mark.django_db


def make(agent, spec="0 * * * *", **kw):
    return store.create_routine(agent_id=agent.id, team=agent.team_id, cron_spec=spec, **kw)


def force_status(routine_id: str, status: str) -> None:
    # Test setup only: put a row in a given state without walking the machine.
    Routine.objects.filter(pk=routine_id).update(status=status)


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(STATUSES, STATUSES)))
def test_every_ledger_move_is_checked_against_the_table(agent, clock, src, dst):
    routine = make(agent)
    force_status(routine.id, src)
    legal = src == dst or dst in TRANSITIONS[src]

    def run():
        return store.move(store.lock_routine(routine.id), dst)

    if legal:
        assert storage.write(run).status == dst
    else:
        with pytest.raises(IllegalRoutineTransition) as info:
            storage.write(run)
        assert info.value.code == "illegal_transition"
        assert info.value.extra["allowed"] == list(TRANSITIONS[src])
        assert Routine.objects.get(pk=routine.id).status == src


def test_create_fills_template_defaults_and_arms_after_now(agent, clock):
    routine = make(agent, timezone="Europe/Berlin")
    assert routine.task_template == {
        "title": "Scheduled team task",
        "description": "",
        "kind": "code",
        "priority": 0,
        "repository": None,
        "repo_path": None,
        "model": None,
        "max_node_cents": None,
        "team_task_id": None,
        "verify_cmd": None,
        "approval_required": False,
        "touches": None,
    }
    assert routine.status == "idle" and routine.catch_up == "latest"
    assert routine.next_run_at == store.now_ms() + 3_600_000  # 09:00, never 08:00 (now)
    assert routine.tenant_id is None


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cron_spec": "nope"}, "cron_spec"),
        ({"timezone": "Nowhere/Land"}, "timezone"),
        ({"cron_spec": "once@2020-01-01T00:00Z"}, "cron_spec"),
        ({"task_template": {"kind": "poetry"}}, "task_template.kind"),
        ({"task_template": {"bogus": 1}}, "task_template.bogus"),
        ({"task_template": {"title": ""}}, "task_template.title"),
        ({"task_template": {"touches": ["../x"]}}, "task_template.touches[0]"),
        ({"catch_up": "sometimes"}, "catch_up"),
        ({"agent_id": "ghost"}, "agent_id"),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(agent, clock, kwargs, field):
    body = {"agent_id": agent.id, "team": agent.team_id, "cron_spec": "0 * * * *", **kwargs}
    with pytest.raises(ValidationFailed) as info:
        store.create_routine(**body)
    assert info.value.field == field
    assert Routine.objects.count() == 0


def test_a_recurring_spec_bound_to_a_task_is_refused(agent, clock):
    task = board_store.create_task(title="t", team=agent.team_id).task
    with pytest.raises(BoundRecurringScheduleError) as info:
        make(agent, task_template={"team_task_id": task.id})
    assert info.value.code == "bound_recurring"


def test_ownership_conflict_on_a_task_owned_elsewhere(agent, clock):
    foreign = board_store.create_task(title="t", team=agent.team_id, scheduled_by="openclaw").task
    with pytest.raises(DuplicateFiringOwnerError) as info:
        make(agent, "once@2030-01-08T00:00Z", task_template={"team_task_id": foreign.id})
    assert info.value.code == "ownership_conflict"
    mine = board_store.create_task(title="m", team=agent.team_id).task
    make(agent, "once@2030-01-08T00:00Z", task_template={"team_task_id": mine.id})
    with pytest.raises(DuplicateFiringOwnerError):
        make(agent, "once@2030-01-09T00:00Z", task_template={"team_task_id": mine.id})
    assert Routine.objects.count() == 1


def test_a_human_participant_is_refused_saying_what_to_do_instead(human_agent, clock):
    with pytest.raises(HumanParticipantRefused) as info:
        make(human_agent)
    assert info.value.code == "validation_error" and info.value.field == "agent_id"
    assert "routed to them" in info.value.detail
    assert Routine.objects.count() == 0


def test_pause_resume_and_run_now_go_through_the_ledger(agent, clock):
    routine = make(agent)
    ticker = Ticker(enqueue=lambda rid: None)
    assert store.pause_routine(routine.id).status == "paused"
    with pytest.raises(IllegalRoutineTransition):
        store.run_routine_now(routine.id)
    clock.shift(dt.timedelta(hours=5))
    assert ticker.due_pass() == []  # a paused row never fires
    resumed = store.resume_routine(routine.id)
    assert resumed.status == "idle"
    assert resumed.next_run_at > store.now_ms()  # no fire for a slot before the resume
    assert ticker.due_pass() == []
    assert store.run_routine_now(routine.id).status == "queued"
    assert Routine.objects.get(pk=routine.id).fire_slot == store.now_ms()
    with pytest.raises(RoutineBusy):
        store.update_routine(routine.id, {"cron_spec": "*/5 * * * *"})


def test_an_error_row_never_fires_until_resumed(agent, clock):
    routine = make(agent)
    force_status(routine.id, "error")
    clock.shift(dt.timedelta(hours=3))
    assert Ticker(enqueue=lambda rid: None).due_pass() == []
    assert store.resume_routine(routine.id).status == "idle"


def test_update_re_arms_and_validates(agent, clock):
    routine = make(agent)
    updated = store.update_routine(routine.id, {"cron_spec": "*/5 * * * *", "catch_up": "skip"})
    assert updated.next_run_at == store.now_ms() + 300_000
    assert updated.catch_up == "skip"
    with pytest.raises(ValidationFailed):
        store.update_routine(routine.id, {"cron_spec": "once@2001-01-01T00:00Z"})
    with pytest.raises(ValidationFailed):
        store.update_routine(routine.id, {"status": "idle"})


def test_every_write_pokes_the_ticker(agent, clock):
    before = store.poke_seq()
    routine = make(agent)
    store.pause_routine(routine.id)
    store.resume_routine(routine.id)
    store.delete_routine(routine.id)
    assert store.poke_seq() == before + 4
