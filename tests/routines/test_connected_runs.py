"""A connected (OpenClaw) routine fire is a run like any other: its execution is opened
with the claim and closed with its end, its usage is priced and recorded as the
gateway streams it (the task's cost, its tree's and every budget over it), its
ceiling and the cap budgets over it stop it (GOVERNANCE §3), and a failed or
timed-out fire counts toward its agent's breaker (GOVERNANCE §2).

The gateway is the stand-in speaking the real gateway's frames (fake-model: 4 $ a
million output tokens by the shipped price table, so 25,000 tokens are 10¢)."""

from __future__ import annotations

import datetime as dt

import pytest

from board import store as board_store
from board.models import ExecutionProcess, TaskComment
from board.store import spend
from core import registry
from routines import store
from routines.models import Routine, RoutineFire
from routines.ticker import Ticker
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db(transaction=True)


def routine_of(agent_id: str, team: str, template: dict | None = None) -> Routine:
    return store.create_routine(
        agent_id=agent_id,
        team=team,
        cron_spec="0 * * * *",
        task_template={"kind": "chat", **(template or {})},
    )


def fire(agent_id: str, team: str, clock, template: dict | None = None) -> RoutineFire:
    return fire_routine(routine_of(agent_id, team, template), clock)


def fire_routine(routine: Routine, clock) -> RoutineFire:
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    return RoutineFire.objects.get(routine_id=routine.id)


def budget(team: str, scope: str, scope_id: str, mode: str = "warn", limit: int = 10_000):
    fields = {"scope": scope, "scope_id": scope_id, "window": "day", "mode": mode}
    return spend.create_budget(team, {**fields, "limit_cents": limit})


def test_a_connected_fire_records_its_run_and_its_cost_like_any_run(
    gateway_fake, openclaw_agent, team, clock, settings
):
    # The model the gateway names, priced high enough that 120 + 7 tokens cost 13¢.
    rates = {"in": 100_000, "out": 100_000, "cache_read": 0, "cache_write": 0}
    settings.CLAWBOO_MODEL_PRICES = {**settings.CLAWBOO_MODEL_PRICES, "fake-model": rates}
    gateway_fake.usage_every_s = 0.05
    gateway_fake.usage_tokens_per_turn = 10
    gateway_fake.agent_delay_s = 0.3
    routine = routine_of(openclaw_agent.id, team)
    budgets = [
        budget(team, "team", team),
        budget(team, "agent", openclaw_agent.id),
        budget(team, "routine", routine.id),
    ]

    fired = fire_routine(routine, clock)

    assert fired.outcome == "completed"
    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.agent_id, execution.runtime, execution.attempt) == (
        "succeeded",
        openclaw_agent.id,
        "openclaw",
        1,
    )
    assert execution.finished_at is not None and execution.error_class == ""
    # The final answer's usage replaced what the run streamed.
    assert (execution.tokens_in, execution.tokens_out) == (120, 7)
    assert (execution.cost_status, execution.cost_cents) == ("estimated", 13)
    task = board_store.get_task(fired.task_id)
    assert task.status == "done"
    assert task.output == {"summary": "done", "run_id": f"clawboo-{routine.id}-{fired.slot_at}"}
    assert (task.cost_cents, task.tree_cost_cents) == (13, 13)
    for covering in budgets:
        assert spend.get_budget(covering.pk).spent_cents == 13
    # Visible on the API like any run of the task.
    api = make_client("ada-user", teams=(team,))
    [listed] = api.get(f"/api/board/tasks/{task.id}/executions").json()
    assert (listed["status"], listed["runtime"]) == ("succeeded", "openclaw")
    assert api.get(f"/api/board/tasks/{task.id}").json()["cost"]["cents"] == 13


