"""The words of a run's end, one table each, importable without Django's set-up (a
remote worker reads them too)."""

from __future__ import annotations

from django.db.models import TextChoices


class ErrorClass(TextChoices):
    """Why a run failed or was stopped (GOVERNANCE.md §2): the ``error_class`` column's
    choices."""

    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    AUTH = "auth"
    PROVIDER_ERROR = "provider_error"
    ENVIRONMENT = "environment"
    CONTEXT_OVERFLOW = "context_overflow"
    INVALID_ARGS = "invalid_args"
    BUDGET = "budget"
    BREAKER = "breaker"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"


# Runs that say nothing about their agent (a person, a budget or its paused breaker
# stopped them): not counted by its breaker.
NOT_COUNTED = frozenset({ErrorClass.CANCELLED, ErrorClass.BUDGET, ErrorClass.BREAKER})


class StepKind(TextChoices):
    """What one step of a run was (the trace view's rows; ``run_steps.kind``). Each
    adapter maps its tool's stream onto these (``executor.steps``)."""

    MODEL_TURN = "model_turn"
    TOOL_CALL = "tool_call"
    COMMAND = "command"
    FILE_CHANGE = "file_change"
    MCP_CALL = "mcp_call"
    SUBAGENT = "subagent"
    ERROR = "error"


class StepStatus(TextChoices):
    """How a step ended: ``error`` marks the failing step on the trace."""

    OK = "ok"
    ERROR = "error"
