"""The operator console: Django's admin under Clawboo's name.

Installed in place of ``django.contrib.admin`` (``INSTALLED_APPS``), so every
``@admin.register`` in the apps lands on :class:`ClawbooAdminSite` — Django's
documented way to override the default site.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig


class ClawbooAdminSite(admin.AdminSite):
    site_header = "Clawboo console"
    site_title = "Clawboo console"
    index_title = "Operator console"
    site_url = "/board/"  # "View site": the live board

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        """Every admin, the apps' and django-q2's alike, offers in its action menu
        only what the person may run (:class:`core.admin_forms.ActionsByRole`), and
        refuses on its form an id its many-to-many column cannot hold
        (:class:`core.admin_forms.IdsInRange`)."""
        from core.admin_forms import ActionsByRole, IdsInRange

        admin_class = admin_class or admin.ModelAdmin
        missing = tuple(m for m in (ActionsByRole, IdsInRange) if not issubclass(admin_class, m))
        if missing:
            admin_class = type(
                admin_class.__name__,
                (*missing, admin_class),
                {"__module__": admin_class.__module__, "__doc__": admin_class.__doc__},
            )
        super().register(model_or_iterable, admin_class, **options)


class ClawbooAdminConfig(AdminConfig):
    default_site = "clawboo.console.ClawbooAdminSite"
