"""The board's refusals (one type each; HTTP mapping lives with the API)."""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import ClawbooError, Conflict, NotFound, RateLimited, ValidationFailed

__all__ = [
    "BudgetNotFound",
    "BudgetPaused",
    "ApprovalRequired",
    "AgentPaused",
    "ClaimConflict",
    "LimitReached",
    "NotRouted",
    "ClaimRequired",
    "DependencyCycle",
    "DepthExceeded",
    "IllegalTransition",
    "LandingUnderway",
    "NotFileMutating",
    "RootRateLimited",
    "ScopeBusy",
    "TaskNotFound",
    "TaskIdTaken",
    "TooManyChildren",
    "ValidationFailed",
    "VerificationRequired",
]


class TaskNotFound(NotFound):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} does not exist", task_id=task_id)
        self.task_id = task_id


class TaskIdTaken(Conflict):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task id {task_id!r} is already used by a different task")


class ClaimConflict(Conflict):
    """Someone else holds the task (or it is not claimable). Never retry."""


class LandingUnderway(Conflict):
    """An approval is landing the task's change now: the task stays in review
    until the landing settles (it is done then, or still in review)."""

    code = "landing_underway"


class AgentPaused(ClawbooError):
    """The agent is paused (by a person or its breaker) or unhealthy: it claims
    nothing until it is resumed or its preflight passes."""

    code = "agent_paused"


class NotRouted(ClawbooError):
    """The task's route names another agent, runtime or labels. Never retry."""

    code = "not_routed"


class LimitReached(ClawbooError):
    """The agent (or its team) already holds its ``max_concurrent`` tasks in_progress."""

    code = "limit_reached"


class ScopeBusy(ClawbooError):
    """The task's scope (the paths it touches) overlaps that of a task of the same
    repository in progress or waiting to land (:mod:`board.store.scoping`): the
    claim waits until that one lands or leaves."""

    code = "scope_busy"


class IllegalTransition(ClawbooError):
    code = "illegal_transition"

    def __init__(self, task_id: str, from_status: str, to_status: str, allowed: Sequence[str]):
        # A second approve or move to where the task is: "cannot move from done to
        # done" read as if the move had failed, where it had happened before.
        detail = (
            f"task {task_id!r} is {from_status} already"
            if from_status == to_status
            else f"task {task_id!r} cannot move from {from_status} to {to_status}"
        )
        super().__init__(
            detail,
            **{"from": from_status, "to": to_status, "allowed": list(allowed)},
        )
        self.task_id = task_id
        self.from_status = from_status
        self.to_status = to_status
        self.allowed = list(allowed)


class ClaimRequired(ClawbooError):
    """A move into ``in_progress`` that brings no claim: nobody would work the task."""

    code = "claim_required"


class VerificationRequired(ClawbooError):
    code = "verification_required"


class DependencyCycle(ClawbooError):
    code = "cycle"


class DepthExceeded(ClawbooError):
    code = "depth_exceeded"


class TooManyChildren(ClawbooError):
    code = "too_many_children"


class RootRateLimited(RateLimited):
    """Too many root creates by agents in the rolling window."""


class NotFileMutating(ClawbooError):
    code = "not_file_mutating"


class BudgetNotFound(NotFound):
    def __init__(self, budget_id: str) -> None:
        super().__init__(f"budget {budget_id!r} does not exist")


class BudgetPaused(ClawbooError):
    """A cap budget that covers the work has reached its limit: nothing more is claimed
    until a person resumes it or its window ends. Never retry before then. Or (with
    ``detail``) what is left of it is held for the runs in flight in its scope: the
    claim waits for them to finish."""

    code = "budget_paused"

    def __init__(self, budget: object, detail: str | None = None) -> None:
        scope, scope_id = getattr(budget, "scope", "?"), getattr(budget, "scope_id", "?")
        cause = getattr(budget, "pause_cause", None)
        spent = cause() if callable(cause) else "has spent its budget"
        super().__init__(
            detail or f"the {scope} {scope_id!r} {spent}; resume it or wait for its window",
            budget=getattr(budget, "pk", None),
            scope=scope,
            scope_id=scope_id,
        )


class ApprovalRequired(ClawbooError):
    """The task waits for a person's approval (GOVERNANCE §5): no claim takes it
    until one approves. Retrying is pointless until then."""

    code = "approval_required"
