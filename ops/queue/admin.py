"""django-q2's own admin pages, moved onto the proxies of :mod:`ops.queue.models`.

django-q2 registers its models with ``admin.site.register`` at import; this app is
installed after ``django_q``, so autodiscovery has run that by now and we move each
registration over, keeping django-q2's ModelAdmin (columns, resubmit action).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django_q import admin as q_admin
from django_q.models import Failure, OrmQ, Schedule, Success

from core.admin_lists import GrowingTableAdmin
from ops.queue.models import FailedJob, QueuedJob, ScheduledJob, SuccessfulJob


class ScheduledJobAdmin(q_admin.ScheduleAdmin):
    """The server's own schedules (:mod:`ops.periodic` writes them): shown,
    rescheduled, deleted, never made here, and what one runs never named here. A row
    names a Python callable and its arguments, run by a q2 worker as the server's
    user: the *add* or *change* permission on scheduled jobs would otherwise be any
    code the staff person chose, every power of the server with it."""

    # What a row runs: a callable (and one after it), its arguments, where.
    RUNS = ("name", "func", "hook", "args", "kwargs", "cluster", "intended_date_kwarg", "task")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        return (*super().get_readonly_fields(request, obj), *self.RUNS)

    @admin.display(description="last run")
    def get_last_run(self, obj: Any) -> Any:
        # django-q2 links to its own admin URLs, which are not registered any more.
        if obj.task_name is None:
            return None
        page = "successfuljob" if obj.task_success else "failedjob"
        url = reverse(f"admin:background_queue_{page}_change", args=(obj.task_id,))
        return format_html('<a href="{}">[{}]</a>', url, obj.task_name)


class SuccessfulJobAdmin(GrowingTableAdmin, q_admin.TaskAdmin):
    """django-q2's page of finished jobs, paged without counting them all."""


class FailedJobAdmin(GrowingTableAdmin, q_admin.FailAdmin):
    """django-q2's page of failed jobs (kept until deleted), paged without counting them all."""


_MOVES: list[tuple[Any, Any, type[admin.ModelAdmin]]] = [
    (Schedule, ScheduledJob, ScheduledJobAdmin),
    (Success, SuccessfulJob, SuccessfulJobAdmin),
    (Failure, FailedJob, FailedJobAdmin),
    (OrmQ, QueuedJob, q_admin.QueueAdmin),  # registered by django-q2 with the ORM broker only
]
for original, proxy, model_admin in _MOVES:
    if admin.site.is_registered(original):
        admin.site.unregister(original)
        admin.site.register(proxy, model_admin)
