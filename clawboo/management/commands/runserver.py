"""``manage.py runserver``: daphne's development server, serving the ASGI application
(the board's websockets too), as with daphne in ``INSTALLED_APPS``; only this command
imports it."""

from __future__ import annotations

from daphne.management.commands.runserver import Command

__all__ = ["Command"]
