"""Money's one unit and its one rounding (GOVERNANCE §3), with no Django: the remote
worker prices its run's reports with it too.

A cost is kept in millicents (thousandths of a cent), so a run under half a cent
counts and many cheap runs add up to what they cost. Every ``*_cents`` figure the
API shows is the millicent figure rounded half up (:func:`cents_of`), and every rule
that compares cents (a run's ceiling, a budget's 80 % and 100 %) compares that
rounding, so a figure shown and the status beside it agree.
"""

from __future__ import annotations

MILLICENTS_PER_CENT = 1000


def cents_of(millicents: int) -> int:
    """Whole cents of a millicent figure, half up (the figures are never negative)."""
    return (millicents + MILLICENTS_PER_CENT // 2) // MILLICENTS_PER_CENT
