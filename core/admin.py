"""Admin for the registry (teams, agents) and the event log; writes go through
:mod:`core.registry`."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from core import registry
from core.admin_forms import DataLayerAdmin
from core.errors import ClawbooError
from core.models import Agent, Event, Team


@admin.register(Team)
class TeamAdmin(DataLayerAdmin):
    list_display = ("id", "name", "reviewer_agent", "last_event_seq", "created_at")
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
            if "reviewer_agent" in form.changed_data:
                reviewer = form.cleaned_data["reviewer_agent"]
                registry.set_reviewer_agent(obj.pk, reviewer.pk if reviewer else None)
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        registry.update_team(form.instance.pk, members=list(form.cleaned_data["members"]))


@admin.register(Agent)
class AgentAdmin(DataLayerAdmin):
    list_display = (
        "id",
        "display_name",
        "team",
        "runtime",
        "participant_kind",
        "owner",
        "updated_at",
    )
    list_filter = ("runtime", "participant_kind", "team")
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
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Saving here is an operator's approval of what the agent runs (core.server_commands).
        return ("id", "approved_by") if obj else ("approved_by",)

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
