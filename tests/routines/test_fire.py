from __future__ import annotations

import datetime as dt

import pytest

from board import store as board_store
from core.models import Event
from routines import fire, store
from routines.models import Routine, RoutineFire
from routines.ticker import Ticker

pytestmark = pytest.mark.django_db(transaction=True)


def make(agent, spec="0 * * * *", **kw):
    return store.create_routine(agent_id=agent.id, team=agent.team_id, cron_spec=spec, **kw)


def kinds(team: str) -> list[str]:
    return list(
        Event.objects.filter(team_id=team, kind__startswith="routine_").values_list(
            "kind", flat=True
        )
    )


def test_a_due_routine_fires_through_django_q_and_re_arms(agent, clock):
    routine = make(agent, task_template={"title": "Morning briefing", "priority": 3})
    ticker = Ticker()
    assert ticker.tick().claimed == []  # not due yet
    assert ticker.arm_delay_ms() == 3_600_000 or ticker.arm_delay_ms() == 60_000
    clock.shift(dt.timedelta(hours=1))
    report = ticker.tick()
    assert report.queued == [routine.id] and report.claimed == [routine.id]
    row = Routine.objects.get(pk=routine.id)
    slot = store.now_ms()
    assert row.status == "idle" and row.next_run_at == slot + 3_600_000
    assert row.last_run_at == slot
    fired = RoutineFire.objects.get(routine=row)
    assert (fired.slot_at, fired.outcome) == (slot, "dispatched")
    task = board_store.get_task(fired.task_id)
    assert task.scheduled_by == "clawboo" and task.title == "Morning briefing"
    # django-q2 runs synchronously in tests: the executor already worked the task.
    assert task.status == "done" and task.assignee_agent_id == "ada"
    assert board_store.list_executions(task.id).get().status == "succeeded"
    assert task.priority == 3 and task.metadata["routine_id"] == routine.id
    assert kinds(agent.team_id) == ["routine_fired", "routine_dispatched", "routine_completed"]


def test_arm_delay_is_clamped_to_a_minute(agent, clock):
    ticker = Ticker()
    assert ticker.arm_delay_ms() == 60_000  # nothing scheduled
    make(agent, "*/5 * * * *")
    clock.shift(dt.timedelta(minutes=4, seconds=30))
    assert ticker.arm_delay_ms() == 30_000
    clock.shift(dt.timedelta(minutes=10))
    assert ticker.arm_delay_ms() == 0


def test_catch_up_after_three_hours_of_downtime(agent, clock):
    latest = make(agent)
    skip = make(agent, catch_up="skip")
    clock.shift(dt.timedelta(hours=3, minutes=10))
    Ticker().tick()
    assert RoutineFire.objects.filter(routine_id=latest.id).count() == 1
    assert RoutineFire.objects.filter(routine_id=skip.id).count() == 0
    for rid in (latest.id, skip.id):
        row = Routine.objects.get(pk=rid)
        assert row.status == "idle"
        assert row.next_run_at == store.now_ms() + 50 * 60_000  # the 12:00 slot


def test_a_failed_recurring_fire_halts_in_error_until_resumed(agent, clock, monkeypatch):
    failing = make(agent)
    healthy = make(agent)

    def explode(routine, agent, task, ticket):
        if routine.id == failing.id:
            raise RuntimeError("adapter exploded")

    monkeypatch.setattr(fire, "run_executor", explode)
    clock.shift(dt.timedelta(hours=1))
    assert sorted(Ticker().tick().claimed) == sorted([failing.id, healthy.id])
    row = Routine.objects.get(pk=failing.id)
    assert (row.status, row.next_run_at, row.last_error) == ("error", None, "adapter exploded")
    assert Routine.objects.get(pk=healthy.id).status == "idle"  # one failure aborts nothing else
    assert "routine_error" in kinds(agent.team_id)
    clock.shift(dt.timedelta(hours=5))
    assert Ticker().tick().claimed == [healthy.id]  # the errored row stays parked
    assert store.resume_routine(failing.id).next_run_at > store.now_ms()


def test_a_spent_one_shot_goes_quiet(agent, clock):
    routine = make(agent, "once@2030-01-07T09:00Z")
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert (row.status, row.next_run_at) == ("idle", None)
    clock.shift(dt.timedelta(days=2))
    assert Ticker().tick().queued == []
    assert RoutineFire.objects.filter(routine=row).count() == 1


def test_a_bound_one_shot_fires_its_task_and_a_lost_claim_is_success(agent, clock, settings):
    settings.CLAWBOO_LEASE_MAX_MS = 4 * 3_600_000
    task = board_store.create_task(title="Release notes", team=agent.team_id).task
    routine = make(agent, "once@2030-01-07T09:00Z", task_template={"team_task_id": task.id})
    # The work is already happening (a lease that outlives the wait).
    board_store.claim(task.id, "someone-else", "command", lease_ms=4 * 3_600_000)
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert row.status == "idle" and row.last_error is None
    fired = RoutineFire.objects.get(routine=row)
    assert (fired.outcome, fired.task_id) == ("satisfied", task.id)
    assert board_store.get_task(task.id).assignee_agent_id == "someone-else"


