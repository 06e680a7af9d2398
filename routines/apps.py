from __future__ import annotations

from django.apps import AppConfig


class RoutinesConfig(AppConfig):
    name = "routines"
    verbose_name = "Routines"

    def ready(self) -> None:
        # The openclaw runtime adapter runs agents through this app's gateway client.
        from clawboo.runtimes.openclaw import wire_gateway_dispatch
        from routines import gateway

        wire_gateway_dispatch(gateway.adapter_dispatch)
