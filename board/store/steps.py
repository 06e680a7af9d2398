"""The steps of a run (``run_steps``): the only writer of that table, and of an
execution's ``stalled_at``.

A run's steps arrive in batches from the run's own loop (:class:`executor.attempt.Attempt`),
in process or over the API from a remote worker -- one format, :data:`FIELDS`. Each
batch is checked, its arguments masked (the one masking rule of tool calls,
:func:`board.store.tool_approvals.mask`), its text bounded, numbered after the run's
last step and written with one ``run_step`` event in the same transaction, so the
board's websocket shows it live and a reconnecting client replays it. A run keeps at
most :data:`MAX_STEPS`; later ones are dropped (the log has everything). Steps go
with the history (:func:`prune_before`). The claim never writes here: only a run
that is open does.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Count, Max, QuerySet

from board import traces
from board.models import (
    ExecutionProcess,
    ExecutionStatus,
    RunStep,
    Task,
    ToolApproval,
    ToolApprovalState,
)
from board.runs import StepKind, StepStatus
from board.store._base import now
from board.store.tool_approvals import mask
from core import events, storage
from core.checks import field_limit
from core.errors import NotFound, ValidationFailed

MAX_STEPS = 1000  # a run's steps kept; the rest are dropped (its log keeps all)
BATCH_MAX = 200  # steps in one report
NAME_MAX = 255
DETAIL_MAX = field_limit("step.detail")  # characters of a step's result or error kept
ARGUMENTS_MAX = field_limit("step.arguments")  # characters of masked arguments kept (JSON)
MODEL_MAX = 200
COUNT_MAX = 2**53
# The fields of one step as a runtime reports it (executor.steps.Step.as_body).
FIELDS = (
    "kind",
    "name",
    "status",
    "arguments",
    "detail",
    "started_at",
    "duration_ms",
    "tokens_in",
    "tokens_out",
    "cost_millicents",
    "model",
)


def checked(body: Any, where: str = "step") -> dict[str, Any]:
    """One reported step as the row's values: kinds and statuses from their tables,
    arguments masked and bounded, text bounded; :class:`ValidationFailed` otherwise."""
    if not isinstance(body, dict):
        raise ValidationFailed(where, "a step object")
    kind = body.get("kind")
    if kind not in StepKind.values:
        raise ValidationFailed(f"{where}.kind", f"one of {sorted(StepKind.values)}")
    status = body.get("status") or StepStatus.OK
    if status not in StepStatus.values:
        raise ValidationFailed(f"{where}.status", f"one of {sorted(StepStatus.values)}")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValidationFailed(f"{where}.name", "a non-empty string")
    arguments = body.get("arguments")
    if arguments is None:
        arguments = {}
    masked = mask(arguments if isinstance(arguments, dict) else {"input": arguments})
    text = json.dumps(masked, default=str)
    if len(text) > ARGUMENTS_MAX:
        masked = {"input": text[:ARGUMENTS_MAX] + "…"}
    detail = body.get("detail") or ""
    if not isinstance(detail, str):
        raise ValidationFailed(f"{where}.detail", "a string")
    started = body.get("started_at")
    if started is not None:
        if isinstance(started, bool) or not isinstance(started, int | float):
            raise ValidationFailed(f"{where}.started_at", "seconds since the epoch")
        try:
            started = dt.datetime.fromtimestamp(float(started), tz=dt.UTC)
        except (OverflowError, ValueError, OSError):
            # Past what a date can be (1e20, -1e15): the reporter's mistake, a 400.
            raise ValidationFailed(
                f"{where}.started_at", "seconds since the epoch, within years 1 to 9999"
            ) from None
    values: dict[str, Any] = {
        "kind": kind,
        "name": mask(name.strip())[:NAME_MAX],
        "status": status,
        "arguments": masked,
        "detail": mask(detail)[:DETAIL_MAX],
        "started_at": started,
    }
    for count in ("duration_ms", "tokens_in", "tokens_out", "cost_millicents"):
        value = body.get(count)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= COUNT_MAX
        ):
            raise ValidationFailed(f"{where}.{count}", "a non-negative integer")
        values[count] = value
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ValidationFailed(f"{where}.model", "a string")
    values["model"] = (model or None) and model[:MODEL_MAX]
    return values


def record_steps(
    execution_id: int, bodies: Sequence[Any], *, finished: bool = False
) -> list[RunStep]:
    """Write a running run's next steps, numbered after its last, with one
    ``run_step`` event; returns the rows written (none once the run keeps
    :data:`MAX_STEPS`, or once it is closed: a late batch of a closed run is dropped).
    Called by the run's one loop, so the run's steps are never written twice at once.
    ``finished``: the steps of a run recorded after it ended (the critic's review,
    :func:`board.store.record_review_run`), written once, closed as it is."""
    if not isinstance(bodies, list | tuple) or len(bodies) > BATCH_MAX:
        raise ValidationFailed("steps", f"a list of at most {BATCH_MAX} steps")
    values = [checked(body, f"steps[{n}]") for n, body in enumerate(bodies)]
    if not values:
        return []

    def run() -> list[RunStep]:
        row = (
            ExecutionProcess.objects.select_related("task")
            .filter(pk=execution_id)
            .only("id", "status", "task__id", "task__team_id", "task__parent_task_id")
            .first()
        )
        if row is None:
            raise NotFound(f"execution {execution_id} does not exist")
        if row.status != ExecutionStatus.RUNNING and not finished:
            return []
        last = RunStep.objects.filter(execution_id=execution_id).aggregate(m=Max("seq"))["m"] or 0
        room = max(MAX_STEPS - last, 0)
        at = now()
        rows = RunStep.objects.bulk_create(
            [
                RunStep(execution_id=execution_id, seq=last + n, created_at=at, **value)
                for n, value in enumerate(values[:room], start=1)
            ]
        )
        if rows:
            task = row.task
            events.append(
                task.team_id,
                "run_step",
                {"execution_id": execution_id, "steps": [step.as_dict() for step in rows]},
                task_id=task.id,
            )
            transaction.on_commit(lambda: traces.export_steps(task.id, execution_id, rows))
        return rows

    return storage.write(run)


def list_steps(task_id: str, execution_id: int) -> QuerySet[RunStep]:
    """The steps of ``task_id``'s run ``execution_id`` in order; :class:`NotFound`
    when the task has no such run."""
    if not ExecutionProcess.objects.filter(pk=execution_id, task_id=task_id).exists():
        raise NotFound(f"task {task_id!r} has no execution {execution_id}")
    return RunStep.objects.filter(execution_id=execution_id).order_by("seq")


def steps_of_tasks(task_ids: Sequence[str]) -> QuerySet[RunStep]:
    """Every kept step of the runs of ``task_ids`` (the trace view), run by run."""
    return RunStep.objects.filter(execution__task_id__in=list(task_ids)).order_by(
        "execution__started_at", "execution_id", "seq"
    )


def mark_stalled(execution_id: int, silent_s: float) -> bool:
    """Mark a running run ``stalled`` (nothing from it for ``silent_s`` seconds), once:
    a conditional update whose row count decides, and one ``run_stalled`` event (the
    notification's) in the same transaction. False when it was marked already, is
    closed, or is waiting for a person to answer one of its tool calls (GOVERNANCE §5:
    silent, but not stalled)."""

    def run() -> bool:
        at = now()
        waiting = ToolApproval.objects.filter(
            task__executions__pk=execution_id, state=ToolApprovalState.PENDING
        )
        if waiting.exists():
            return False
        updated = ExecutionProcess.objects.filter(
            pk=execution_id, status=ExecutionStatus.RUNNING, stalled_at__isnull=True
        ).update(stalled_at=at)
        if not updated:
            return False
        row = ExecutionProcess.objects.select_related("task").get(pk=execution_id)
        task = row.task
        events.append(
            task.team_id,
            "run_stalled",
            {
                "execution_id": execution_id,
                "agent_id": row.agent_id,
                "silent_s": round(silent_s, 3),
                "stalled_at": at.isoformat(),
                "title": task.title,
            },
            task_id=task.id,
        )
        return True

    return storage.write(run)


def stalled_runs(teams: Sequence[str] | None) -> QuerySet[ExecutionProcess]:
    """The running runs of ``teams`` (None: every team) marked stalled (few: the
    board's cards)."""
    rows = ExecutionProcess.objects.filter(status=ExecutionStatus.RUNNING, stalled_at__isnull=False)
    if teams is not None:
        rows = rows.filter(task__team_id__in=list(teams))
    return rows.order_by("stalled_at")[:500]


def prune_before(cutoff: dt.datetime) -> int:
    """Delete the steps of runs that started before ``cutoff`` (the history's
    retention window); returns how many."""
    old = ExecutionProcess.objects.filter(started_at__lt=cutoff).values("id")
    return storage.write(lambda: RunStep.objects.filter(execution_id__in=old).delete()[0])


TRACE_TASKS = 50  # the task and at most this many of its descendants on one trace
TRACE_STEPS = 2_000  # steps on one trace, newest runs first (each run: its steps endpoint)


def trace_of(task_id: str) -> list[dict[str, Any]]:
    """The task's trace: its runs and its descendants' (children first, then theirs,
    at most :data:`TRACE_TASKS` tasks), oldest first, each with its number on its task,
    its role (``review``: the team's reviewer, the critic) and its steps in order.
    :class:`NotFound` when there is no such task."""
    task = Task.objects.select_related("team").filter(pk=task_id).first()
    if task is None:
        raise NotFound(f"task {task_id!r} does not exist")
    depth = {task.id: 0}
    frontier = [task.id]
    while frontier and len(depth) < TRACE_TASKS:
        children = list(
            Task.objects.filter(parent_task_id__in=frontier)
            .order_by("created_at", "id")
            .values_list("id", "parent_task_id")[: TRACE_TASKS - len(depth)]
        )
        for child, parent in children:
            depth[child] = depth[parent] + 1
        frontier = [child for child, _ in children]
    titles = dict(Task.objects.filter(pk__in=list(depth)).values_list("id", "title"))
    reviewer = task.team.reviewer_agent_id
    runs = list(
        ExecutionProcess.objects.filter(task_id__in=list(depth)).order_by("started_at", "id")
    )
    steps: dict[int, list[dict[str, Any]]] = {run.id: [] for run in runs}
    kept = RunStep.objects.filter(execution_id__in=list(steps))
    # Newest runs first, at most TRACE_STEPS in all: a worker opening run after run
    # (each up to MAX_STEPS of up to ~12 KB) makes no trace of unbounded size. A run
    # cut short says so; its own steps endpoint has them all.
    loaded = 0
    for step in kept.order_by("-execution_id", "seq").iterator(chunk_size=500):
        if loaded >= TRACE_STEPS:
            break
        steps[step.execution_id].append(step.as_dict())
        loaded += 1
    truncated: set[int] = set()
    if loaded >= TRACE_STEPS:
        counts = kept.values_list("execution_id").annotate(n=Count("id"))
        truncated = {run_id for run_id, n in counts if n > len(steps[run_id])}
    numbers: dict[str, int] = {}
    out = []
    for run in runs:
        numbers[run.task_id] = numbers.get(run.task_id, 0) + 1
        out.append(
            {
                "task_id": run.task_id,
                "task_title": titles.get(run.task_id, ""),
                "depth": depth[run.task_id],
                "run": numbers[run.task_id],
                "role": "review" if reviewer and run.agent_id == reviewer else "run",
                "execution": run.as_dict(),
                "steps": steps[run.id],
                "steps_truncated": run.id in truncated,
            }
        )
    return out
