"""How claims a cap budget covers are admitted side by side while the budget is far
from its limit, and take turns near it (GOVERNANCE §3: a cap is passed by at most
one run's ceiling).

A claim reads what the budget's scope has spent plus what the runs in flight there
may still spend (:func:`board.store.spend.cap_exclusions`); two claims that read it
at once do not see each other. So, on PostgreSQL, a claim that does not take turns
holds one of the budget's :data:`CAP_LANES` lanes (a transaction-scoped advisory
lock) before it reads what is in flight (and, in the same statement, what the budget
spent: a usage report between two reads would be counted in neither): at most that
many claims are admitted unseen by each other. Each is admitted only while the figure it read plus
``CAP_LANES`` times its own run's ceiling is within half the budget's allowance --
so claims admitted side by side never take the scope past its allowance, however
their commits interleave. A claim tries the lanes without waiting; finding every
lane busy, it waits for one of them (any: whoever held it has committed or rolled
back when it gets it) and reads the budget again -- a queue of claims far from the
limit stays side by side instead of taking turns. Nearer the limit (or with any
run of unknown ceiling, a budget paused or held) the claim is re-run taking turns:
it holds every lane of the budget, waiting for the claims in them, and the
budget's row ``FOR UPDATE``, and is admitted by the exact rule, seeing every run
admitted before it. On SQLite one writer at a time runs the claim, so every claim
sees all before it and no lane is taken.

Lanes are waited for in one order -- by budget id, and a turns claim's by lane
within its budget -- and a claim waits only for lanes after every lane it holds
(else it takes turns), so no two claims each wait for a lane the other holds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from board.models import Budget

# Claims admitted side by side per cap budget, far from its limit.
CAP_LANES = 8
# The advisory locks' first key ("CLAW"): lanes are (this, budget id × lanes + lane).
_LANE_KEY = 0x434C4157
# A column of the claim's read of its cap budgets (side by side): one free lane of the
# row's budget taken, tried in a random order, or NULL when every lane is busy.
_TRY_A_LANE_SQL = (
    "(SELECT lane FROM unnest(%s::int[]) AS lane "
    "WHERE pg_try_advisory_xact_lock(%s, ({budget_id} * %s + lane)::int) LIMIT 1)"
)
# Waiting for one lane of each busy budget, in the order given (by budget id).
_ONE_LANE_SQL = (
    "SELECT pg_advisory_xact_lock(%s, (budget * %s + lane)::int) "
    "FROM unnest(%s::int[], %s::int[]) AS waits(budget, lane)"
)
_ALL_LANES_SQL = (
    "SELECT pg_advisory_xact_lock(%s, %s * %s + lane) "
    "FROM generate_series(0, %s - 1) AS lane ORDER BY lane"
)


class TakeTurns(Exception):  # noqa: N818 - an instruction to the claim, not a failure
    """A claim admitted side by side came too near a cap budget's limit for that:
    its transaction is rolled back (its lanes with it) and it is run again taking
    turns."""


@dataclass
class Admission:
    """One claim's admission by the cap budgets over it. ``turns``: it takes turns
    (holds every lane); else it holds one lane per budget (tried, or waited for when
    every lane was busy) and must confirm, once its run's ceiling is known, that
    each budget was far enough from its limit."""

    turns: bool
    # Per cap budget admitted in a lane: what its scope had spent and may still
    # spend (cents) when the claim read it, and what the budget allows.
    seen: list[tuple[int, int]] = field(default_factory=list)
    # The claiming agent's run ceiling (cents; None: none), once a read of the cap
    # budgets brought its settings along.
    agent_ceiling: int | None = None
    agent_ceiling_known: bool = False
    # Side by side, after waiting for a lane: the budgets it holds a lane of.
    waited: set[int] = field(default_factory=set)

    @property
    def side_by_side(self) -> bool:
        return not self.turns and connection.vendor == "postgresql"

    def lane_column(self, budget_id: str) -> tuple[str, list[Any]]:
        """Side by side: the SQL of a column, beside each budget row the claim reads
        (``budget_id`` names its id), that takes one of its lanes (read in the same
        statement: no round trip of its own); :meth:`entered` checks what it took."""
        lanes = random.sample(range(CAP_LANES), CAP_LANES)  # noqa: S311 - spreads claims
        return _TRY_A_LANE_SQL.format(budget_id=budget_id), [lanes, _LANE_KEY, CAP_LANES]

    def entered(self, budget_ids: list[int], lanes: list[int | None]) -> bool:
        """Side by side, the lanes :meth:`lane_column` took beside ``budget_ids`` (in
        id order). For each busy budget (every lane held) wait for one of its lanes,
        in id order, and answer True: the claim reads its budgets again, now that it
        holds a lane of each. A claim holding a lane of a budget after a busy one
        takes turns instead (:class:`TakeTurns`): waiting out of order could close a
        circle of waits."""
        busy = [budget for budget, lane in zip(budget_ids, lanes, strict=True) if lane is None]
        if not busy:
            return False
        held = [budget for budget, lane in zip(budget_ids, lanes, strict=True) if lane is not None]
        if held and max(held) > min(busy):
            raise TakeTurns
        # Any lane will do: its holder is admitted already. Random spreads the waiters.
        waits = [random.randrange(CAP_LANES) for _ in busy]  # noqa: S311
        with connection.cursor() as cursor:
            cursor.execute(_ONE_LANE_SQL, [_LANE_KEY, CAP_LANES, busy, waits])
        self.waited = set(busy) | set(held)
        return True

    def covers(self, budget_ids: list[int]) -> None:
        """After a wait, the budgets read again: one the claim holds no lane of
        (created meanwhile) sends it to take turns."""
        if not set(budget_ids) <= self.waited:
            raise TakeTurns

    def enter(self, budgets: list[Budget]) -> None:
        """Taking turns on PostgreSQL: hold every lane of ``budgets`` (in id order),
        waiting for the claims in them."""
        if connection.vendor != "postgresql" or not self.turns:
            return
        with connection.cursor() as cursor:
            for budget in budgets:
                cursor.execute(_ALL_LANES_SQL, [_LANE_KEY, budget.pk, CAP_LANES, CAP_LANES])

    def note(self, committed: int | None, allowance: int) -> None:
        """A budget admitted this claim in a lane: its scope's spend plus the headroom
        in flight (None: a run in flight has no ceiling)."""
        if committed is None:
            raise TakeTurns
        self.seen.append((committed, allowance))

    def confirm(self, ceiling: int | None) -> None:
        """The claim's run has ``ceiling`` (None: none): raise :class:`TakeTurns`
        unless every budget that admitted it in a lane stays far from its limit."""
        if not self.side_by_side:
            return
        for committed, allowance in self.seen:
            if ceiling is None or committed + CAP_LANES * ceiling > allowance // 2:
                raise TakeTurns
