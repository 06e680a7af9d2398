"""Routine admin: read-mostly; pause / resume / run-now go through the ledger."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from core.errors import ClawbooError
from routines import store
from routines.models import Routine, RoutineFire


def _apply(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Routine],
    verb: str,
    action: Any,
) -> None:
    done = 0
    for routine in queryset:
        try:
            action(routine.id)
            done += 1
        except ClawbooError as exc:  # an illegal ledger move is explained, not a 500
            modeladmin.message_user(request, f"{routine.id}: {exc.detail}", messages.ERROR)
    if done:
        modeladmin.message_user(request, f"{verb} {done} routine(s)")


@admin.register(Routine)
class RoutineAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "agent",
        "team",
        "cron_spec",
        "timezone",
        "status",
        "next_run_local",
        "last_error",
    )
    list_filter = ("status", "team")
    readonly_fields = [f.name for f in Routine._meta.fields] + ["next_run_local", "last_run_local"]
    actions = ("pause", "resume", "run_now")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # created through the API, which validates the spec and ownership

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="next run (routine's timezone)")
    def next_run_local(self, obj: Routine) -> str:
        when = obj.local_time(obj.next_run_at)
        return when.isoformat() if when else "—"

    @admin.display(description="last run (routine's timezone)")
    def last_run_local(self, obj: Routine) -> str:
        when = obj.local_time(obj.last_run_at)
        return when.isoformat() if when else "—"

    @admin.action(description="Pause")
    def pause(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        _apply(self, request, queryset, "Paused", store.pause_routine)

    @admin.action(description="Resume")
    def resume(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        _apply(self, request, queryset, "Resumed", store.resume_routine)

    @admin.action(description="Run now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        _apply(self, request, queryset, "Queued", store.run_routine_now)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        for routine in queryset:
            store.delete_routine(routine.id)

    def delete_model(self, request: HttpRequest, obj: Routine) -> None:
        store.delete_routine(obj.id)


@admin.register(RoutineFire)
class RoutineFireAdmin(admin.ModelAdmin):
    list_display = ("routine", "slot_at", "task_id", "outcome", "fired_at")
    list_filter = ("outcome",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
