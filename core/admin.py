"""Admin for the registry (teams, agents) and the event log; writes go through
:mod:`core.registry`."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from core import registry
from core.admin_forms import CommaListField, DataLayerAdmin
from core.errors import ClawbooError
from core.models import Agent, Event, Team


@admin.register(Team)
class TeamAdmin(DataLayerAdmin):
    list_display = ("id", "name", "last_event_seq", "created_at")
    search_fields = ("id", "name")
    filter_horizontal = ("members",)
    readonly_fields = ("last_event_seq", "created_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return (*self.readonly_fields, "id") if obj else self.readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        try:
            if change:
                registry.update_team(obj.pk, name=form.cleaned_data["name"])
            else:
                registry.create_team(form.cleaned_data["id"], form.cleaned_data["name"])
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        registry.update_team(form.instance.pk, members=list(form.cleaned_data["members"]))


class AgentForm(forms.ModelForm):
    """Labels as a comma list; the limit defaults to one task at a time."""

    labels = CommaListField(help_text="What a task's route may ask of it, e.g. <code>gpu</code>.")
    max_concurrent = forms.IntegerField(
        required=False, min_value=1, help_text="Tasks it holds in progress at once (1)."
    )

    class Meta:
        model = Agent
        fields = (
            "id",
            "display_name",
            "team",
            "runtime",
            "participant_kind",
            "settings",
            "owner",
            "labels",
            "max_concurrent",
        )


@admin.register(Agent)
class AgentAdmin(DataLayerAdmin):
    form = AgentForm
    list_display = (
        "id",
        "display_name",
        "team",
        "runtime",
        "participant_kind",
        "owner",
        "state",
        "health_ok",
        "updated_at",
    )
    list_filter = ("runtime", "participant_kind", "team", "state", "health_ok")
    actions = ("pause_agents", "resume_agents")
    search_fields = ("id", "display_name")
    fields = (
        "id",
        "display_name",
        "team",
        "runtime",
        "participant_kind",
        "settings",
        "owner",
        "approved_by",
        "labels",
        "max_concurrent",
        "state",
        "state_reason",
        "paused_by",
        "paused_at",
        "health_ok",
        "health_detail",
        "health_checked_at",
        "breaker_failures",
    )
    # Dispatch state is the breaker's, the preflight's and the pause actions' to write.
    _DISPATCH_READONLY = (
        "state",
        "state_reason",
        "paused_by",
        "paused_at",
        "health_ok",
        "health_detail",
        "health_checked_at",
        "breaker_failures",
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Saving here is an operator's approval of what the agent runs (core.server_commands).
        base = ("id", "approved_by") if obj else ("approved_by",)
        return base + self._DISPATCH_READONLY

    @admin.action(description="Pause the selected agents (they claim nothing until resumed)")
    def pause_agents(self, request: HttpRequest, queryset: Any) -> None:
        who = request.user.get_username()
        for agent in queryset:
            registry.pause_agent(agent.pk, f"paused in the admin by {who}", by=who)

    @admin.action(description="Resume the selected agents (their breaker count starts over)")
    def resume_agents(self, request: HttpRequest, queryset: Any) -> None:
        for agent in queryset:
            registry.resume_agent(agent.pk, by=request.user.get_username())

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        data = form.cleaned_data
        try:
            if change:
                registry.update_agent(
                    obj.pk,
                    {
                        "display_name": data["display_name"],
                        "team": data["team"].pk,
                        "runtime": data["runtime"],
                        "participant_kind": data["participant_kind"],
                        "settings": data.get("settings") or {},
                        "owner": data.get("owner"),
                        "labels": data.get("labels") or [],
                        "max_concurrent": data.get("max_concurrent") or 1,
                    },
                    operator=True,
                    approved_by=request.user,
                )
            else:
                registry.create_agent(
                    id=data["id"],
                    display_name=data["display_name"],
                    team=data["team"].pk,
                    runtime=data["runtime"],
                    participant_kind=data["participant_kind"],
                    settings=data.get("settings") or {},
                    owner=data.get("owner"),
                    labels=data.get("labels") or [],
                    max_concurrent=data.get("max_concurrent") or 1,
                    operator=True,
                    approved_by=request.user,
                )
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("team", "seq", "kind", "task_id", "prev_status", "created_at")
    list_filter = ("kind", "team")
    search_fields = ("task_id",)
    ordering = ("-created_at", "-seq")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
