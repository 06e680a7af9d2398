"""Error classes and the breaker: a failing agent stops itself (GOVERNANCE §2).

:func:`classify` names why a run failed from what its adapter returned;
:func:`after_run` counts the agent's consecutive failed runs (and file-mutating
runs that changed nothing) and, at ``CLAWBOO_BREAKER_FAILURES`` (3), pauses it
with the reason: the work it had claimed but not started goes back to ``todo``
and one ``agent_paused`` notification goes out (:func:`board.store.pause_agent`).
"""

from __future__ import annotations

import re

from django.conf import settings

from board import store
from board.runs import NOT_COUNTED, ErrorClass
from executor.runtimes import RunResult

# The classes a run can end with: one table, the column's choices (board.runs).
ERROR_CLASSES = tuple(ErrorClass.values)

# First match wins; matched against the adapter's error and the log's tail.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        (
            ErrorClass.ENVIRONMENT,
            r"not found on PATH|no such file|command not found|ENOENT|"
            r"permission denied|no space left|not a git repository|bad \S+ settings|"
            r"gateway is not configured|gateway unreachable|dispatch failed",
        ),
        (ErrorClass.RATE_LIMITED, r"rate.?limit|too many requests|\b429\b|quota"),
        (
            ErrorClass.AUTH,
            r"unauthori[sz]ed|authentication|invalid api key|\b401\b|\b403\b|"
            r"not logged in|login required|credential",
        ),
        (
            ErrorClass.CONTEXT_OVERFLOW,
            r"context (length|window)|prompt is too long|too many tokens|"
            r"maximum context",
        ),
        (
            ErrorClass.INVALID_ARGS,
            r"unknown (option|argument|flag)|invalid argument|usage:|"
            r"unrecognized arguments",
        ),
        (
            ErrorClass.PROVIDER_ERROR,
            r"overloaded|internal server error|\b5\d\d\b|service unavailable|"
            r"bad gateway|upstream",
        ),
    )
)


def classify(result: RunResult | None, error: str | None = None) -> str:
    """The error class of a failed run (``result`` None: the executor itself failed)."""
    if result is not None:
        if result.outcome == "timed_out":
            return ErrorClass.TIMEOUT
        if result.outcome == "cancelled":
            return ErrorClass.CANCELLED
    text = " ".join(
        part
        for part in (
            error,
            result.error if result is not None else None,
            (result.log_tail or "")[-2000:] if result is not None else None,
        )
        if part
    )
    for name, pattern in _PATTERNS:
        if pattern.search(text):
            return name
    return ErrorClass.UNKNOWN


def failures_to_trip() -> int:
    return int(settings.CLAWBOO_BREAKER_FAILURES)


def counts(error_class: str | None) -> bool:
    """Whether a run that ended with ``error_class`` counts toward the breaker."""
    return error_class is not None and error_class not in NOT_COUNTED


def after_run(
    agent_id: str, *, failed: bool, detail: str = "", execution_id: int | None = None
) -> bool:
    """Count one finished run of ``agent_id`` (``failed``: it failed or changed
    nothing it should have); True when this run tripped the breaker. A run with its
    ``execution_id`` is counted once: asked again (the executor failed after it was
    counted, :func:`executor.runner.settle_crash`), the count stands as it is, and
    an agent at its limit is still paused (the failure may have been the pause's)."""
    count, fresh = store.count_for_breaker(agent_id, execution_id, failed=failed)
    limit = failures_to_trip()
    if (fresh and not failed) or count < limit:
        return False
    reason = f"breaker: {count} consecutive failed runs" + (f"; last: {detail}" if detail else "")
    store.pause_agent(agent_id, reason[:2000], by="breaker")
    return True
