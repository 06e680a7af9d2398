"""The rule of a run stopped for spend (GOVERNANCE §3), for local and remote runs alike.

A run's usage so far is priced (:mod:`executor.pricing`) and written to its
execution (:func:`board.store.spend.record_usage`, which adds it to the task, its
tree and the budgets over it); the run must stop when it reaches its ceiling
(``max_run_cents``) or when a cap budget covering it is paused. A stopped run's
execution is closed ``cancelled`` with ``error_class: "budget"`` by its worker, and
:func:`settle_stop` sends the task back to ``todo`` with a comment and one
notification. The local executor calls these in-process; a remote worker's usage
reports and close reach them through the API (:mod:`executor.api`).
"""

from __future__ import annotations

from board import store
from board.store import spend as spend_store
from executor import pricing


def ceiling_reached(usage: spend_store.Usage, ceiling: int | None) -> str | None:
    """Why a run that cost ``usage`` so far must stop at its ceiling, or None."""
    return pricing.ceiling_reached(usage.cost_cents, ceiling, usage.cost_status)


def record(execution_id: int, usage: spend_store.Usage, ceiling: int | None) -> str | None:
    """Write the run's usage so far; why it must stop (ceiling, paused budget), or None."""
    recorded = spend_store.record_usage(execution_id, usage)
    over = ceiling_reached(usage, ceiling)
    if over is not None:
        return over
    if recorded is not None and recorded.paused:
        budget = recorded.paused[0]
        return (
            f"stopped: the {budget.scope} {budget.scope_id!r} reached its "
            f"{budget.limit_cents}¢ {budget.window} budget (cap)"
        )
    return None


def settle_stop(task_id: str, ticket: str, why: str) -> bool:
    """After the stopped run's execution is closed: the task back to ``todo`` (if the
    ticket still holds it) with the comment and the one ``budget_stopped`` event.
    False when the claim was lost meanwhile (nothing is written then)."""
    released = store.release(task_id, ticket=ticket)
    if released.declined:
        return False
    spend_store.note_budget_stop(task_id, why)
    return True
