"""A run's steps through the API: a remote worker reports them with its claim's
ticket (one format with the local run's), secrets in arguments are masked, text is
bounded, a run keeps at most MAX_STEPS; whoever sees the task reads them in order,
another team's caller is told 404; each batch is one ``run_step`` event."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from board import store
from board.models import ExecutionProcess, RunStep
from board.store import steps as steps_store
from core.models import Event
from tests.api.test_remote_executions import claimed, client_for, fleet, opened, state

pytestmark = pytest.mark.django_db
__all__ = ["fleet", "state"]

TWO_CALLS_AND_A_FAILING_COMMAND = [
    {"kind": "model_turn", "name": "model", "tokens_in": 120, "tokens_out": 7, "model": "m"},
    {
        "kind": "file_change",
        "name": "Write",
        "arguments": {"file_path": "a.txt", "content": "API_TOKEN=sk-live-abcdef123456"},
        "duration_ms": 12,
    },
    {
        "kind": "command",
        "name": "Bash",
        "status": "error",
        "arguments": {"command": "false", "api_key": "hunter2"},
        "detail": "exit code 1",
        "started_at": 1_796_000_000.5,
        "duration_ms": 30,
    },
]


def test_a_remote_run_reports_its_steps_and_a_reader_gets_them_in_order_masked(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}/steps"
    answer = client.post(
        base, {"ticket": ticket, "steps": TWO_CALLS_AND_A_FAILING_COMMAND}, format="json"
    )
    assert answer.status_code == 200, answer.json()
    got = client.get(base).json()
    assert [(s["seq"], s["kind"], s["name"], s["status"]) for s in got] == [
        (1, "model_turn", "model", "ok"),
        (2, "file_change", "Write", "ok"),
        (3, "command", "Bash", "error"),
    ]
    assert got[0]["tokens_in"] == 120 and got[0]["model"] == "m"
    assert (got[0]["tokens"], got[0]["cost_cents"]) == (127, None)  # API.md's totals
    assert got[1]["arguments"]["content"] == "API_TOKEN=***"
    assert got[2]["arguments"]["api_key"] == "***"
    assert "hunter2" not in str(got) and "sk-live" not in str(got)
    assert got[2]["started_at"].startswith("2026-") and got[2]["duration_ms"] == 30
    # One event for the batch, carrying the steps (the board's websocket frame).
    event = Event.objects.filter(kind="run_step", task_id=task_id).get()
    assert event.payload["execution_id"] == run
    assert [s["seq"] for s in event.payload["steps"]] == [1, 2, 3]
    # The next batch is numbered after the last.
    more = client.post(
        base, {"ticket": ticket, "steps": [{"kind": "error", "name": "x"}]}, format="json"
    )
    assert [s["seq"] for s in more.json()] == [4]


def test_another_teams_caller_is_told_404_and_a_bad_step_writes_nothing(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}/steps"
    red = client_for("red-bot")
    assert red.get(base).status_code == 404
    assert client.get(f"/api/board/tasks/{task_id}/executions/999999/steps").status_code == 404
    bad = [TWO_CALLS_AND_A_FAILING_COMMAND[0], {"kind": "dance", "name": "x"}]
    answer = client.post(base, {"ticket": ticket, "steps": bad}, format="json")
    assert answer.status_code == 400 and answer.json()["error"] == "validation_error"
    assert not RunStep.objects.exists() and not Event.objects.filter(kind="run_step").exists()


def test_a_time_or_a_silence_past_what_a_number_can_be_is_a_400_that_writes_nothing(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}"
    for started in (1e20, -1e15, 1e308):
        step = {"kind": "command", "name": "x", "started_at": started}
        answer = client.post(f"{base}/steps", {"ticket": ticket, "steps": [step]}, format="json")
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == "steps[0].started_at"
    refused = client.post(f"{base}/stalled", {"ticket": ticket, "silent_s": 10**400}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "silent_s"
    assert not RunStep.objects.exists() and not Event.objects.filter(kind="run_step").exists()
    assert ExecutionProcess.objects.get(pk=run).stalled_at is None


def test_a_closed_run_takes_no_steps_and_a_run_keeps_at_most_max_steps(fleet, monkeypatch):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    monkeypatch.setattr(steps_store, "MAX_STEPS", 3)
    steps_store.record_steps(run, [{"kind": "tool_call", "name": f"t{n}"} for n in range(5)])
    assert list(RunStep.objects.values_list("name", flat=True)) == ["t0", "t1", "t2"]
    assert steps_store.record_steps(run, [{"kind": "tool_call", "name": "late"}]) == []
    base = f"/api/board/tasks/{task_id}/executions/{run}"
    client.post(f"{base}/close", {"ticket": ticket, "outcome": "failed"}, format="json")
    body = {"ticket": ticket, "steps": [{"kind": "error", "name": "x"}]}
    late = client.post(f"{base}/steps", body, format="json")
    assert late.status_code == 409


def test_a_stalled_run_is_marked_once_with_one_event(fleet):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    base = f"/api/board/tasks/{task_id}/executions/{run}/stalled"
    first = client.post(base, {"ticket": ticket, "silent_s": 2.5}, format="json")
    again = client.post(base, {"ticket": ticket, "silent_s": 3.0}, format="json")
    assert (first.json()["marked"], again.json()["marked"]) == (True, False)
    assert ExecutionProcess.objects.get(pk=run).stalled_at is not None
    event = Event.objects.filter(kind="run_stalled").get()
    assert event.payload["silent_s"] == 2.5 and event.payload["execution_id"] == run


def test_steps_are_pruned_with_the_history(fleet):
    import datetime as dt

    from django.utils import timezone

    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    steps_store.record_steps(run, [{"kind": "tool_call", "name": "t"}])
    assert steps_store.prune_before(timezone.now() - dt.timedelta(days=1)) == 0
    assert steps_store.prune_before(timezone.now() + dt.timedelta(seconds=1)) == 1
    assert not RunStep.objects.exists()


def test_a_trace_carries_at_most_trace_steps_newest_runs_first_and_says_which_are_cut(
    fleet, monkeypatch
):
    # A claim's fix rounds are runs of their own, each with up to MAX_STEPS steps.
    monkeypatch.setattr(steps_store, "TRACE_STEPS", 5)
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    runs = []
    for n in range(3):
        run = opened(client, task_id, ticket)
        steps_store.record_steps(
            run, [{"kind": "tool_call", "name": f"r{n}s{i}"} for i in range(3)]
        )
        base = f"/api/board/tasks/{task_id}/executions/{run}"
        client.post(f"{base}/close", {"ticket": ticket, "outcome": "succeeded"}, format="json")
        runs.append(run)
        store.send_back_for_fix(
            task_id, ticket, evidence="red", detail={"fix_cycles": n + 1}, feedback="again"
        )

    trace = client.get(f"/api/board/tasks/{task_id}/trace").json()

    assert [len(r["steps"]) for r in trace] == [0, 2, 3]
    assert [r["steps_truncated"] for r in trace] == [True, True, False]
    assert len(client.get(f"/api/board/tasks/{task_id}/executions/{runs[0]}/steps").json()) == 3


def test_an_anonymous_caller_is_refused(fleet):
    assert APIClient().get("/api/board/tasks/x/executions/1/steps").status_code == 401


def test_a_tasks_trace_holds_its_runs_and_its_subtasks_in_order_and_stalled_runs_are_listed(
    fleet,
):
    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    steps_store.record_steps(run, [{"kind": "command", "name": "false", "status": "error"}])
    child = store.create_task(title="child", parent_task_id=task_id, file_mutating=False).task
    trace = client.get(f"/api/board/tasks/{task_id}/trace").json()
    assert [(r["task_id"], r["run"], r["role"], r["depth"]) for r in trace] == [
        (task_id, 1, "run", 0)
    ]
    assert trace[0]["steps"][0]["status"] == "error"
    child_claim = store.claim(child.id, "b-bot")
    child_run = store.open_execution(child.id, child_claim.ticket, runtime="claude-code")
    trace = client.get(f"/api/board/tasks/{task_id}/trace").json()
    assert [(r["task_id"], r["depth"]) for r in trace] == [(task_id, 0), (child.id, 1)]
    assert trace[1]["execution"]["id"] == child_run.id and trace[1]["task_title"] == "child"
    assert client_for("red-bot").get(f"/api/board/tasks/{task_id}/trace").status_code == 404
    steps_store.mark_stalled(run, 1.0)
    stalled = client.get("/api/board/runs/stalled?team=default").json()
    assert [(r["task_id"], r["id"]) for r in stalled] == [(task_id, run)]
    assert client_for("red-bot").get("/api/board/runs/stalled").json() == []


def test_the_board_takes_exactly_the_fields_a_runtimes_step_carries():
    import dataclasses

    from executor.steps import Step

    assert steps_store.FIELDS == tuple(f.name for f in dataclasses.fields(Step))


def test_a_run_waiting_for_a_person_to_approve_a_tool_call_is_not_stalled(fleet):
    from board.store import tool_approvals

    client = client_for("a-bot")
    task_id, ticket = claimed(client)
    run = opened(client, task_id, ticket)
    ask = tool_approvals.ask(task_id, "a-bot", "Bash", {"command": "rm -rf build"})
    assert ask is not None
    assert steps_store.mark_stalled(run, 700.0) is False
    assert ExecutionProcess.objects.get(pk=run).stalled_at is None
    tool_approvals.decide(ask.id, "deny", by="ada")
    assert steps_store.mark_stalled(run, 700.0) is True
