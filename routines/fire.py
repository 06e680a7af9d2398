"""The fire path: one claimed routine row → board task(s) → runtime dispatch → outcome.

:func:`run_fire` is the django-q2 task the ticker enqueues per claimed row. It
moves the row ``claimed → running`` and reserves each slot in ``routine_fires``
(unique per routine and slot, so no slot ever fires twice), then for each slot
materializes the board task and dispatches it down the runtime's integration
path, and finally records the outcome and re-arms (or disarms) the row.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone as dj_timezone

from board import checks as board_checks
from board import store as board_store
from board.models import ApprovalState, Task
from board.transitions import Status
from core import events, storage
from core.models import Agent
from executor import gateway, settle
from executor.attempt import Attempt, Stall, Stop, run_settings
from executor.gateway import GatewayDispatch, GatewayReply
from executor.local import Clock, LocalBoard, WorkReport, workspace
from executor.runner import dispatch_refusal, heartbeat_seconds, settle_crash
from executor.runtimes import RunRequest, RunResult, capabilities
from executor.runtimes.openclaw import OpenClawAdapter
from routines import occurrence
from routines import store as routine_store
from routines.models import CatchUp, FireOutcome, Routine, RoutineFire, RoutineStatus

log = logging.getLogger(__name__)


class FireFailed(Exception):
    """A fire that cannot proceed (the message becomes the routine's last_error)."""


@dataclass
class DispatchResult:
    slot_at: int
    outcome: str  # a FireOutcome value
    task_id: str | None = None
    error: str | None = None
    path: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StartedFire:
    routine: Routine
    agent: Agent
    slots: tuple[int, ...]  # reserved in routine_fires by this fire
    skipped: int


# --- the django-q2 task ----------------------------------------------------------


def run_fire(routine_id: str) -> list[DispatchResult]:
    """Fire one claimed routine row. Each slot's failure is contained to its result."""
    try:
        started = storage.write(begin_fire, routine_id, routine_store.now_ms())
    except Exception as exc:  # the row cannot even start: claimed → error, never a crash loop
        log.exception("routine %s could not start its fire", routine_id)
        storage.write(_fail_to_start, routine_id, f"{type(exc).__name__}: {exc}")
        return []
    if started is None:
        return []  # not ours (another process healed or deleted it): nothing to do
    results = [fire_slot(started.routine, started.agent, slot) for slot in started.slots]
    storage.write(record_outcome, routine_id, results)
    return results


def begin_fire(routine_id: str, at_ms: int) -> StartedFire | None:
    """``claimed → running`` and reserve the planned slots. Runs in the write transaction.

    A slot whose ``routine_fires`` row already exists (another ticker, a restart)
    is dropped: the unique (routine, slot) constraint is the per-slot guarantee.
    """
    routine = Routine.objects.select_for_update().filter(pk=routine_id).first()
    if routine is None or routine.status != RoutineStatus.CLAIMED:
        return None
    tz = occurrence.check_timezone(routine.timezone)
    spec = occurrence.parse_spec(routine.cron_spec, tz)
    due = routine.fire_slot if routine.fire_slot is not None else at_ms
    plan = occurrence.plan_fire(spec, tz, due, at_ms, routine.catch_up)
    routine_store.move(routine, RoutineStatus.RUNNING, fire_slot=plan.newest)
    reserved: list[int] = []
    stamp = dj_timezone.now()
    for slot in plan.slots:
        try:
            with transaction.atomic():
                RoutineFire.objects.create(routine=routine, slot_at=slot, fired_at=stamp)
        except IntegrityError:
            continue  # this slot already fired once: never twice
        reserved.append(slot)
    agent = Agent.objects.get(pk=routine.agent_id)
    return StartedFire(routine=routine, agent=agent, slots=tuple(reserved), skipped=plan.skipped)


def _fail_to_start(routine_id: str, error: str) -> None:
    routine = Routine.objects.select_for_update().filter(pk=routine_id).first()
    if routine is None or routine.status != RoutineStatus.CLAIMED:
        return
    routine_store.move(routine, RoutineStatus.ERROR, next_run_at=None, last_error=error)
    events.append(
        routine.team_id, "routine_error", {"routine_id": routine.id, "error": error}, task_id=None
    )


# --- one slot --------------------------------------------------------------------


def fire_slot(routine: Routine, agent: Agent, slot_at: int) -> DispatchResult:
    """Materialize and dispatch one slot; every failure becomes an ``error`` result."""
    task: Task | None = None
    try:
        routine_store.check_not_human(agent)
        check_last_not_blocked(routine, slot_at)
        waiting = still_waiting(routine, slot_at)
        if waiting is not None:
            return DispatchResult(slot_at, FireOutcome.SATISFIED, waiting.id, path="waiting")
        task = materialize_task(routine, slot_at)
        path = capabilities(agent.runtime).integration
        storage.write(_record_dispatched, routine, slot_at, task.id, path)
        if path == "connected":
            return dispatch_connected(routine, agent, task, slot_at)
        return dispatch_one_shot(routine, agent, task, slot_at)
    except Exception as exc:
        log.warning("routine %s slot %s failed: %s", routine.id, slot_at, exc)
        detail = getattr(exc, "detail", None) or str(exc) or type(exc).__name__
        return DispatchResult(
            slot_at, FireOutcome.ERROR, task_id=task.id if task else None, error=detail
        )


def check_last_not_blocked(routine: Routine, slot_at: int) -> None:
    """Raise :class:`FireFailed` (the routine halts in ``error``, SPEC §5's
    error-halts) when the task of this routine's latest earlier fire is ``blocked``:
    its run failed hard, stopped at its ceiling or ended with debt, and a person must
    look first. A one-shot fire hands its run on and is recorded ``dispatched`` before
    the run ends, so without this a routine whose every run fails would mint (and pay
    for) one more blocked task each slot. A person who resumes the routine after such
    a halt lets it fire afresh: the halt is the latest fire then, and it is not asked
    again. A bound routine has its one task, whose own state decides."""
    if (routine.task_template or {}).get("team_task_id"):
        return
    latest = (
        RoutineFire.objects.filter(routine_id=routine.id, slot_at__lt=slot_at)
        .exclude(outcome=None)
        .order_by("-slot_at")
        .first()
    )
    if latest is None or latest.outcome == FireOutcome.ERROR or latest.task_id is None:
        return
    task = board_store.find_task(latest.task_id)
    if task is None or task.status != Status.BLOCKED:
        return
    # Its reason: the failure's error, else the first line of a person's or the
    # judge's note (a block's reason, the debt notes).
    lines = (task.error or task.feedback or "").strip().splitlines()
    why = f": {lines[0][:300]}" if lines else ""
    raise FireFailed(
        f"the task of its last fire, {task.id!r}, is blocked{why}; a person looks at it "
        "first (unblock or cancel it), then resumes this routine"
    )


def still_waiting(routine: Routine, slot_at: int) -> Task | None:
    """The task of this routine's latest earlier fire when it still waits on the board
    (``todo``: its agent paused or busy, its approval unanswered, its paths held):
    this slot's fire is that task, not a twin beside it. Unbounded otherwise -- an
    hourly routine into an agent paused for a weekend would leave 48 tasks (and 48
    approval requests) to run one after another once resumed, the storm the
    catch-up policy exists to prevent. ``catch_up: all`` asks for every slot, and a
    bound routine has one task anyway: neither is folded."""
    template = routine.task_template or {}
    if routine.catch_up == CatchUp.ALL or template.get("team_task_id"):
        return None
    earlier = (
        RoutineFire.objects.filter(routine_id=routine.id, slot_at__lt=slot_at)
        .exclude(task_id=None)
        .order_by("-slot_at")
        .values_list("task_id", flat=True)
        .first()
    )
    task = board_store.find_task(earlier) if earlier else None
    if task is None or task.status != Status.TODO or task.dropped:
        return None
    if task.approval_state == ApprovalState.DENIED:
        return None  # a person said no to that one: this slot asks again
    return task


def materialize_task(routine: Routine, slot_at: int) -> Task:
    """The board task for this fire: the bound task (must still be claimable), or a
    fresh one stamped ``scheduled_by='clawboo'``. A fresh task's id is derived from
    (routine, slot), so a re-run of the same slot finds the same task, never a twin."""
    template = routine.task_template or {}
    bound = template.get("team_task_id")
    if bound:
        task = board_store.find_task(bound)
        if task is None:
            raise FireFailed(f"bound task {bound!r} no longer exists")
        if task.status in ("done", "cancelled") or task.dropped:
            raise FireFailed(f"bound task {bound!r} is {task.status} and no longer claimable")
        return task
    metadata = {
        "routine_id": routine.id,
        "slot_at": slot_at,
        "kind": template.get("kind", "code"),
    }
    for key in ("repo_path", "model", "max_node_cents", "verify_cmd"):
        if template.get(key) is not None:
            metadata[key] = template[key]
    created = board_store.create_task(
        id=f"{board_checks.ROUTINE_FIRE_PREFIX}{routine.id}-{slot_at}",
        title=template.get("title") or routine_store.DEFAULT_TITLE,
        team=routine.team_id,
        description=template.get("description") or "",
        priority=template.get("priority", 0),
        scheduled_by=routine_store.FIRING_OWNER,
        metadata=metadata,
        file_mutating=template.get("kind", "code") == "code",
        repository=template.get("repository"),
        # The template's per-node cost cap is the run's ceiling (0: none).
        max_run_cents=template.get("max_node_cents") or None,
        approval_required=bool(template.get("approval_required", False)),
        touches=template.get("touches"),
        # The routine's own agent runs it. Unrouted, a fire its agent could not take
        # (paused by its breaker, busy) went to whichever agent of the team was free,
        # every slot: the routine ran on without its agent, the one waiting task
        # promised below never waited, and its reviewer could be its builder.
        route={"agent": routine.agent_id},
    )
    return created.task


def _record_dispatched(routine: Routine, slot_at: int, task_id: str, path: str) -> None:
    RoutineFire.objects.filter(routine_id=routine.id, slot_at=slot_at).update(task_id=task_id)
    events.append(
        routine.team_id,
        "routine_dispatched",
        {"routine_id": routine.id, "slot_at": slot_at, "path": path},
        task_id=task_id,
    )


# --- the one-shot path -----------------------------------------------------------


def run_executor(routine: Routine, agent: Agent, task: Task, ticket: str) -> None:
    """Hand the claimed task to the executor pipeline (worktree, adapter,
    verification, completion) as its own django-q2 task, after commit, so a long
    run never holds up the fire's bookkeeping or another fire."""
    from django.db import transaction
    from django_q.tasks import async_task

    transaction.on_commit(
        lambda: async_task(
            "executor.runner.run_claimed_task",
            task.id,
            agent.id,
            ticket,
            task_name=f"execute {task.id}",
        )
    )


# A fire whose claim is refused for a reason that passes (someone else holds the
# task; it waits for a person's approval; its agent is busy at its max_concurrent,
# paused or unhealthy; a cap budget is spent; it is routed to another agent; its
# paths overlap work in flight in its repository, scope_busy) leaves
# the task on the board, where the executor's workers take it once they may: the
# fire is satisfied, and the routine does not halt in error.
WAITS_ON_THE_BOARD = board_store.WAITS_ON_THE_BOARD


def dispatch_one_shot(routine: Routine, agent: Agent, task: Task, slot_at: int) -> DispatchResult:
    """Claim the board task for the agent and hand it to the executor seam.

    A lost claim (``conflict``) is success: someone else owns the task, so the work
    is happening; the fire is recorded ``satisfied``, never retried.
    """
    claim = _claim(task, agent)
    if claim is None:
        return DispatchResult(slot_at, FireOutcome.SATISFIED, task.id, path="one-shot")
    assert claim.ticket is not None
    run_executor(routine, agent, claim.task or task, claim.ticket)
    return DispatchResult(slot_at, FireOutcome.DISPATCHED, task.id, path="one-shot")


def _claim(task: Task, agent: Agent, *, pid: int | None = None) -> board_store.ClaimResult | None:
    """The fire's claim of its board task (``pid``: its run opened with it, in this
    process), or None when the board says the work is happening or waits on it
    (someone else owns the task: success, never retried)."""
    claim = board_store.claim(task.id, agent.id, agent.runtime, pid=pid)
    if claim.outcome in WAITS_ON_THE_BOARD:
        return None
    if claim.outcome == "not_found":
        raise FireFailed(f"task {task.id!r} vanished before it could be claimed")
    if claim.outcome != "ok" or claim.ticket is None:
        raise FireFailed(f"the claim was refused ({claim.outcome}): {claim.detail}")
    return claim


# --- the connected path ----------------------------------------------------------


def openclaw_timeout_ms() -> int:
    return int(settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS)


def dispatch_connected(routine: Routine, agent: Agent, task: Task, slot_at: int) -> DispatchResult:
    """The OpenClaw operator dispatch: claim (the run's execution opened with it), run
    the agent over the gateway on a stable per-routine session under the watchdog,
    watched like any run by the one run loop (:class:`executor.attempt.Attempt` on the
    in-process board): its usage recorded and priced as it streams, its ceiling and
    the cap budgets over it enforced, its end closed, classified and counted by the
    agent's breaker (:mod:`executor.settle`).

    On timeout, a gateway error or a dropped connection the run is abandoned (the
    gateway client aborts it there) and the board task released, so no in_progress
    task leaks; the fire is an error, a timeout saying it timed out. A run stopped at
    its ceiling leaves its task blocked (GOVERNANCE §3) and the fire an error; one
    stopped by a paused cap budget leaves its task in todo, held by the pause: the
    fire is satisfied, as a claim refused for that budget is.
    """
    if gateway.configured() is None:
        raise FireFailed(gateway.NOT_CONFIGURED)
    # The executor's rule before each run (an agent no operator approved, a task past
    # the delegation ceiling), asked before the claim: refused, nothing is claimed.
    refusal = dispatch_refusal(agent, task)
    if refusal is not None:
        raise FireFailed(refusal)
    claim = _claim(task, agent, pid=os.getpid())
    if claim is None:
        return DispatchResult(slot_at, FireOutcome.SATISFIED, task.id, path="connected")
    assert claim.ticket is not None
    task = claim.task or task
    if claim.execution is None:  # a run of the task is open already: never run unrecorded
        board_store.release(task.id, ticket=claim.ticket)
        raise FireFailed(f"task {task.id!r} already has a running execution; task released")
    run = settle.Run(task.id, claim.ticket, agent.id, claim.execution.id)
    send = GatewaySend(
        params=_params(routine, task, slot_at), request_id=f"routine-{routine.id}-{slot_at}"
    )
    try:
        port = FireBoard(agent, task, run, send, watchdog_ms=openclaw_timeout_ms())
        attempt = Attempt(port, port.heartbeat_s, Stall.of(agent.settings))
        # The claim just set the lease: the first beat is one interval away.
        result = attempt.run(OpenClawAdapter(send), port.request(), port.heartbeat_s)
        ended = attempt.settle(result)
    except Exception as exc:  # never leave a running execution or a claimed task behind
        log.exception("routine %s: the run of task %s failed", routine.id, task.id)
        # The executor's one rule for a failure around a run; the fire releases its
        # task (the routine halts in error, so a person looks after the first).
        settle_crash(run, exc, fail_task=False)
        raise FireFailed(f"the run failed: {type(exc).__name__}: {exc}; task released") from None
    return _connected_result(slot_at, task, ended, attempt.meter.stop, port)


def _connected_result(
    slot_at: int, task: Task, ended: str, stop: Stop | None, port: FireBoard
) -> DispatchResult:
    """What the fire made of its run's end (``ended``: :meth:`Attempt.settle`'s answer)."""
    if ended == "done":
        run_id = port.send.reply.run_id if port.send.reply is not None else None
        return DispatchResult(
            slot_at, FireOutcome.COMPLETED, task.id, path="connected", detail={"run_id": run_id}
        )
    if ended == "lost":
        raise FireFailed(f"the claim on task {task.id!r} was lost while it ran; run aborted")
    if stop is not None and not stop.ceiling:
        return DispatchResult(
            slot_at, FireOutcome.SATISFIED, task.id, path="connected", detail={"stopped": stop.why}
        )
    raise FireFailed(stop.why if stop is not None else port.failure or f"run {ended}")


def _params(routine: Routine, task: Task, slot_at: int) -> dict[str, Any]:
    """The ``agent`` request of a fire: its idempotency key is the slot's (a fire sent
    again is not a second run), its session the routine's (fires share one)."""
    params: dict[str, Any] = {
        "message": _prompt(task),
        "idempotencyKey": f"clawboo-{routine.id}-{slot_at}",
        "sessionKey": f"clawboo-routine-{routine.id}",
    }
    if routine.task_template.get("model"):
        params["model"] = routine.task_template["model"]
    return params


@dataclass
class GatewaySend:
    """The gateway dispatch of a fire's run (the ``openclaw`` adapter's ``dispatch=``):
    the fire's own request, sent with what the adapter resolved (the agent's OpenClaw
    agent id, the watchdog) and its feeds (usage, steps, cancel); keeps the reply."""

    params: dict[str, Any]
    request_id: str
    reply: GatewayReply | None = None

    def __call__(self, job: GatewayDispatch, cancel: threading.Event) -> GatewayReply:
        params = dict(self.params)
        if job.agent_id:  # none: the gateway's default agent, never the Clawboo id
            params["agentId"] = job.agent_id
        self.reply = gateway.run_agent(
            params,
            request_id=self.request_id,
            watchdog_s=job.timeout_s,
            cancel=cancel,
            on_usage=job.on_usage,
            on_step=job.on_step,
        )
        return self.reply


class FireBoard(LocalBoard):
    """The in-process board as a connected fire's run sees it: the executor's
    (heartbeat, usage, ceiling, spend stop, success), except that a failed run's task
    is released rather than failed -- the routine halts in error and a person looks
    -- and a succeeded run's output names the gateway's run."""

    def __init__(
        self, agent: Agent, task: Task, run: settle.Run, send: GatewaySend, *, watchdog_ms: int
    ) -> None:
        report = WorkReport(agent_id=agent.id, task_id=task.id, execution_id=run.execution_id)
        checkout = workspace(task, agent, False, Clock(report))
        super().__init__(agent, False, heartbeat_seconds(), report, task, run, checkout, None)
        self.send, self.watchdog_ms = send, watchdog_ms
        # Why the fire failed (the routine's last_error), once a failed run is settled.
        self.failure: str | None = None

    def request(self) -> RunRequest:
        # (The settings' model prices the tokens of a run the gateway names none for.)
        chosen = run_settings(self.agent.settings, self.task.metadata)
        return RunRequest(
            task_id=self.task.id,
            title=self.task.title,
            prompt=_prompt(self.task),
            cwd=self.checkout.cwd,
            timeout_s=self.watchdog_ms / 1000,
            settings=chosen,
            attempt_id=str(self.execution_id),
        )

    def fail(self, result: RunResult, message: str) -> None:
        settle.close_run(self.run, result, error=message, fail_task=False)
        board_store.release(self.task.id, ticket=self.ticket)
        self._kept(str(result.outcome), message)
        status = self.send.reply.status if self.send.reply is not None else None
        if status == "timeout":
            self.failure = f"{message} (watchdog {self.watchdog_ms} ms); task released"
        elif status == "error":
            self.failure = f"openclaw dispatch failed: {message}"
        else:  # refused before sending (bad settings), or stalled and cancelled
            self.failure = message

    def output_of(self, result: RunResult) -> dict[str, Any]:
        run_id = self.send.reply.run_id if self.send.reply is not None else None
        return {**super().output_of(result), "run_id": run_id}


def _prompt(task: Task) -> str:
    return f"{task.title}\n\n{task.description}".strip()


# --- the outcome -----------------------------------------------------------------


def record_outcome(routine_id: str, results: list[DispatchResult]) -> Routine | None:
    """Write each slot's outcome and settle the row. Runs in the write transaction.

    Success re-arms at the occurrence after the fired slot (a spent one-shot goes
    quiet with next_run_at null). Any failure halts the row in ``error`` with
    next_run_at null until a human resumes it: never a silent retry-burn.
    """
    routine = Routine.objects.select_for_update().filter(pk=routine_id).first()
    if routine is None or routine.status != RoutineStatus.RUNNING:
        return None  # deleted, or healed by boot-resume meanwhile
    stamp = dj_timezone.now()
    for result in results:
        RoutineFire.objects.filter(routine_id=routine.id, slot_at=result.slot_at).update(
            outcome=result.outcome,
            error=result.error,
            task_id=result.task_id,
            finished_at=stamp,
        )
    failures = [r for r in results if r.outcome == FireOutcome.ERROR]
    last_run = routine_store.now_ms() if results else routine.last_run_at
    if failures:
        failure = failures[-1]
        routine_store.move(
            routine,
            RoutineStatus.ERROR,
            next_run_at=None,
            last_error=failure.error,
            last_run_at=last_run,
        )
        events.append(
            routine.team_id,
            "routine_error",
            {"routine_id": routine.id, "slot_at": failure.slot_at, "error": failure.error},
            task_id=failure.task_id,
        )
        return routine
    tz = occurrence.check_timezone(routine.timezone)
    spec = occurrence.parse_spec(routine.cron_spec, tz)
    base = routine.fire_slot if routine.fire_slot is not None else routine_store.now_ms()
    next_run = None if spec.is_one_shot else occurrence.next_after(spec, tz, base)
    routine_store.move(
        routine,
        RoutineStatus.IDLE,
        next_run_at=next_run,
        last_run_at=last_run,
        last_error=None,
        fire_slot=None,
    )
    if next_run is not None:
        # The ticker armed while this row was in flight, blind to its next slot (at
        # worst the 60 s rescan): wake it, or a routine every 2 s fires once a minute.
        routine_store.poke()
    for result in results:
        events.append(
            routine.team_id,
            "routine_completed",
            {"routine_id": routine.id, "slot_at": result.slot_at, "outcome": result.outcome},
            task_id=result.task_id,
        )
    return routine
