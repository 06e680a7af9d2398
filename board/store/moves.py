"""The one place a task's status moves: the transition check, the side rules of
each move, and the verification gate.

Every write of the data layer that changes a task's status calls :func:`move` on
the row it locked, inside its write transaction. The one status write that does
not is the atomic claim (``todo → in_progress``, :mod:`board.store.claims`): its
guard is the conditional ``UPDATE … WHERE status = 'todo'`` itself.

The rules, in the order :func:`move` applies them:

* same status: nothing moves (the caller answers with a no-op);
* the pair must be in the transition table (:class:`IllegalTransition`);
* **into ``in_progress`` a live claim must come along**: either the claim the
  caller already holds (``claim=HELD``: an agent resuming its own task with its
  ticket) or a new one for a named agent (``claim=ClaimFor(...)``: a new attempt,
  a lease, a ticket). Without one the move is refused (:class:`ClaimRequired`), so
  no move leaves a task ``in_progress`` that nobody works;
* **back to ``todo``**, from anywhere: assignee, runtime, lease and verdict are
  cleared, so the task is claimable and a previous runtime's verdict cannot gate
  the next one's work (seed 000's release rule, for every road back to ``todo``) --
  but work given up mid-run (released, soft-failed, its lease lapsed) keeps a
  verdict a person set against it (:func:`clear_verdict`): only a person lifts it;
* **out of ``in_review`` while its change is being landed** (an approval's
  landing pending, or its merge-queue batch holding it): refused, whatever the
  target or the verb -- request-changes, a transition, cancel, block, an agent's
  resume (:func:`board.store.workspaces.refuse_while_landing`). The landing's own
  end (``finish_landing``) marks the landing done before it moves the task;
* **into ``done``**: the verification gate (:func:`gate_refusal`);
* out of ``blocked`` to work: the parked ``error`` is cleared.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from django.db import connection

from board import checks, judgement
from board.errors import ClaimRequired, IllegalTransition, VerificationRequired
from board.models import PROMOTABLE_VERDICTS, Task, TaskDep
from board.store._base import add_comment_row, record_event
from board.store.landings import refuse_while_landing
from board.store.tickets import next_run_due
from board.transitions import Status, allowed_transitions_from, is_transition_allowed
from core.errors import ValidationFailed

# The one named exception to the verification gate (seed 004): a worktree that
# completed with an empty work diff lands ``done`` whatever its verdict says,
# because there is no deliverable a verdict could be about. Only
# ``settle_from_worktree(empty=True)`` passes it; the verdict is kept, not erased.
EMPTY_DIFF: Final = "empty-diff"
GATE_WAIVERS: Final = frozenset({EMPTY_DIFF})

# Into in_progress with the caller's own claim (its ticket was checked by the verb).
HELD: Final = "held"


@dataclass(frozen=True)
class ClaimFor:
    """A claim taken by a move into ``in_progress`` for a named agent (a person
    resuming a blocked task for an agent, a reviewer requesting changes)."""

    agent_id: str
    runtime: str | None = None
    lease_ms: int | None = None


_CLAIM_FIELDS = frozenset({"assignee_agent_id", "assignee_runtime", "lease_until"})
_VERDICT_FIELDS = frozenset(
    {"verdict", "verdict_evidence", "verdict_at", "human_override", "verification_detail"}
)


def check_override(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValidationFailed("human_override", "must be an object {by, reason}")
    by, reason = value.get("by"), value.get("reason")
    if not isinstance(by, str) or not by.strip() or len(by) > 200:
        raise ValidationFailed("human_override", "names who overrides in 'by'")
    if not isinstance(reason, str) or not reason.strip() or len(reason) > checks.TEXT_MAX:
        raise ValidationFailed("human_override", "gives a 'reason'")
    return {"by": by.strip(), "reason": reason.strip()}


# --- the verification gate ----------------------------------------------------------


def gate_refusal(task: Task, override: dict[str, str] | None) -> VerificationRequired | None:
    """The gate, as a question: the refusal a move of ``task`` to ``done`` meets, or None.

    A stored verdict that is not promotable (``fail``, ``completed_with_debt``) needs
    an explicit human override; no verdict (unverified) passes. Callers that must
    decide before doing irreversible work (landing a change on its base branch) ask
    here first; :func:`move` asks again inside the write transaction.
    """
    if task.verdict is None or task.verdict in PROMOTABLE_VERDICTS or override is not None:
        return None
    return VerificationRequired(
        f"task {task.id!r} carries a {task.verdict!r} verdict; a human override "
        "is needed to mark it done",
        verdict=task.verdict,
    )


def _pass_gate(
    task: Task, override: dict[str, str] | None, waiver: str | None, at: dt.datetime
) -> set[str]:
    if waiver is not None:
        if waiver not in GATE_WAIVERS:
            raise ValueError(f"unknown verification waiver {waiver!r}")
        return set()
    refusal = gate_refusal(task, override)
    if refusal is not None:
        raise refusal
    if override is None or task.verdict in (None, *PROMOTABLE_VERDICTS):
        return set()
    task.human_override = {**override, "at": at.isoformat(), "verdict": task.verdict}
    add_comment_row(
        task,
        override["by"],
        f"Human override of a {task.verdict!r} verification verdict: {override['reason']}",
        at,
    )
    record_event(task, "verification_overridden", prev_status=task.status, actor=override["by"])
    return {"human_override"}


# --- claims and releases -----------------------------------------------------------


def clear_claim(task: Task) -> None:
    task.assignee_agent_id = None
    task.assignee_runtime = None
    task.lease_until = None


def clear_verdict(task: Task, *, keep_rounds: bool = False, given_up: bool = False) -> None:
    """No verdict on the task; ``keep_rounds``: its judge's fix rounds stay counted
    (:func:`board.judgement.rounds_kept`), unseen until the next verdict.

    ``given_up``: the work went back mid-run (released, soft-failed, its lease
    lapsed), which the agent side can bring about itself. A verdict a person set
    against it by hand (``fail``, ``completed_with_debt``) then stands, whole: the
    agent side never sets or lifts a verdict (GOVERNANCE §6), so giving the work
    back and claiming it again must not clear the gate in its way. A person lifts
    it (a new verdict, an override, a move back to ``todo``); the server's judge
    replaces it when it judges new work."""
    if (
        given_up
        and task.verdict is not None
        and task.verdict not in PROMOTABLE_VERDICTS
        and judgement.set_by_person(task.verification_detail) is not None
    ):
        return
    kept = judgement.rounds_kept(task.verification_detail) if keep_rounds else None
    task.verdict = None
    task.verdict_evidence = None
    task.verdict_at = None
    task.human_override = None
    task.verification_detail = kept


def _take_claim(task: Task, claim: ClaimFor, at: dt.datetime) -> set[str]:
    """What the atomic claim stamps, for a claim a move takes: a new attempt."""
    span = claim.lease_ms or checks.DEFAULT_LEASE_MS
    task.assignee_agent_id = claim.agent_id
    task.assignee_runtime = claim.runtime
    task.lease_until = at + dt.timedelta(milliseconds=span)
    task.lease_duration_ms = span
    task.attempts += 1
    fields = {"assignee_agent_id", "assignee_runtime", "lease_until", "lease_duration_ms"}
    fields.add("attempts")
    if task.started_at is None:
        task.started_at = at
        fields.add("started_at")
    return fields


def _renew_held(task: Task, at: dt.datetime) -> set[str]:
    """A claim's own work back in progress (resumed from review): a fresh lease of
    its span, and its next run due."""
    span = task.lease_duration_ms or checks.DEFAULT_LEASE_MS
    task.lease_until = at + dt.timedelta(milliseconds=span)
    return {"lease_until"} | next_run_due(task)


_DEPENDENTS_DONE_SQL = (
    f"UPDATE {Task._meta.db_table} SET unmet_deps = unmet_deps - 1 "  # noqa: S608
    f"WHERE id IN (SELECT task_id FROM {TaskDep._meta.db_table} WHERE depends_on_task_id = %s)"
)


def _dependency_done(task_id: str) -> None:
    """A task reached done (terminal): each direct dependent waits on one fewer."""
    with connection.cursor() as cursor:
        cursor.execute(_DEPENDENTS_DONE_SQL, [task_id])


# --- the move ----------------------------------------------------------------------


def move(
    task: Task,
    to: str,
    *,
    at: dt.datetime,
    override: dict[str, str] | None = None,
    claim: ClaimFor | str | None = None,
    waiver: str | None = None,
    lifts_verdict: bool = False,
) -> set[str]:
    """Move the locked ``task`` to ``to`` and return the fields that changed.

    Must run inside the write transaction that locked the row (``lock_task``): the
    check is against the freshly read status. Same status returns an empty set and
    changes nothing. Raises :class:`IllegalTransition`, :class:`ClaimRequired` or
    :class:`VerificationRequired` before anything is assigned. The caller persists
    the task (``commit_change``) with the fields returned.

    ``lifts_verdict``: a person's own move back to ``todo`` (:func:`board.store.
    transition`, which the roles table keeps from the agent side), which clears a
    person's verdict too; every other road back from ``in_progress`` keeps it.
    """
    prev = task.status
    if prev == to:
        return set()
    if not is_transition_allowed(prev, to):
        raise IllegalTransition(task.id, prev, to, allowed_transitions_from(prev))
    if prev == Status.IN_REVIEW:
        # Every road out of review, one rule: a task cancelled or blocked while its
        # approval lands would have the change on its base all the same.
        refuse_while_landing(task)
    if to == Status.IN_PROGRESS and claim is None:
        raise ClaimRequired(
            f"moving task {task.id!r} into in_progress needs a claim: name the agent "
            "who works it (agent_id)",
            task_id=task.id,
        )
    fields = {"status"}
    if to == Status.DONE:
        fields |= _pass_gate(task, override, waiver, at)
        task.completed_at = at
        fields.add("completed_at")
        _dependency_done(task.id)
    if to == Status.IN_PROGRESS:
        if isinstance(claim, ClaimFor):
            fields |= _take_claim(task, claim, at)
        elif claim == HELD:
            fields |= _renew_held(task, at)
        else:
            raise ValueError(f"unknown claim {claim!r}")
    else:
        task.lease_until = None
        fields.add("lease_until")
    if to == Status.TODO:
        clear_claim(task)
        # Work given up mid-run (released, soft-failed, its lease lapsed) keeps its
        # fix rounds, and a person's verdict against it; a person moving a blocked
        # task back starts it afresh.
        clear_verdict(
            task,
            keep_rounds=prev == Status.IN_PROGRESS,
            given_up=prev == Status.IN_PROGRESS and not lifts_verdict,
        )
        fields |= _CLAIM_FIELDS | _VERDICT_FIELDS
    # Leaving blocked for anywhere it can be worked again: the reason it was parked
    # no longer describes it (a backlog card showing an old error reads as broken),
    # and its lapses start afresh -- else a task parked at its third lapse would be
    # parked again at the next one (a worker restarted), however long it ran well.
    if prev == Status.BLOCKED and to in (Status.TODO, Status.IN_PROGRESS, Status.BACKLOG):
        task.error = None
        task.abandonments = 0
        fields |= {"error", "abandonments"}
    task.status = to
    return fields


_KIND_BY_TARGET: dict[str, str] = {
    Status.DONE: "completed",
    Status.CANCELLED: "cancelled",
    Status.BLOCKED: "blocked",
    Status.IN_REVIEW: "review_requested",
    Status.BACKLOG: "status_changed",
}


def kind_of(prev: str, to: str) -> str:
    """The task-change event kind of a plain move from ``prev`` to ``to``."""
    if to == Status.TODO:
        back_to_todo: dict[str, str] = {Status.IN_PROGRESS: "released", Status.BLOCKED: "unblocked"}
        return back_to_todo.get(prev, "status_changed")
    if to == Status.IN_PROGRESS:
        return "resumed" if prev in (Status.IN_REVIEW, Status.BLOCKED) else "status_changed"
    return _KIND_BY_TARGET.get(to, "status_changed")
