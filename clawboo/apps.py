from __future__ import annotations

from django.apps import AppConfig


class ClawbooConfig(AppConfig):
    name = "clawboo"
    verbose_name = "Clawboo core"

    def ready(self) -> None:
        # Importing the storage layer connects its per-connection pragma hook.
        from clawboo import events, live, storage  # noqa: F401

        # After commit: push every event to the team's live board (with its narration).
        events.subscribe(live.publish, wants=live.has_audience)
