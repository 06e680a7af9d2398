"""The rule of a run stopped for spend (GOVERNANCE §3), for local and remote runs alike.

A run's usage so far is priced (:mod:`executor.pricing`) and written to its
execution (:func:`board.store.spend.record_usage`, which adds it to the task, its
tree and the budgets over it); the run must stop when it reaches its ceiling
(``max_run_cents``) or when a cap budget covering it is paused. A stopped run's
execution is closed ``cancelled`` with ``error_class: "budget"`` by its worker, and
:func:`settle_stop` decides the task's next status: ``blocked`` at the run's own
ceiling (never retried by itself: a person raises it and moves the task back to
``todo``), back to ``todo`` for a paused cap budget (the pause holds it); with a
comment and one notification. The local executor calls these in-process; a remote worker's usage
reports and close reach them through the API (:mod:`executor.api`).
"""

from __future__ import annotations

from board import store
from board.store import spend as spend_store
from executor import pricing
from executor.attempt import Stop

__all__ = ["Stop", "ceiling_reached", "record", "settle_stop"]


def ceiling_reached(usage: spend_store.Usage, ceiling: int | None) -> Stop | None:
    """Why a run that cost ``usage`` so far must stop at its ceiling, or None."""
    why = pricing.ceiling_reached(usage.cost_cents, ceiling, usage.cost_status)
    return None if why is None else Stop(why, ceiling=True)


def record(
    execution_id: int,
    usage: spend_store.Usage,
    ceiling: int | None,
    *,
    final: bool = False,
    remote: bool = False,
) -> Stop | None:
    """Write the run's usage so far (``final``: its runtime's final figures, which may
    be lower -- a remote worker's never below a price it reported); why it must stop
    (ceiling, paused budget), or None."""
    recorded = spend_store.record_usage(execution_id, usage, final=final, remote=remote)
    # What counts is what was recorded: a report below it stops the run all the same.
    over = ceiling_reached(usage if recorded is None else recorded.usage, ceiling)
    if over is not None:
        return over
    if recorded is not None and recorded.paused:
        budget = recorded.paused[0]
        return Stop(f"stopped: the {budget.scope} {budget.scope_id!r} {budget.pause_cause()}")
    return None


def settle_stop(task_id: str, ticket: str, stop: Stop) -> bool:
    """After the stopped run's execution is closed: the task ``blocked`` (its ceiling)
    or back to ``todo`` (a paused cap budget), if the ticket still holds it, with the
    comment and the one ``budget_stopped`` event (:func:`board.store.stop_for_spend`).
    False when the claim was lost meanwhile (nothing is written then)."""
    settled = store.stop_for_spend(task_id, stop.why, ticket=ticket, at_ceiling=stop.ceiling)
    return not settled.declined
