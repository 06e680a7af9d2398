from __future__ import annotations

from django.apps import AppConfig


class OpsConfig(AppConfig):
    """Operating it: ``/healthz``, ``/metrics``, notifications, export and import.

    Stands above routines (it reads every app's tables) and below the project
    package; nothing beneath it imports it.
    """

    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        from core import events
        from ops import notify

        # After commit, in whichever process committed: a person may be needed.
        events.subscribe(notify.on_event)
