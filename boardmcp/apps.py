from __future__ import annotations

from django.apps import AppConfig


class BoardMcpConfig(AppConfig):
    """Stands on the board and the worktrees; the executor stands on it (it mints
    each run's credential here)."""

    name = "boardmcp"
    verbose_name = "Board MCP server"
