from __future__ import annotations

from django.apps import AppConfig


class RoutinesConfig(AppConfig):
    name = "routines"
    verbose_name = "Routines"