def test_a_connected_fire_that_reaches_its_ceiling_is_stopped_and_its_task_blocked(
    gateway_fake, openclaw_agent, team, clock, settings
):
    settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = 10_000  # the ceiling comes first
    # 25,000 output tokens (10¢) a turn, a turn every 0.1 s, until aborted.
    gateway_fake.agent_delay_s = None
    gateway_fake.usage_every_s = 0.1
    gateway_fake.usage_tokens_per_turn = 25_000

    fired = fire(openclaw_agent.id, team, clock, {"max_node_cents": 30})

    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.error_class) == ("cancelled", "budget")
    # Stopped at the report that reached 30¢, give or take a turn streamed before the
    # abort reached the gateway.
    assert 30 <= execution.cost_cents <= 30 + 2 * 10
    assert all(run.status == "aborted" for run in gateway_fake.runs.values())
    task = board_store.get_task(fired.task_id)
    assert task.status == "blocked" and task.cost_cents == execution.cost_cents
    (comment,) = TaskComment.objects.filter(task_id=task.id)
    assert "ceiling of 30¢" in comment.body
    # Never retried by itself: the routine halts until a person looks.
    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error" and "ceiling of 30¢" in routine.last_error
    assert (fired.outcome, fired.error) == ("error", routine.last_error)


def test_a_cap_budget_a_connected_fire_spends_stops_it_and_holds_later_claims(
    gateway_fake, openclaw_agent, team, clock, settings
):
    settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = 10_000  # the budget comes first
    cap = budget(team, "agent", openclaw_agent.id, mode="cap", limit=15)
    gateway_fake.agent_delay_s = None
    gateway_fake.usage_every_s = 0.1
    gateway_fake.usage_tokens_per_turn = 25_000

    fired = fire(openclaw_agent.id, team, clock)

    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.error_class) == ("cancelled", "budget")
    assert execution.cost_cents >= 20  # paused at the second report, stopped there
    assert all(run.status == "aborted" for run in gateway_fake.runs.values())
    assert spend.get_budget(cap.pk).as_dict(board_store.now())["status"] == "paused"
    # Its task waits on the board, held by the pause, as a claim refused for it would.
    assert board_store.get_task(fired.task_id).status == "todo"
    assert fired.outcome == "satisfied"
    assert Routine.objects.get(pk=fired.routine_id).status == "idle"
    other = board_store.create_task(title="next", team=team, file_mutating=False).task
    assert board_store.claim(other.id, openclaw_agent.id, "openclaw").outcome == "budget_paused"


def test_a_timed_out_connected_fire_is_closed_timed_out_and_trips_the_breaker(
    gateway_fake, openclaw_agent, team, clock, settings
):
    settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = 300
    settings.CLAWBOO_BREAKER_FAILURES = 1
    gateway_fake.agent_delay_s = None  # hangs until aborted

    fired = fire(openclaw_agent.id, team, clock)

    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.error_class) == ("timed_out", "timeout")
    assert execution.error.startswith("openclaw run timed out after 0.3s; aborted in the gateway")
    assert board_store.get_task(fired.task_id).status == "todo"  # released, as before
    agent = registry.get_agent(openclaw_agent.id)
    assert agent.state == "paused" and agent.state_reason.startswith("breaker: 1 consecutive")


def test_a_failed_connected_fire_is_closed_failed_and_counted_by_the_breaker(
    gateway_fake, team, clock
):
    registry.create_agent(
        id="claw2",
        display_name="Claw",
        team=team,
        runtime="openclaw",
        settings={"agent_id": "nosuchagent"},  # the gateway refuses the run
    )

    fired = fire("claw2", team, clock)

    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error"
    assert routine.last_error.startswith("openclaw dispatch failed: invalid agent params")
    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert execution.status == "failed" and execution.error_class
    assert execution.error.startswith("invalid agent params")
    assert board_store.get_task(fired.task_id).status == "todo"  # released, as before
    assert registry.get_agent("claw2").breaker_failures == 1


def test_a_fire_that_fails_around_its_run_closes_the_run_and_releases_its_task(
    gateway_fake, openclaw_agent, team, clock, settings, monkeypatch
):
    from executor import local

    def broken(*args, **kwargs):
        raise RuntimeError("the board is broken")

    monkeypatch.setattr(local.spending, "record", broken)
    settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = 10_000
    gateway_fake.agent_delay_s, gateway_fake.usage_every_s = None, 0.05

    fired = fire(openclaw_agent.id, team, clock)

    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.error) == ("failed", "RuntimeError: the board is broken")
    assert board_store.get_task(fired.task_id).status == "todo"
    assert all(run.status == "aborted" for run in gateway_fake.runs.values())  # not left running
    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error" and "the board is broken" in routine.last_error


