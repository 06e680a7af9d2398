"""What every admin page that saves through a data layer shares."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.errors import ClawbooError


class SaveRefused(Exception):
    """A data layer refused an admin save; the message is already shown."""


class DataLayerAdmin(admin.ModelAdmin):
    """``save_model`` calls a data layer; a refusal is shown on the form's page and
    nothing is saved (the admin's transaction rolls back)."""

    def refuse(self, request: HttpRequest, exc: ClawbooError) -> SaveRefused:
        self.message_user(request, f"Not saved: {exc.detail}", messages.ERROR)
        return SaveRefused(exc.detail)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: Any = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except SaveRefused:
            return HttpResponseRedirect(request.get_full_path())
