from __future__ import annotations

from django.apps import AppConfig


class ExecutorConfig(AppConfig):
    """Runs claimed board tasks through their agents' runtimes (above the board
    and worktrees)."""

    name = "executor"
    verbose_name = "Executor"