def test_a_fire_of_an_agent_changed_without_an_operator_runs_nothing(
    gateway_fake, openclaw_agent, team, clock
):
    from core.models import Agent

    # Changed around the registry (a raw UPDATE, an old row, a restored backup).
    Agent.objects.filter(pk=openclaw_agent.id).update(settings={"agent_id": "main"})

    fired = fire(openclaw_agent.id, team, clock)

    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error" and "not approved by an operator" in routine.last_error
    assert [r for r in gateway_fake.requests if r["method"] == "agent"] == []
    assert board_store.get_task(fired.task_id).status == "todo"  # never claimed
    assert not ExecutionProcess.objects.filter(task_id=fired.task_id).exists()


def test_a_fire_of_a_task_past_the_delegation_ceiling_runs_nothing(
    gateway_fake, openclaw_agent, team, clock, monkeypatch
):
    root = board_store.create_task(title="root", team=team, file_mutating=False).task
    child = board_store.create_task(
        title="child", team=team, parent_task_id=root.id, file_mutating=False
    ).task
    deep = board_store.create_task(
        title="deep", team=team, parent_task_id=child.id, file_mutating=False
    ).task
    monkeypatch.setattr("board.ceilings.MAX_DEPTH", 1)
    bound = store.create_routine(
        agent_id=openclaw_agent.id,
        team=team,
        cron_spec="once@2030-01-07T09:00Z",
        task_template={"kind": "chat", "team_task_id": deep.id},
    )

    fired = fire_routine(bound, clock)

    # Refused as the executor refuses it (one rule: executor.runner.dispatch_refusal).
    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error"
    assert "past the delegation ceiling 1" in routine.last_error
    assert [r for r in gateway_fake.requests if r["method"] == "agent"] == []
    assert board_store.get_task(deep.id).status == "todo"  # never claimed
    assert not ExecutionProcess.objects.filter(task_id=deep.id).exists()


def test_a_fire_whose_run_cannot_be_set_up_releases_its_task_and_is_counted_by_the_breaker(
    gateway_fake, openclaw_agent, team, clock, monkeypatch
):
    from routines import fire as fire_path

    def no_room(*args, **kwargs):
        raise OSError("No space left on the server's disk")

    monkeypatch.setattr(fire_path, "workspace", no_room)

    fired = fire(openclaw_agent.id, team, clock)

    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert execution.status == "failed" and "No space left" in execution.error
    assert board_store.get_task(fired.task_id).status == "todo"
    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error" and "No space left" in routine.last_error
    # One rule with the local executor (executor.runner.settle_crash): a host whose
    # every run fails before it starts is stopped by the breaker, not by each task.
    assert registry.get_agent(openclaw_agent.id).breaker_failures == 1


def test_a_fire_that_fails_after_its_failed_run_was_counted_counts_it_once(
    gateway_fake, team, clock, monkeypatch
):
    """The fire's failed run is closed and counted, then the release of its task
    fails: the crash path (executor.runner.settle_crash) releases it and counts
    nothing more (it counted the run twice)."""
    registry.create_agent(
        id="claw4", display_name="Claw", team=team, runtime="openclaw",
        settings={"agent_id": ["main"]},
    )  # fmt: skip
    release = board_store.release
    calls = []

    def release_fails_once(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise OSError("No space left on the server's disk")
        return release(*args, **kwargs)

    monkeypatch.setattr(board_store, "release", release_fails_once)

    fired = fire("claw4", team, clock)

    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.error_class) == ("failed", "environment")
    assert board_store.get_task(fired.task_id).status == "todo"
    assert len(calls) == 2
    assert registry.get_agent("claw4").breaker_failures == 1


def test_a_fire_of_an_agent_with_bad_openclaw_settings_is_a_failed_run(gateway_fake, team, clock):
    registry.create_agent(
        id="claw3", display_name="Claw", team=team, runtime="openclaw",
        settings={"agent_id": ["main"]},
    )  # fmt: skip

    fired = fire("claw3", team, clock)

    why = "bad openclaw settings: agent_id must be a string, got list"
    (execution,) = ExecutionProcess.objects.filter(task_id=fired.task_id)
    assert (execution.status, execution.error_class, execution.error) == (
        "failed",
        "environment",
        why,
    )
    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error" and routine.last_error.startswith(why)
    assert [r for r in gateway_fake.requests if r["method"] == "agent"] == []  # nothing was sent
    assert board_store.get_task(fired.task_id).status == "todo"
    assert registry.get_agent("claw3").breaker_failures == 1
