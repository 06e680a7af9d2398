"""Routine admin: add and change through :class:`routines.forms.RoutineForm` (whose
checks and writes are :mod:`routines.store`'s), pause / resume / run-now as actions
on the ledger. The ledger's epoch-ms stamps are shown as dates in each routine's
own timezone."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core.admin_forms import DataLayerAdmin, ReadOnlyAdmin
from core.admin_lists import GrowingTableAdmin
from core.errors import ClawbooError
from routines import store
from routines.forms import RoutineForm
from routines.links import in_review_url
from routines.models import Routine, RoutineFire
from routines.wording import local_stamp, schedule_in_words


def _apply(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: QuerySet[Routine],
    verb: str,
    action: Any,
) -> None:
    done: list[str] = []
    for routine in queryset:
        try:
            action(routine.id)
            done.append(str(routine))
        except ClawbooError as exc:  # an illegal ledger move is explained, not a 500
            modeladmin.message_user(request, f"{routine}: {exc.detail}", messages.ERROR)
    if done:
        # By name: a count left the operator to find which of the selected it was.
        modeladmin.message_user(request, f"{verb} {len(done)} routine(s): {'; '.join(done)}")


def _task_link(task_id: str | None) -> SafeString | str:
    if not task_id:
        return "—"
    return format_html(
        '<a href="{}">{}</a>', reverse("admin:board_task_change", args=[task_id]), task_id
    )


class StateFilter(admin.SimpleListFilter):
    """By the state the column and the routines page show (armed, late, …), not the
    ledger's status, whose words ("idle", "claimed") appear nowhere else."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> Any:
        return store.RoutineState.choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Routine]) -> QuerySet[Routine]:
        if self.value() is None:
            return queryset
        # "late" is read against the clock, so the rows are read, not filtered in SQL.
        ids = [r.pk for r in queryset if store.state_of(r) == self.value()]
        return queryset.filter(pk__in=ids)


