from __future__ import annotations

from django.apps import AppConfig


class BackgroundQueueConfig(AppConfig):
    """django-q2's jobs under a group and names of their own in the admin: its
    "Successful tasks" sat beside the board's tasks and read as if they were some."""

    name = "ops.queue"
    label = "background_queue"
    verbose_name = "Background queue (django-q2)"
