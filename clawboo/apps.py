from __future__ import annotations

from django.apps import AppConfig


class ClawbooConfig(AppConfig):
    name = "clawboo"
    verbose_name = "Clawboo core"

    def ready(self) -> None:
        # Importing the storage layer connects its per-connection pragma hook.
        from clawboo import storage  # noqa: F401
