"""Routine and schedule refusals: one type per refusal, each with its ``code``.

The API maps codes to HTTP in one place (``core.api.status.HTTP_STATUS``); the
status each one answers with is noted in its docstring.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import ClawbooError, Conflict, Forbidden, NotFound, ValidationFailed


class RoutineNotFound(NotFound):
    def __init__(self, routine_id: str) -> None:
        super().__init__(f"routine {routine_id!r} does not exist", routine_id=routine_id)


class ScheduleNotFound(NotFound):
    def __init__(self, schedule_id: str) -> None:
        super().__init__(f"schedule {schedule_id!r} does not exist", schedule_id=schedule_id)


# A refused move a person asked for (the routines page's buttons, the admin's actions,
# the API's pause/resume/run-now), in the page's words: "cannot move from paused to
# queued" named ledger states ("queued", "idle") shown nowhere else.
_ASKED = {"queued": "be run now", "idle": "be resumed", "paused": "be paused"}
_BECAUSE = {
    "paused": "it is paused (resume it first)",
    "error": "it is in error (resume it first)",
    "queued": "a fire is on its way (wait for it to finish)",
    "claimed": "a fire is on its way (wait for it to finish)",
    "running": "a fire is running (wait for it to finish)",
}


class IllegalRoutineTransition(ClawbooError):
    """The ledger move is not in :data:`routines.models.TRANSITIONS` (409)."""

    code = "illegal_transition"

    def __init__(self, routine_id: str, from_status: str, to_status: str, allowed: Sequence[str]):
        asked, because = _ASKED.get(to_status), _BECAUSE.get(from_status)
        detail = (
            f"routine {routine_id!r} cannot {asked}: {because}"
            if asked and because
            else f"routine {routine_id!r} cannot move from {from_status} to {to_status}"
        )
        super().__init__(detail, **{"from": from_status, "to": to_status, "allowed": list(allowed)})
        self.from_status = from_status
        self.to_status = to_status


class RoutineBusy(Conflict):
    """A schedule edit while a fire is in flight (queued/claimed/running): 409."""


class DuplicateFiringOwnerError(ClawbooError):
    """The bound task already has another firing owner (409, never retried)."""

    code = "ownership_conflict"


class BoundRecurringScheduleError(ClawbooError):
    """A routine bound to an existing task must be a one-shot (400)."""

    code = "bound_recurring"


class HumanParticipantRefused(ValidationFailed):
    """A routine fires an agent's run; a person is not run (400 on ``agent_id``). The
    refusal says what to do instead: a task routed to that person, or a routine for
    an agent that runs."""


class ObserveOnlyError(Forbidden):
    """A write to a schedule source that is only observed, never managed (403)."""

    code = "observe_only"


class TeamTaskDomainViolationError(ClawbooError):
    """A team-task schedule aimed at a runtime-own-life source (422)."""

    code = "domain_violation"
