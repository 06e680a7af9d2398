"""Proxies of django-q2's models (no tables of their own): the same rows, under this
app's label and a job's name. django-q2's package stays as it ships (its own
migrations untouched); only the console shows these."""

from __future__ import annotations

from django_q.models import Failure, OrmQ, Schedule, Success


class QueuedJob(OrmQ):
    class Meta:
        proxy = True
        verbose_name = "queued job"
        verbose_name_plural = "queued jobs"


class SuccessfulJob(Success):
    class Meta:
        proxy = True
        verbose_name = "successful job"
        verbose_name_plural = "successful jobs"
        ordering = ["-stopped"]


class FailedJob(Failure):
    class Meta:
        proxy = True
        verbose_name = "failed job"
        verbose_name_plural = "failed jobs"
        ordering = ["-stopped"]


class ScheduledJob(Schedule):
    class Meta:
        proxy = True
        verbose_name = "scheduled job"
        verbose_name_plural = "scheduled jobs"
