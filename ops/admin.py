"""Admin for notifications: channels are saved through :mod:`ops.notify`; each
delivery is shown with its attempts and can be sent again."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from core.admin_forms import DataLayerAdmin
from core.errors import ClawbooError
from ops import notify
from ops.models import NotificationChannel, NotificationDelivery, Reason


class ChannelForm(forms.ModelForm):
    url = forms.URLField(max_length=1024, required=False, assume_scheme="https")
    reasons = forms.MultipleChoiceField(
        choices=Reason.choices, widget=forms.CheckboxSelectMultiple, initial=Reason.values
    )

    class Meta:
        model = NotificationChannel
        fields = ("team", "name", "kind", "url", "secret", "recipients", "reasons", "enabled")


@admin.register(NotificationChannel)
class NotificationChannelAdmin(DataLayerAdmin):
    form = ChannelForm
    list_display = ("name", "team", "kind", "enabled", "updated_at")
    list_filter = ("kind", "enabled", "team")
    search_fields = ("name", "url", "recipients")

    def save_model(
        self, request: HttpRequest, obj: NotificationChannel, form: Any, change: bool
    ) -> None:
        try:
            notify.save_channel(obj)
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "channel",
        "reason",
        "task_id",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "created_at",
    )
    list_filter = ("status", "reason", "channel")
    search_fields = ("task_id", "team_id")
    readonly_fields = [f.name for f in NotificationDelivery._meta.fields]
    actions = ("send_again",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Send again now")
    def send_again(self, request: HttpRequest, queryset: QuerySet[NotificationDelivery]) -> None:
        count = notify.retry_now(queryset.values_list("id", flat=True))
        self.message_user(request, f"queued {count} delivery(ies) again")