def test_a_templates_touches_reach_each_fires_task(agent, clock):
    routine = make(agent, task_template={"touches": ["src/**", "docs"]})
    task = fire.materialize_task(Routine.objects.get(pk=routine.id), 1_000)
    assert (task.touches, task.scope) == (["src/**", "docs"], ["src/**", "docs"])


def test_a_fire_whose_task_overlaps_work_in_flight_is_satisfied(agent, clock, settings):
    settings.CLAWBOO_LEASE_MAX_MS = 4 * 3_600_000
    busy = board_store.create_task(title="busy", team=agent.team_id, touches=["src/**"]).task
    board_store.claim(busy.id, "someone-else", "command", lease_ms=4 * 3_600_000)
    task = board_store.create_task(title="t", team=agent.team_id, touches=["src/a.py"]).task
    routine = make(agent, "once@2030-01-07T09:00Z", task_template={"team_task_id": task.id})
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert row.status == "idle" and row.last_error is None
    fired = RoutineFire.objects.get(routine=row)
    assert (fired.outcome, fired.task_id) == ("satisfied", task.id)
    assert board_store.get_task(task.id).status == "todo"  # it waits on the board


def test_a_bound_task_that_is_done_errors_the_fire(agent, clock):
    task = board_store.create_task(title="t", team=agent.team_id).task
    routine = make(agent, "once@2030-01-07T09:00Z", task_template={"team_task_id": task.id})
    got = board_store.claim(task.id, "bob", "command")
    board_store.complete(task.id, ticket=got.ticket)
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert row.status == "error" and "no longer claimable" in row.last_error


def test_the_claim_phase_never_retries_a_lost_row(agent, clock):
    routine = make(agent)
    clock.shift(dt.timedelta(hours=1))
    first, second = Ticker(enqueue=lambda rid: None), Ticker(enqueue=lambda rid: None)
    assert first.due_pass() == [routine.id]
    assert second.due_pass() == []
    assert first.claim_one(routine.id) is True
    assert second.claim_one(routine.id) is False


def test_a_fire_re_run_for_the_same_slot_never_fires_twice(agent, clock):
    routine = make(agent)
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    slot = store.now_ms()
    # Simulate a second claim of the same slot (another ticker, a replayed queue entry).
    Routine.objects.filter(pk=routine.id).update(status="claimed", fire_slot=slot)
    assert fire.run_fire(routine.id) == []
    assert RoutineFire.objects.filter(routine_id=routine.id).count() == 1


def test_a_routine_whose_agent_became_a_person_halts_saying_why(agent, clock, monkeypatch):
    routine = make(agent)
    agent.participant_kind = "human"
    agent.save()
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert row.status == "error" and "is a person" in row.last_error
    assert "routed to them" in row.last_error


def test_a_ticks_fires_are_enqueued_through_async_task_after_each_claim_commits(
    agent, clock, monkeypatch
):
    """With the ORM broker each claimed row becomes one OrmQ row, enqueued by
    django-q2's async_task once the claim has committed (seen from the enqueue:
    the row is already ``claimed`` in the database)."""
    from django_q.conf import Conf
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    from routines import ticker as ticker_module

    monkeypatch.setattr(Conf, "SYNC", False)
    seen: list[str] = []

    def enqueue(routine_id: str) -> None:
        seen.append(Routine.objects.get(pk=routine_id).status)
        ticker_module.enqueue_fire(routine_id)

    first, second = make(agent), make(agent, spec="30 * * * *")
    clock.shift(dt.timedelta(hours=1))
    report = Ticker(enqueue=enqueue).tick()
    assert seen == ["claimed", "claimed"]
    assert sorted(report.claimed) == sorted([first.id, second.id])
    payloads = [SignedPackage.loads(q.payload) for q in OrmQ.objects.all()]
    assert sorted(p["args"][0] for p in payloads) == sorted([first.id, second.id])
    assert {p["func"] for p in payloads} == {"routines.fire.run_fire"}
    assert all(p["name"] == f"routine-{p['args'][0]}" and p["kwargs"] == {} for p in payloads)
    statuses = set(Routine.objects.values_list("status", flat=True))
    assert statuses == {"claimed"}  # queued for a worker, not run inline


def test_a_templates_model_is_the_model_each_fires_run_is_given(team, clock, tmp_path, monkeypatch):
    # The template's model (the routine form's "Model") used to reach the task's
    # metadata and stop there: a one-shot fire ran the agent's own model.
    from core import registry
    from tests.runtimes.stand_ins import install_stand_in, real_lines

    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    claude = install_stand_in(
        bin_dir, "claude", stdout=real_lines("claude-code/run1-write-file.stream.jsonl")
    )
    cody = registry.create_agent(
        id="cody",
        display_name="Cody",
        team=team,
        runtime="claude-code",
        settings={"model": "claude-opus-4-1"},
    )
    make(cody, task_template={"title": "Digest", "kind": "research", "model": "claude-haiku-4-5"})
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    argv = claude.call()["argv"]
    assert argv[argv.index("--model") + 1] == "claude-haiku-4-5"
    # A task without a model of its own runs the agent's.
    board_store.create_task(title="plain", team=team, file_mutating=False)
    from executor.runner import Executor

    Executor("cody").work_once()
    argv = claude.call()["argv"]
    assert argv[argv.index("--model") + 1] == "claude-opus-4-1"


