"""The ``human`` runtime: a seam, not an executor.

A task assigned to a person is worked by that person; the board records their
progress through the API like any participant. Nothing can *run* it, so the executor
must check ``capabilities("human").automated`` (False) and never dispatch here.
Calling :meth:`HumanAdapter.run` anyway raises :class:`HumanWorkRequired` rather
than pretending the work happened.
"""

from __future__ import annotations

from typing import Any

from executor.runtimes.base import (
    Capabilities,
    HumanWorkRequired,
    RunRequest,
    RunResult,
    RuntimeAdapter,
)


class HumanAdapter(RuntimeAdapter):
    runtime = "human"
    # A person works in the task's worktree (or their own clone) and reports back
    # later, which is the connected shape; they are not automated.
    capabilities = Capabilities(integration="connected", worktrees=True, automated=False)

    def run(self, request: RunRequest, **_: Any) -> RunResult:  # any cancel, any on_output
        raise HumanWorkRequired(
            f"task {request.task_id} is assigned to a person (runtime 'human'): "
            "a human must do it and move it on the board; the executor cannot run it"
        )
