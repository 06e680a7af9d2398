"""The operator console: Django's admin under Clawboo's name.

Installed in place of ``django.contrib.admin`` (``INSTALLED_APPS``), so every
``@admin.register`` in the apps lands on :class:`ClawbooAdminSite` — Django's
documented way to override the default site.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig


class ClawbooAdminSite(admin.AdminSite):
    site_header = "Clawboo console"
    site_title = "Clawboo console"
    index_title = "Operator console"
    site_url = "/board/"  # "View site": the live board


class ClawbooAdminConfig(AdminConfig):
    default_site = "clawboo.console.ClawbooAdminSite"