def test_a_routine_firing_into_a_paused_agent_leaves_one_task_waiting_not_one_per_slot(
    agent, clock
):
    # Every slot used to mint a fresh task beside the ones still waiting: a routine
    # every hour into an agent paused over a weekend left 48 tasks (48 approval
    # requests, with approval_required) to be run one after another once resumed --
    # the storm its catch-up policy exists to prevent.
    board_store.pause_agent(agent.id, "on holiday", by="ops")
    routine = make(agent, task_template={"title": "Digest"})
    for _ in range(4):
        clock.shift(dt.timedelta(hours=1))
        Ticker().tick()
    fires = list(RoutineFire.objects.filter(routine_id=routine.id).order_by("slot_at"))
    assert len(fires) == 4
    assert {f.outcome for f in fires} == {"satisfied"}
    assert len({f.task_id for f in fires}) == 1
    waiting = board_store.get_task(fires[0].task_id)
    assert waiting.status == "todo"
    assert Routine.objects.get(pk=routine.id).status == "idle"
    # Resumed, the agent works the one task; the next slot mints a fresh one.
    board_store.resume_agent(agent.id, by="ops")
    from executor.runner import Executor

    Executor(agent.id).work_once()
    assert board_store.get_task(waiting.id).status == "done"
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    latest = RoutineFire.objects.filter(routine_id=routine.id).order_by("-slot_at").first()
    assert latest.task_id != waiting.id and latest.outcome == "dispatched"


def test_a_routine_whose_agent_is_paused_is_not_run_by_another_agent_of_its_team(agent, clock):
    # The fire's task was unrouted: with its agent paused (its breaker tripped, say)
    # whichever agent of the team was free took it, every slot, so the routine ran
    # on without its agent and a new task was minted (and worked) each slot.
    from core import registry
    from executor.runner import Executor

    registry.create_agent(
        id="bea", display_name="Bea", team=agent.team_id, runtime="command",
        settings={"argv": ["true"]},
    )  # fmt: skip
    board_store.pause_agent(agent.id, "its breaker tripped", by="breaker")
    routine = make(agent, task_template={"title": "Digest", "kind": "research"})
    for _ in range(3):
        clock.shift(dt.timedelta(hours=1))
        Ticker().tick()
        assert Executor("bea").work_once().outcome == "idle"
    fires = RoutineFire.objects.filter(routine_id=routine.id)
    assert len({f.task_id for f in fires}) == 1
    waiting = board_store.get_task(fires[0].task_id)
    assert (waiting.status, waiting.as_dict()["route"]["agent"]) == ("todo", agent.id)


def test_a_routine_whose_last_task_is_blocked_halts_until_a_person_resumes_it(
    agent, clock, monkeypatch
):
    # A one-shot fire is "dispatched" before its run ends: a run that ended blocked
    # (failed hard, at its ceiling, with debt) left the routine firing on, minting --
    # and paying for -- one more blocked task every slot.
    monkeypatch.setattr(fire, "run_executor", lambda *args: None)  # the run is ours
    routine = make(agent, task_template={"title": "Digest"})
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    first = RoutineFire.objects.get(routine_id=routine.id).task_id
    board_store.block(first, "stopped at its ceiling")
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert row.status == "error" and row.next_run_at is None
    assert f"{first!r}, is blocked: stopped at its ceiling" in row.last_error
    tasks = set(RoutineFire.objects.filter(routine_id=routine.id).values_list("task_id", flat=True))
    assert tasks == {first, None}  # no second task
    # A person resumes it (the blocked task left as it is): it fires afresh.
    resumed = store.resume_routine(routine.id)
    clock.shift(dt.timedelta(milliseconds=resumed.next_run_at - store.now_ms()))
    Ticker().tick()
    latest = RoutineFire.objects.filter(routine_id=routine.id).order_by("-slot_at").first()
    assert latest.outcome == "dispatched" and latest.task_id not in (first, None)
    assert Routine.objects.get(pk=routine.id).status == "idle"


def test_a_fire_after_a_denied_approval_asks_again_with_a_fresh_task(agent, clock):
    # Folding a fire into the waiting task stops at a person's "no": a denied task
    # waits to be cancelled, and the routine's next slot is asked for afresh.
    routine = make(agent, task_template={"title": "Deploy", "approval_required": True})
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    first = RoutineFire.objects.get(routine_id=routine.id).task_id
    board_store.decide_approval(first, "deny", by="ops")
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    latest = RoutineFire.objects.filter(routine_id=routine.id).order_by("-slot_at").first()
    assert latest.task_id != first
    assert board_store.get_task(latest.task_id).approval_state == "required"
