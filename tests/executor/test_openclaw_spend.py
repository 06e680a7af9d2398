"""OpenClaw runs and spend: the gateway streams a run's output tokens (``agent``
events, ``stream: usage``) and names its model while the run goes, so the per-run
ceiling stops an OpenClaw run mid-way; input tokens come only with the final answer.
"""

from __future__ import annotations

import json
import threading

from board import store
from board.models import CostStatus, ExecutionProcess, TaskComment
from core import registry
from executor.gateway import AgentRun, run_agent
from executor.runner import Executor
from tests.runtimes.stand_ins import real_lines


def test_the_real_gateways_usage_events_are_the_runs_output_so_far() -> None:
    """Replayed from what gateway 2026.9.6 sent for one run: two model turns."""
    frames = [json.loads(line)["frame"] for line in real_lines("openclaw/frames-agent.jsonl")]
    reports: list[tuple[int, str | None]] = []
    run = AgentRun(
        run_id="clawboo:T1:a1",
        session_key=None,
        agent_id=None,
        on_usage=lambda tokens, model: reports.append((tokens, model)),
    )
    for frame in frames:
        if frame.get("type") == "event":
            run.note_event(frame)
    assert reports == [(7, "fake-model"), (14, "fake-model")]
    # The final answer's own figure agrees with the last streamed one.
    final = next(
        f["payload"]
        for f in frames
        if f.get("type") == "res" and (f.get("payload") or {}).get("summary") == "completed"
    )
    assert final["result"]["meta"]["agentMeta"]["usage"]["output"] == 14
    # Another run's events on the connection are not this run's spend.
    other = AgentRun(run_id="someone-else", session_key=None, agent_id=None)
    for frame in frames:
        if frame.get("type") == "event":
            other.note_event(frame)
    assert (other.tokens_out, other.model) == (None, None)


def test_a_cancelled_run_keeps_the_usage_its_events_streamed(gateway_fake) -> None:
    gateway_fake.agent_delay_s = None  # runs until aborted
    gateway_fake.usage_every_s = 0.05
    seen: list[int] = []
    cancel = threading.Event()

    def on_usage(tokens: int, model: str | None) -> None:
        seen.append(tokens)
        if tokens >= 21:
            cancel.set()

    reply = run_agent(
        {"message": "go", "idempotencyKey": "k-usage", "sessionKey": "clawboo-usage"},
        request_id="r1",
        watchdog_s=10,
        cancel=cancel,
        on_usage=on_usage,
    )
    assert reply.status == "cancelled" and "aborted in the gateway" in reply.error
    assert seen[:3] == [7, 14, 21]
    assert reply.tokens_out is not None and reply.tokens_out >= 21
    assert (reply.tokens_in, reply.model) == (None, "fake-model")
    assert gateway_fake.runs["k-usage"].status == "aborted"


def test_an_openclaw_run_that_reaches_its_ceiling_is_stopped_mid_run(
    gateway_fake, db, state_dir
) -> None:
    # fake-model output: 4 $/M; 25,000 tokens a turn = 10¢, a turn every 0.1 s, forever.
    gateway_fake.agent_delay_s = None
    gateway_fake.usage_every_s = 0.1
    gateway_fake.usage_tokens_per_turn = 25_000
    registry.create_agent(id="claw", display_name="Claw", team="default", runtime="openclaw")
    created = store.create_task(title="spend", file_mutating=False, max_run_cents=30).task

    report = Executor("claw").work_once()

    assert report.outcome == "cancelled"
    execution = ExecutionProcess.objects.get(task_id=created.id)
    assert execution.status == "cancelled" and execution.error_class == "budget"
    assert execution.cost_status == CostStatus.ESTIMATED
    # Stopped at the report that reached 30¢, give or take a turn streamed before
    # the abort reached the gateway.
    assert 30 <= execution.cost_cents <= 30 + 2 * 10
    assert execution.tokens_out >= 75_000 and execution.tokens_in == 0
    [abort] = [r for r in gateway_fake.requests if r.get("method") == "chat.abort"]
    assert abort["params"]["runId"] == gateway_fake.runs[abort["params"]["runId"]].run_id
    assert all(run.status == "aborted" for run in gateway_fake.runs.values())
    task = store.get_task(created.id)
    assert task.status == "blocked" and task.cost_cents == execution.cost_cents
    (comment,) = TaskComment.objects.filter(task_id=task.id)
    assert "ceiling of 30¢" in comment.body
