from __future__ import annotations

from django.apps import AppConfig


class WorktreesConfig(AppConfig):
    name = "worktrees"
    verbose_name = "Worktrees"
