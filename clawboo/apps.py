from __future__ import annotations

from django.apps import AppConfig


class ClawbooSiteConfig(AppConfig):
    """The project package (settings, urls, asgi) as an app only for its commands:
    ``up`` and ``demo`` stand above every other app."""

    name = "clawboo"
    label = "clawboo_site"
    verbose_name = "Clawboo"
