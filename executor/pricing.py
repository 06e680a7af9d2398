"""What a run costs: the runtime's own price, or its tokens priced by the table.

``CLAWBOO_MODEL_PRICES`` (settings) is ``{model: {in, out, cache_read, cache_write}}``
in cents per million tokens; a run's cost is kept in millicents (:mod:`board.money`).
A run whose runtime gave a price is ``reported``; one
that gave tokens of a model in the table is ``estimated``; anything else (no
usage, a model the table does not know) is ``unknown`` and costs 0 in the sums.
While a run streams, its usage so far is priced the same way, for the ceiling.

The arithmetic (:func:`cents_at`, :class:`Tokens`) needs no Django: a remote worker
(:mod:`executor.remote`) prices its run's reports with the rates and the ceiling
the server gave it, to stop the run at the report that reaches its ceiling as the
local executor does, not a server round-trip later.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings

from board.money import MILLICENTS_PER_CENT, cents_of
from executor.runtimes.base import UsageSoFar

if TYPE_CHECKING:
    from board.store.spend import Usage

PER = Decimal(1_000_000)
RATE_KEYS = ("in", "out", "cache_read", "cache_write")


# A runtime's usage report: its counts (None: not reported), its price, its model.
Tokens = UsageSoFar


def price_table() -> Mapping[str, Any]:
    table = settings.CLAWBOO_MODEL_PRICES
    return table if isinstance(table, Mapping) else {}


def rates_for(model: str | None) -> dict[str, Decimal] | None:
    """The model's rates (cents per million tokens), or None when it is not priced.

    A provider prefix ("fake/fake-model", "anthropic/claude-…") is tried without it."""
    if not model:
        return None
    table = price_table()
    entry = table.get(model)
    if entry is None and "/" in model:
        entry = table.get(model.rsplit("/", 1)[-1])
    if not isinstance(entry, Mapping):
        return None
    rates: dict[str, Decimal] = {}
    for key in RATE_KEYS:
        value = entry.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return None
        rates[key] = Decimal(str(value))
    return rates


def estimate_millicents(tokens: Tokens) -> int | None:
    """The tokens priced by the table, in millicents (half up); None if unpriced."""
    rates = rates_for(tokens.model)
    return None if rates is None else millicents_at(tokens, rates)


def estimate_cents(tokens: Tokens) -> int | None:
    """The tokens priced by the table, in whole cents (half up); None if unpriced."""
    estimate = estimate_millicents(tokens)
    return None if estimate is None else cents_of(estimate)


def millicents_at(tokens: Tokens, rates: Mapping[str, Any]) -> int:
    """The tokens priced at ``rates`` (cents per million tokens, by :data:`RATE_KEYS`),
    in millicents, half up: a run of a few thousand tokens costs something."""

    def rate(key: str) -> Decimal:
        return Decimal(str(rates.get(key, 0)))

    total = (
        (
            (tokens.tokens_in or 0) * rate("in")
            + (tokens.tokens_out or 0) * rate("out")
            + (tokens.cache_read or 0) * rate("cache_read")
            + (tokens.cache_write or 0) * rate("cache_write")
        )
        * MILLICENTS_PER_CENT
        / PER
    )
    return int(total.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def cents_at(tokens: Tokens, rates: Mapping[str, Any]) -> int:
    """The tokens priced at ``rates``, in whole cents (:func:`board.money.cents_of`)."""
    return cents_of(millicents_at(tokens, rates))


def reported_millicents(tokens: Tokens) -> int | None:
    """The runtime's own price, in millicents; None when it gave none."""
    if tokens.cost_millicents is not None:
        return tokens.cost_millicents
    if tokens.cost_cents is not None:
        return tokens.cost_cents * MILLICENTS_PER_CENT
    return None


def running_cents(tokens: Tokens, rates: Mapping[str, Any] | None) -> int | None:
    """What a streamed report costs so far, for its ceiling: the runtime's own price,
    else its tokens at ``rates``; None when neither is known."""
    reported = reported_millicents(tokens)
    if reported is not None:
        return cents_of(reported)
    if rates is None or not tokens.reported_any:
        return None
    return cents_at(tokens, rates)


def ceiling_reached(cents: int | None, ceiling: int | None, how: str) -> str | None:
    """Why a run that cost ``cents`` so far (``how`` it was known) must stop at its
    ``ceiling``, or None: the one wording, for local and remote runs alike."""
    if ceiling is None or cents is None or cents < ceiling:
        return None
    return (
        f"stopped: the run cost {cents}¢ ({how}), "
        f"reaching its ceiling of {ceiling}¢ (max_run_cents); raise max_run_cents "
        "(or split the task) and move it back to todo to run it again"
    )


def usage_of(tokens: Tokens) -> Usage:
    """The run's usage as the board records it, with its cost and how it was known."""
    from board.models import CostStatus
    from board.store.spend import Usage

    millicents, status = 0, CostStatus.UNKNOWN
    reported = reported_millicents(tokens)
    if reported is not None:
        millicents, status = reported, CostStatus.REPORTED
    elif tokens.reported_any:
        estimate = estimate_millicents(tokens)
        if estimate is not None:
            millicents, status = estimate, CostStatus.ESTIMATED
    # A runtime's stream is the agent's own output: a figure past what one run may
    # have is recorded as the most (the API refuses one before it gets here).
    return Usage(
        tokens_in=tokens.tokens_in or 0,
        tokens_out=tokens.tokens_out or 0,
        cache_read=tokens.cache_read or 0,
        cache_write=tokens.cache_write or 0,
        cost_millicents=millicents,
        cost_status=status,
    ).bounded()
