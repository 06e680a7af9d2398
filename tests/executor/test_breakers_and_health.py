"""A broken agent never eats the queue: preflight health, error classes, the breaker
(GOVERNANCE §2), on real subprocesses."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from django.db import OperationalError

from board import store
from board.models import ExecutionProcess, Task
from core import registry
from core.models import Agent
from executor import breakers, health
from executor.runner import Executor
from executor.runtimes import RunResult
from ops import notify
from ops.models import NotificationDelivery


def tasks(n: int) -> list[str]:
    return [store.create_task(title=f"t{i}", file_mutating=False).task.id for i in range(n)]


@pytest.mark.django_db(transaction=True)
def test_an_agent_whose_runs_exit_3_is_paused_after_n_failures_with_one_notification(
    settings,
):
    settings.CLAWBOO_BREAKER_FAILURES = 3
    notify.create_channel("default", "hook", "webhook", url="http://127.0.0.1:9/hook")
    registry.create_agent(
        id="broken",
        display_name="Broken",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    )
    ids = tasks(6)
    executor = Executor("broken")

    reports = [executor.work_once() for _ in range(8)]

    assert [r.outcome for r in reports[:3]] == ["failed"] * 3
    assert all(r.outcome == "refused" for r in reports[3:])
    agent = Agent.objects.get(pk="broken")
    assert agent.state == "paused" and "3 consecutive failed runs" in agent.state_reason
    assert agent.paused_by == "breaker" and agent.paused_at is not None
    touched = Task.objects.filter(pk__in=ids, attempts__gt=0)
    assert touched.count() <= settings.CLAWBOO_BREAKER_FAILURES
    assert set(Task.objects.filter(pk__in=ids).values_list("status", flat=True)) == {"todo"}
    assert set(ExecutionProcess.objects.values_list("error_class", flat=True)) == {"unknown"}
    deliveries = list(NotificationDelivery.objects.values_list("reason", flat=True))
    assert deliveries == ["agent_paused"]
    # Paused by any door: the API's claim answers agent_paused.
    assert store.claim(ids[-1], "broken").outcome == "agent_paused"

    registry.resume_agent("broken", by="op")
    resumed = Agent.objects.get(pk="broken")
    assert (resumed.state, resumed.breaker_failures) == ("active", 0)


@pytest.mark.django_db
def test_pausing_hands_back_claimed_but_unstarted_work_to_todo(default_team):
    registry.create_agent(
        id="ada", display_name="Ada", team="default", runtime="command", max_concurrent=3
    )
    first, second = tasks(2)
    assert store.claim(first, "ada").ok and store.claim(second, "ada").ok
    store.open_execution(second, store.ticket_of(store.get_task(second)), runtime="command")

    agent, handed_back = store.pause_agent("ada", "going home", by="op")

    assert handed_back == [first] and agent.state_reason == "going home"
    assert store.get_task(first).status == "todo"
    assert store.get_task(second).status == "in_progress"  # started: it runs on
    assert store.pause_agent("ada", "again", by="op")[1] == []


@pytest.mark.django_db
def test_a_run_its_claim_opened_before_the_breaker_paused_its_agent_is_refused_as_breaker(
    default_team, tmp_path: Path
):
    # The claim opens the run in its own write, so the pause (the breaker tripping on
    # another run of the agent meanwhile) finds it started and leaves it. The executor
    # ran it all the same, for a paused agent; now it refuses it as the pause would
    # have: not run, closed with the documented error_class "breaker" (GOVERNANCE
    # §2), not counted, and the task back in todo.
    marker = tmp_path / "ran"
    registry.create_agent(
        id="ada",
        display_name="Ada",
        team="default",
        runtime="command",
        max_concurrent=2,
        settings={"argv": [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]},
    )
    (task_id,) = tasks(1)
    claimed = store.claim_next("ada", runtime="command", pid=1)
    assert claimed is not None and claimed.ok and claimed.execution is not None
    assert store.pause_agent("ada", "breaker: 3 consecutive failed runs", by="breaker")[1] == []

    report = Executor("ada").run_claimed(task_id, claimed.ticket, execution_id=claimed.execution.id)

    assert report.outcome == "refused" and "agent is paused" in (report.error or "")
    assert not marker.exists()
    run = ExecutionProcess.objects.get(pk=claimed.execution.id)
    assert (run.status, run.error_class) == ("cancelled", "breaker")
    assert not breakers.counts(run.error_class)
    assert store.get_task(task_id).status == "todo"
    assert Agent.objects.get(pk="ada").breaker_failures == 0


@pytest.mark.django_db
def test_an_agent_whose_binary_is_missing_claims_nothing_until_it_is_installed(
    default_team, settings, tmp_path: Path
):
    settings.CLAWBOO_HEALTH_PROBE_MS = 200
    binary = tmp_path / "bin" / "do-work"
    registry.create_agent(
        id="ada",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": [str(binary)]},
    )
    ids = tasks(5)
    executor = Executor("ada")

    refused = executor.work_once()

    # An absolute argv[0] is not looked up on PATH: the detail says the file is missing.
    assert refused.outcome == "refused" and f"no such file: {binary}" in (refused.error or "")
    agent = Agent.objects.get(pk="ada")
    assert agent.dispatch_state == "unhealthy" and "no such file" in agent.health_detail
    assert store.claim(ids[0], "ada").outcome == "agent_paused"
    assert set(Task.objects.values_list("status", flat=True)) == {"todo"}

    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\nprint('done')\n")
    binary.chmod(0o755)
    deadline = time.monotonic() + 10
    report = executor.work_once()
    while report.outcome == "refused" and time.monotonic() < deadline:
        report = executor.work_once()
    assert report.outcome == "succeeded"
    assert Agent.objects.get(pk="ada").health_ok is True


@pytest.mark.django_db
def test_a_cli_that_does_not_answer_its_version_probe_is_unhealthy(
    default_team, settings, tmp_path: Path
):
    settings.CLAWBOO_HEALTH_VERSION_PROBE = True
    fake = tmp_path / "claude"
    fake.write_text("#!/bin/sh\necho 'broken install' >&2\nexit 2\n")
    fake.chmod(0o755)
    agent = registry.create_agent(
        id="cc",
        display_name="CC",
        team="default",
        runtime="claude-code",
        settings={"binary": str(fake)},
    )
    verdict = health.check(agent)
    assert not verdict.ok and "exited 2" in verdict.detail
    fake.write_text("#!/bin/sh\necho '2.1.0 (Claude Code)'\n")
    assert health.check(agent).ok


@pytest.mark.django_db
def test_a_person_and_a_runtime_this_executor_does_not_run_take_nothing(default_team):
    registry.create_agent(
        id="hal", display_name="Hal", team="default", runtime="human", participant_kind="human"
    )
    [task] = tasks(1)
    assert Executor("hal").work_once().outcome == "refused"
    assert store.get_task(task).status == "todo"
    # Switched to a person after its executor started: still nothing claimed.
    registry.create_agent(
        id="ada",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
    executor = Executor("ada")
    registry.update_agent("ada", {"runtime": "human", "settings": {}})
    assert executor.work_once().outcome == "refused"
    assert store.get_task(task).status == "todo"


@pytest.mark.parametrize(
    ("outcome", "error", "expected"),
    [
        ("failed", "claude not found on PATH", "environment"),
        ("failed", "API Error: 429 rate_limit_error", "rate_limited"),
        ("failed", "Invalid API key · Please run /login", "auth"),
        ("failed", "prompt is too long: 210000 tokens", "context_overflow"),
        ("failed", "error: unknown option '--frobnicate'", "invalid_args"),
        ("failed", "API Error: 529 overloaded_error", "provider_error"),
        ("timed_out", "run timed out", "timeout"),
        ("cancelled", "cancelled", "cancelled"),
        ("failed", "exit code 3", "unknown"),
    ],
)
def test_every_failed_run_gets_an_error_class(outcome, error, expected):
    result = RunResult(outcome=outcome, error=error)
    assert breakers.classify(result) == expected
    assert expected in breakers.ERROR_CLASSES


@pytest.mark.django_db(transaction=True)
def test_a_task_that_keeps_failing_while_its_agent_works_elsewhere_is_blocked_not_retried_for_ever(
    settings,
):
    # The breaker counts an agent's consecutive failures and a success resets it: a
    # task that fails every time, its tries interleaved with other work that succeeds
    # (an agent running two at once, a slow timeout), went back to todo for ever
    # (max_attempts unset), each try spent and nobody told.
    settings.CLAWBOO_BREAKER_FAILURES = 3
    fails_on_bad = "import os, sys; sys.exit(3 if os.environ['CLAWBOO_TASK_TITLE'] == 'bad' else 0)"
    registry.create_agent(
        id="mostly",
        display_name="Mostly",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", fails_on_bad]},
        max_concurrent=2,
    )
    bad = store.create_task(title="bad", file_mutating=False).task.id
    executor = Executor("mostly")

    def work(task_id: str) -> str:
        ticket = store.claim(task_id, "mostly").ticket
        assert ticket is not None, store.get_task(task_id).status
        return executor.run_claimed(task_id, ticket).outcome

    outcomes = []
    for n in range(6):
        good = store.create_task(title=f"good {n}", file_mutating=False).task.id
        outcomes += [work(bad), work(good)]
        if store.get_task(bad).status != "todo":
            break
    task = store.get_task(bad)
    assert task.status == "blocked", (task.status, outcomes)
    assert outcomes == ["failed", "succeeded"] * 3
    assert "its last 3 runs failed" in task.error
    assert Agent.objects.get(pk="mostly").state == "active"  # the agent is not at fault


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("crash", "counted"),
    [
        pytest.param(OSError("No space left on device"), True, id="the-host-failed"),
        pytest.param(
            OperationalError("server closed the connection"), False, id="the-database-went-away"
        ),
    ],
)
def test_a_failure_around_a_local_run_is_counted_by_the_breaker_unless_the_database_went_away(
    settings, monkeypatch, crash, counted
):
    settings.CLAWBOO_BREAKER_FAILURES = 3
    registry.create_agent(
        id="host", display_name="Host", team="default", runtime="command",
        settings={"argv": [sys.executable, "-c", "pass"]},
    )  # fmt: skip
    (task_id,) = tasks(1)

    def fails(*args, **kwargs):
        raise crash

    monkeypatch.setattr("executor.runner.workspace", fails)

    report = Executor("host").work_once()

    assert report.outcome == "failed"
    (execution,) = ExecutionProcess.objects.filter(task_id=task_id)
    assert execution.status == "failed"
    assert store.get_task(task_id).status == "todo"
    # One rule with a routine's connected fire (routines.fire): executor.runner.settle_crash.
    assert registry.get_agent("host").breaker_failures == (1 if counted else 0)


@pytest.mark.django_db(transaction=True)
def test_a_run_already_counted_is_not_counted_again_when_the_executor_fails_after_it(
    settings, monkeypatch
):
    """The executor failed after its run was closed and counted (here: the breaker's
    pause itself fails at the trip): the crash path (executor.runner.settle_crash)
    counts that run no second time, and still pauses the agent it tripped."""
    settings.CLAWBOO_BREAKER_FAILURES = 1
    registry.create_agent(
        id="twice", display_name="Twice", team="default", runtime="command",
        settings={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    )  # fmt: skip
    (task_id,) = tasks(1)
    pause = store.pause_agent
    calls = []

    def pause_fails_once(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:
            raise OSError("No space left on device")
        return pause(*args, **kwargs)

    monkeypatch.setattr("executor.breakers.store.pause_agent", pause_fails_once)

    report = Executor("twice").work_once()

    assert report.outcome == "failed"
    (execution,) = ExecutionProcess.objects.filter(task_id=task_id)
    assert execution.status == "failed"
    agent = registry.get_agent("twice")
    assert agent.breaker_failures == 1
    assert agent.state == "paused"