class RoutineList(ChangeList):
    """The list's page of routines, each with how many of its fires wait in review
    (one query for the page, as the routines page counts them)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        counts = store.waiting_in_review([r.pk for r in self.result_list])
        for routine in self.result_list:
            routine.fires_in_review = counts[routine.pk]


@admin.register(Routine)
class RoutineAdmin(DataLayerAdmin):
    form = RoutineForm
    # The title opens the routine; the id is on its page. Short headers (the stamps
    # name their zone) keep the list within a 1440 px screen beside its filters.
    list_display = (
        "title",
        "agent",
        "team",
        "schedule",
        "state",
        "in_review",
        "next_run_local",
        "last_run_local",
    )
    list_display_links = ("title",)
    list_filter = (StateFilter, "team")
    list_select_related = ("agent", "team")
    search_fields = ("id", "cron_spec", "agent__id")
    actions = ("pause", "resume", "run_now")
    # The ledger's own columns: shown, written only by the store and the ticker.
    ledger_fields = (
        "status",
        "state",
        "schedule",
        "next_run_local",
        "last_run_local",
        "last_error",
        "bound_task_id",
        "created_at",
        "updated_at",
        "recent_fires",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.ledger_fields if obj is not None else ()

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        user = request.user

        class SavedBy(form):  # type: ignore[misc,valid-type]
            """The form knows who saves: their template path registers a repository
            only if they may register one (core.server_commands.repository_at)."""

            def __init__(self, *args: Any, **kw: Any) -> None:
                super().__init__(*args, user=user, **kw)

        return SavedBy

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        sets: list[tuple[str | None, dict[str, Any]]] = [
            (None, {"fields": ("team", "agent", "cron_spec", "timezone", "catch_up")}),
            (
                "Task each fire creates",
                {"fields": store.TEMPLATE_KEYS},
            ),
        ]
        if obj is not None:
            sets.insert(0, ("Ledger", {"fields": self.ledger_fields}))
        return sets

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return RoutineList

    # --- saving through the data layer ---------------------------------------------

    def save_model(self, request: HttpRequest, obj: Routine, form: Any, change: bool) -> None:
        try:
            saved = form.save()
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc
        # The admin's message, log entry and redirect name the stored row: with only
        # its pk copied, a new routine was "untitled" in both (its title is in the
        # stored template, not on the form's instance).
        for field in Routine._meta.concrete_fields:
            setattr(obj, field.attname, getattr(saved, field.attname))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return  # no relations are edited here

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        for routine in queryset:
            store.delete_routine(routine.id)

    def delete_model(self, request: HttpRequest, obj: Routine) -> None:
        store.delete_routine(obj.id)

    # --- columns ----------------------------------------------------------------------

    @admin.display(description="task title")
    def title(self, obj: Routine) -> str:
        return str((obj.task_template or {}).get("title") or "—")

    @admin.display(description="schedule")
    def schedule(self, obj: Routine) -> SafeString:
        return format_html(
            '{}<br><code class="quiet">{}</code> {}',
            schedule_in_words(obj.cron_spec, obj.timezone),
            obj.cron_spec,
            obj.timezone,
        )

    @admin.display(description="state")
    def state(self, obj: Routine) -> str:
        return store.state_of(obj).label

    @admin.display(description="in review")
    def in_review(self, obj: Routine) -> SafeString:
        """Its fires waiting in review, a link to them on the board."""
        count = getattr(obj, "fires_in_review", None)
        if count is None:  # not from the list's page
            count = store.waiting_in_review([obj.id])[obj.id]
        return format_html('<a href="{}">{}</a>', in_review_url(obj), count)

    @admin.display(description="next fire", ordering="next_run_at")
    def next_run_local(self, obj: Routine) -> str:
        return local_stamp(obj.next_run_at, obj.timezone)

    @admin.display(description="last fire", ordering="last_run_at")
    def last_run_local(self, obj: Routine) -> str:
        return local_stamp(obj.last_run_at, obj.timezone)

    @admin.display(description="recent fires")
    def recent_fires(self, obj: Routine) -> SafeString | str:
        rows = store.recent_fires([obj.id], per_routine=10)[obj.id]
        if not rows:
            return "—"
        return format_html(
            "<table><tr><th>slot</th><th>outcome</th><th>task</th></tr>{}</table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                (
                    (
                        local_stamp(row.fire.slot_at, obj.timezone),
                        row.fire.outcome + (f": {row.fire.error}" if row.fire.error else ""),
                        _task_link(row.fire.task_id),
                    )
                    for row in rows
                ),
            ),
        )

    # --- actions ----------------------------------------------------------------------

    @admin.action(description="Pause")
    def pause(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        _apply(self, request, queryset, "Paused", store.pause_routine)

    @admin.action(description="Resume")
    def resume(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        _apply(self, request, queryset, "Resumed", store.resume_routine)

    @admin.action(description="Run now")
    def run_now(self, request: HttpRequest, queryset: QuerySet[Routine]) -> None:
        _apply(self, request, queryset, "Queued", store.run_routine_now)


@admin.register(RoutineFire)
class RoutineFireAdmin(GrowingTableAdmin, ReadOnlyAdmin):
    list_display = ("routine", "slot", "task", "outcome", "fired_at", "finished_at")
    list_filter = ("outcome",)
    list_select_related = ("routine",)
    fields = ("routine", "slot", "task", "outcome", "error", "fired_at", "finished_at")
    readonly_fields = fields
    deletable = True

    @admin.display(description="slot (routine's timezone)", ordering="slot_at")
    def slot(self, obj: RoutineFire) -> str:
        return local_stamp(obj.slot_at, obj.routine.timezone)

    @admin.display(description="task")
    def task(self, obj: RoutineFire) -> SafeString | str:
        return _task_link(obj.task_id)
