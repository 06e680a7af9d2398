"""What the board's OpenTelemetry spans are: task → run → step, one trace per task
tree (its id derived from the tree's root task), attributes from the GenAI semantic
conventions where they fit (``gen_ai.operation.name`` ``invoke_agent`` for a run,
``chat`` for a model turn, ``execute_tool`` for a tool call; ``gen_ai.usage.*``).

A step's span is exported once its batch commits (:mod:`board.store.steps`), a run's
when it closes, a task's when it reaches an end (done, failed, cancelled:
:func:`on_event`). Export itself, and the rule that nothing happens unless an OTLP
endpoint is configured, is :mod:`core.otel`. Every function here is called after a
commit and never fails the caller: an export problem is logged.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from typing import Any

from board.models import ExecutionProcess, RunStep, Task
from board.runs import StepKind, StepStatus
from board.store.deps import ancestor_ids
from core import otel
from core.models import Event

log = logging.getLogger(__name__)

# A task's span is exported when it reaches one of these.
ENDS = frozenset({"done", "failed", "cancelled"})
# The GenAI operation of each step kind (the rest are Clawboo's own).
OPERATIONS = {
    StepKind.MODEL_TURN: "chat",
    StepKind.TOOL_CALL: "execute_tool",
    StepKind.COMMAND: "execute_tool",
    StepKind.FILE_CHANGE: "execute_tool",
    StepKind.MCP_CALL: "execute_tool",
    StepKind.SUBAGENT: "invoke_agent",
}


def root_of(task_id: str) -> str:
    """The root of the task's tree: the trace's key."""
    chain = ancestor_ids(task_id)
    return chain[-1] if chain else task_id


def _safely(what: str, export: Any, *args: Any) -> None:
    if not otel.enabled():
        return
    try:
        export(*args)
    except Exception:  # tracing never fails the board
        log.exception("could not export the trace of %s", what)


def export_steps(task_id: str, execution_id: int, steps: Iterable[RunStep]) -> None:
    _safely(f"run {execution_id}", _export_steps, task_id, execution_id, list(steps))


def _export_steps(task_id: str, execution_id: int, steps: list[RunStep]) -> None:
    root = root_of(task_id)
    for step in steps:
        duration = dt.timedelta(milliseconds=step.duration_ms or 0)
        start = step.started_at or (step.created_at - duration)
        operation = OPERATIONS.get(StepKind(step.kind))
        attributes: dict[str, Any] = {
            "clawboo.step.kind": step.kind,
            "clawboo.step.seq": step.seq,
            "gen_ai.operation.name": operation,
            "gen_ai.usage.input_tokens": step.tokens_in,
            "gen_ai.usage.output_tokens": step.tokens_out,
            "clawboo.cost_millicents": step.cost_millicents,
        }
        if step.kind == StepKind.MODEL_TURN:
            attributes["gen_ai.request.model"] = step.model
            name = f"chat {step.model or step.name}"
        elif operation == "execute_tool":
            attributes["gen_ai.tool.name"] = step.name
            name = f"execute_tool {step.name}"
        else:
            name = f"{step.kind} {step.name}"
        failed = step.status == StepStatus.ERROR
        if failed:
            attributes["error.type"] = step.kind
        otel.export_span(
            trace_key=root,
            span_key=f"step:{execution_id}:{step.seq}",
            parent_key=f"run:{execution_id}",
            name=name,
            start=start,
            end=start + duration,
            attributes=attributes,
            error=(step.detail or "failed") if failed else None,
        )


def export_run(execution_id: int) -> None:
    _safely(f"run {execution_id}", _export_run, execution_id)


def _export_run(execution_id: int) -> None:
    row = ExecutionProcess.objects.filter(pk=execution_id).first()
    if row is None or row.finished_at is None:
        return
    otel.export_span(
        trace_key=root_of(row.task_id),
        span_key=f"run:{row.id}",
        parent_key=f"task:{row.task_id}",
        name=f"invoke_agent {row.agent_id}",
        start=row.started_at,
        end=row.finished_at,
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": row.agent_id,
            "gen_ai.usage.input_tokens": row.tokens_in,
            "gen_ai.usage.output_tokens": row.tokens_out,
            "clawboo.runtime": row.runtime,
            "clawboo.execution.id": row.id,
            "clawboo.run.attempt": row.attempt,
            "clawboo.run.status": row.status,
            "clawboo.cost_millicents": row.cost_millicents,
            "error.type": row.error_class or None,
        },
        error=(row.error or row.status) if row.status != "succeeded" else None,
    )


def export_task(task_id: str) -> None:
    _safely(f"task {task_id}", _export_task, task_id)


def _export_task(task_id: str) -> None:
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        return
    parent = task.parent_task_id
    otel.export_span(
        trace_key=root_of(task.id),
        span_key=f"task:{task.id}",
        parent_key=f"task:{parent}" if parent else None,
        name=f"task {task.title[:80]}",
        start=task.created_at,
        end=task.completed_at or task.updated_at,
        attributes={
            "clawboo.task.id": task.id,
            "clawboo.team": task.team_id,
            "clawboo.task.status": task.status,
            "clawboo.task.attempts": task.attempts,
            "clawboo.cost_millicents": task.cost_millicents,
        },
        error=(task.error or task.status) if task.status in ("failed", "cancelled") else None,
    )


def on_event(event: Event) -> None:
    """After commit: a task that reached an end has its span exported."""
    if not otel.enabled() or event.task_id is None:
        return
    payload = event.payload if isinstance(event.payload, dict) else {}
    task = payload.get("task")
    status = task.get("status") if isinstance(task, dict) else None
    if status in ENDS and event.prev_status != status:
        export_task(event.task_id)
