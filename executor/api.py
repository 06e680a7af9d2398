"""The run's side of a remote worker (``clawboo worker``), over the API: its usage as
the runtime streams it and its end. The executor's own rules apply (one place each):
the usage is priced by :mod:`executor.pricing` and checked by :mod:`executor.spending`
exactly as a local run's, and a run's end is classified by :mod:`executor.breakers`.

Opening the execution and appending its log are board operations (``board.api``).
Each call needs the claim's ticket and acts as the task's assignee: a machine token
bound to another agent is refused (403), a task of a team it cannot see is unknown
(404).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from board import checks, store
from board.access import visible_task
from board.models import ExecutionStatus
from board.repository import judged_on_server
from board.serializers import ExecutionSerializer
from board.store import spend as spend_store
from core.api.access import act_as_assignee
from core.api.bodies import json_object
from core.api.schema import with_errors
from core.checks import check_int, check_text
from core.errors import ValidationFailed
from core.models import Agent
from executor import pricing, prompts, settle, spending
from executor.runtimes import RunResult
from executor.runtimes.base import USAGE_FIELDS, Outcome, UsageSoFar, usage_fields
from worktrees import handoff

COUNT_MAX = 2**53

# The usage a report carries: one field per field of the usage value (UsageSoFar).
_HELP = {
    "cost_cents": "the runtime's own price; absent: the tokens are priced by the table",
    "cost_millicents": "the runtime's own price in thousandths of a cent (wins over cost_cents)",
}
_USAGE_FIELDS: dict[str, Any] = {
    name: serializers.CharField(required=False, allow_null=True)
    if name == "model"
    else serializers.IntegerField(
        required=False, allow_null=True, min_value=0, help_text=_HELP.get(name)
    )
    for name in (f.name for f in dataclasses.fields(UsageSoFar))
}

UsageBody = inline_serializer("RunUsage", {"ticket": serializers.CharField(), **_USAGE_FIELDS})
UsageAnswer = inline_serializer(
    "RunUsageAnswer",
    {
        "stop": serializers.BooleanField(help_text="true: cancel the run now"),
        "reason": serializers.CharField(allow_null=True),
        "cost_cents": serializers.IntegerField(),
        "cost_millicents": serializers.IntegerField(),
        "cost_status": serializers.ChoiceField(choices=["reported", "estimated", "unknown"]),
        "max_run_cents": serializers.IntegerField(
            allow_null=True, help_text="the run's ceiling (null: none)"
        ),
        "rates": serializers.DictField(
            child=serializers.FloatField(),
            allow_null=True,
            help_text="the reported model's price (cents per million tokens: in, out, "
            "cache_read, cache_write), so the worker stops the run at the report that "
            "reaches its ceiling; null: the model is not priced",
        ),
    },
)
CloseBody = inline_serializer(
    "CloseExecution",
    {
        "ticket": serializers.CharField(),
        "outcome": serializers.ChoiceField(
            choices=["succeeded", "failed", "timed_out", "cancelled"]
        ),
        "exit_code": serializers.IntegerField(required=False, allow_null=True),
        "error": serializers.CharField(required=False, allow_null=True, allow_blank=True),
        "log": serializers.CharField(
            required=False, allow_blank=True, help_text="the run's output tail (64 kB kept)"
        ),
        "native_session_id": serializers.CharField(required=False, allow_null=True),
        "started": serializers.BooleanField(
            required=False,
            help_text="false: the worker never started the run (its agent was paused "
            "after the claim): closed as the local executor closes such a run "
            "(error_class breaker, or cancelled for a person's pause) and the task "
            "handed back to todo; default true",
        ),
        **_USAGE_FIELDS,
    },
)


def _tokens(body: dict[str, Any]) -> UsageSoFar:
    counts: dict[str, int | None] = {}
    for name in USAGE_FIELDS:
        value = body.get(name)
        # At most what one run may have (board.store.spend.RUN_MAX): refused, not bounded.
        most = spend_store.RUN_MAX.get(name, COUNT_MAX)
        counts[name] = None if value is None else check_int(value, name, low=0, high=most)
    model = body.get("model")
    if model is not None:
        model = check_text(model, "model", limit=200)
    return UsageSoFar(**counts, model=model or None)


def _ceiling(task_id: str, agent_id: str) -> int | None:
    task = store.get_task(task_id)
    agent = Agent.objects.filter(pk=agent_id).first() if agent_id else None
    return spend_store.run_ceiling(task, dict(agent.settings or {}) if agent else None)


class ExecutionUsageView(APIView):
    @extend_schema(
        operation_id="board_tasks_executions_usage",
        request=UsageBody,
        responses=with_errors(
            {200: UsageAnswer}, "not_found", "conflict", "validation_error", "forbidden"
        ),
    )
    def post(self, request: Request, task_id: str, execution_id: str) -> Response:
        """A running remote run's usage so far (running totals), written and checked
        as a local run's: ``stop`` true when it reached its ``max_run_cents`` or a cap
        budget over it is paused -- the worker cancels the run and closes it. The
        answer also gives the ceiling and the model's rates, with which the worker
        prices its next reports itself and stops the run at the one that reaches the
        ceiling (the close confirms it from the final usage)."""
        act_as_assignee(request, visible_task(request.user, task_id))
        body = json_object(request, UsageBody)
        number = checks.execution_number(execution_id)
        run = store.claimed_execution(task_id, number, body["ticket"])
        tokens = _tokens(body)
        usage = pricing.usage_of(tokens)
        ceiling = _ceiling(task_id, run.agent_id)
        stop = spending.record(run.id, usage, ceiling)
        rates = pricing.rates_for(tokens.model)
        return Response(
            {
                "stop": stop is not None,
                "reason": None if stop is None else stop.why,
                "cost_cents": usage.cost_cents,
                "cost_millicents": usage.millicents,
                "cost_status": usage.cost_status,
                "max_run_cents": ceiling,
                "rates": None if rates is None else {k: float(v) for k, v in rates.items()},
            }
        )


class ExecutionCloseView(APIView):
    @extend_schema(
        operation_id="board_tasks_executions_close",
        request=CloseBody,
        responses=with_errors(
            {200: ExecutionSerializer}, "not_found", "conflict", "validation_error", "forbidden"
        ),
    )
    def post(self, request: Request, task_id: str, execution_id: str) -> Response:
        """A remote run ended: its execution is closed with its outcome, exit code and
        final usage (which replaces the estimate it streamed, but never lowers a price
        its own usage reports gave: the agent side's word). A run the worker cancelled
        because its usage reached a limit is closed ``cancelled`` with
        ``error_class: "budget"``; its task is ``blocked`` at its ceiling (never retried
        by itself) or back to ``todo`` for a paused cap budget, with a comment (one
        notification); a failed run is classified and counted by the agent's
        breaker, as a local one. A run the worker never started (``started: false``:
        it saw its agent paused after the claim) is closed by the local executor's
        rule (:func:`executor.settle.refuse_paused`): ``cancelled``, ``error_class:
        "breaker"`` when the breaker paused the agent, not counted, the task back in
        ``todo``. Closing a closed run changes nothing."""
        task = visible_task(request.user, task_id)
        act_as_assignee(request, task)
        body = json_object(request, CloseBody)
        run = store.claimed_execution(
            task_id, checks.execution_number(execution_id), body["ticket"], running=False
        )
        result = _run_end(body)
        if run.status != ExecutionStatus.RUNNING:
            return Response(run.as_dict())
        ran = settle.Run(task_id, body["ticket"], run.agent_id, run.id, remote=True)
        started = body.get("started", True)
        if not isinstance(started, bool):
            raise ValidationFailed("started", "must be true or false")
        if not started:
            _hand_back(ran, result.error or "the worker did not start the run")
            run.refresh_from_db()
            return Response(run.as_dict())
        stopped = None
        if result.outcome is Outcome.CANCELLED:
            # The worker cancels a run for spend only when a usage report said stop;
            # the final usage says again whether a limit holds (the one rule).
            ceiling = _ceiling(task_id, run.agent_id)
            usage = pricing.usage_of(result.usage)
            stopped = spending.record(run.id, usage, ceiling, final=True, remote=True)
            if stopped is None:
                # No limit holds: "cancelled" is then the agent side's own word, and the
                # breaker counts no cancelled run -- a worker saying it of every failure
                # would never be paused (GOVERNANCE §2). The server's reading: failed.
                result = dataclasses.replace(result, outcome=Outcome.FAILED)
        # The worker fails the task itself (its ``…/fail`` follows): the rest of the
        # run's end is settled here, as a local run's.
        # Work the server takes in counts once its intake ends (executor.intake), as a
        # local run counts once landed: a success here would reset the breaker before
        # an intake that fails, and such a loop would never trip it.
        settle.close_run(ran, result, stop=stopped, error=result.error or None, fail_task=False,
                         count_success=not judged_on_server(task))  # fmt: skip
        run.refresh_from_db()
        return Response(run.as_dict())


def _hand_back(run: settle.Run, why: str) -> None:
    """A remote run never started: the local executor's rule for a run whose agent was
    paused after its claim, read from the agent as the server has it now (a pause
    since resumed still hands the task back: the worker ran nothing)."""
    agent = Agent.objects.filter(pk=run.agent_id).first()
    if agent is None or settle.refuse_paused(run, agent) is None:
        settle.hand_back_unstarted(run, agent, why)


def _run_end(body: dict[str, Any]) -> RunResult:
    """The run's end as a close body tells it, each field checked (400 naming it)."""
    outcome = body["outcome"]
    if outcome not in ("succeeded", "failed", "timed_out", "cancelled"):
        raise ValidationFailed("outcome", "one of succeeded, failed, timed_out, cancelled")
    exit_code = body.get("exit_code")
    if exit_code is not None:
        exit_code = check_int(exit_code, "exit_code", low=-(2**31), high=2**31 - 1)
    error = check_text(body.get("error"), "error", limit=20_000) or ""
    tail = body.get("log") or ""
    if not isinstance(tail, str):
        raise ValidationFailed("log", "must be a string")
    session = body.get("native_session_id")
    if session is not None:
        session = check_text(session, "native_session_id", limit=255) or None
    return RunResult(
        outcome=Outcome(outcome),
        exit_code=exit_code,
        native_session_id=session,
        error=error,
        log_tail=tail,
        **usage_fields(_tokens(body)),
    )


RunPrompt = inline_serializer(
    "RunPrompt",
    {
        "prompt": serializers.CharField(help_text="what the agent's next run starts with"),
        "feedback": serializers.CharField(
            allow_null=True, help_text="what the judge or a reviewer sent back, if anything"
        ),
        "fix_cycles": serializers.IntegerField(
            help_text="fix rounds this claim has had (bounded by CLAWBOO_MAX_FIX_CYCLES)"
        ),
    },
)


class RunPromptView(APIView):
    @extend_schema(
        operation_id="board_tasks_prompt",
        responses=with_errors({200: RunPrompt}, "not_found", "forbidden"),
    )
    def get(self, request: Request, task_id: str) -> Response:
        """The prompt the task's next run starts with, rendered as the local executor
        renders it (:func:`executor.prompts.run_prompt`): a remote worker asks before
        each run, so a round the judge sent back to fix carries its ``{what, why,
        how_to_fix}`` feedback and what the server's checkout handoff says is broken
        and next. Without the scaffold's steps: a remote clone has no TASK.md."""
        task = visible_task(request.user, task_id)
        act_as_assignee(request, task)
        ws = store.live_workspace(task.id)
        tree = Path(ws.worktree_path) if ws is not None and ws.worktree_path else None
        state = handoff.reconstruct_state(tree) if tree is not None and tree.is_dir() else None
        detail = task.verification_detail if isinstance(task.verification_detail, dict) else {}
        return Response(
            {
                "prompt": prompts.run_prompt(task, state, scaffolded=False),
                "feedback": task.feedback or None,
                "fix_cycles": int(detail.get("fix_cycles") or 0),
            }
        )
