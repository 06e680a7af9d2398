"""Runtime adapters: one interface over the agent CLIs, the gateway and the ``command`` runner.

The executor's entry points: :func:`adapter_for`, :func:`capabilities`,
:func:`resume_id_for`, :class:`RunRequest`, :class:`RunResult`, :func:`start_run`.
"""

from __future__ import annotations

from executor.runtimes.base import (
    Capabilities,
    HumanWorkRequired,
    McpEndpoint,
    Outcome,
    RunHandle,
    RunRequest,
    RunResult,
    RuntimeAdapter,
    start_run,
)
from executor.runtimes.registry import (
    RUNTIMES,
    UnknownRuntime,
    adapter_for,
    capabilities,
    resume_id_for,
)

__all__ = [
    "RUNTIMES",
    "Capabilities",
    "HumanWorkRequired",
    "McpEndpoint",
    "Outcome",
    "RunHandle",
    "RunRequest",
    "RunResult",
    "RuntimeAdapter",
    "UnknownRuntime",
    "adapter_for",
    "capabilities",
    "resume_id_for",
    "start_run",
]
