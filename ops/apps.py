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
        from django.db.models.signals import post_migrate
        from django_q.signals import post_spawn

        from board import traces
        from core import events
        from ops import notify, periodic

        # After commit, in whichever process committed: a person may be needed.
        events.subscribe(notify.on_event)
        # A task that reached its end: its span, when OpenTelemetry export is on.
        events.subscribe(traces.on_event)
        # The periodic work's schedules: after every migrate, and as each q2 worker
        # starts, so any deployment with a qcluster runs them (ops.periodic).
        post_migrate.connect(periodic.register_quietly, sender=self)
        post_spawn.connect(periodic.register_quietly, dispatch_uid="clawboo.periodic")
