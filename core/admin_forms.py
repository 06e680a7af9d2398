"""What every admin page that saves through a data layer shares, and the form
fields the console edits JSON columns with."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput, JSONString
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from core.errors import ClawbooError


class SaveRefused(Exception):
    """A data layer refused an admin save; the message is already shown."""

    def __init__(self, error: ClawbooError, field: str | None = None) -> None:
        super().__init__(error.detail)
        self.error = error
        # The form field the refusal is shown beside: the one the error names
        # ("settings.argv" names "settings"), unless the admin says which.
        self.field = field or str(error.extra.get("field") or "").split(".")[0]


class DataLayerAdmin(admin.ModelAdmin):
    """``save_model`` calls a data layer; a refusal is shown on the form's page and
    nothing is saved (the admin's transaction rolls back). The form comes back as it
    was typed, the refusal beside the field it names (or above the form), so the
    operator corrects one value instead of typing the whole form again."""

    def refuse(
        self, request: HttpRequest, exc: ClawbooError, field: str | None = None
    ) -> SaveRefused:
        """``field``: the form field the refusal belongs beside, when the data layer's
        name for it is not the form's (or it names none)."""
        self.message_user(request, f"Not saved: {exc.detail}", messages.ERROR)
        return SaveRefused(exc, field)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        refusal: SaveRefused | None = getattr(request, "_clawboo_refusal", None)
        if refusal is None:
            return form
        field = refusal.field
        detail = refusal.error.detail

        class RefusedForm(form):  # type: ignore[misc,valid-type]
            def clean(self) -> Any:
                data = super().clean()
                self.add_error(field if field in self.fields else None, detail)
                return data

        return RefusedForm

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: Any = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except SaveRefused as refused:
            # The first pass rolled back; the second shows the bound form, now invalid.
            request._clawboo_refusal = refused  # type: ignore[attr-defined]
            return super().changeform_view(request, object_id, form_url, extra_context)


class ActionsByRole(admin.ModelAdmin):
    """The action menu offers what the person may run: an action whose roles-table
    row names a permission they lack (core.roles, "admin <app>.<model> <action>")
    is left out. Django listed every action to anyone who could see the list, so a
    staff person granted *view* picked Cancel or Resubmit and met a bare 403 page.
    The console's site mixes this into every admin it registers
    (clawboo.console.ClawbooAdminSite)."""

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        from core import roles

        label = f"{self.model._meta.app_label}.{self.model._meta.model_name}"
        return {
            name: action
            for name, action in super().get_actions(request).items()
            if roles.admin_action_offered(request.user, f"admin {label} {name}")
        }


class StoredIdsField(forms.ModelMultipleChoiceField):
    """A many-to-many box (a team's members, a person's groups) whose every id is one
    its column can hold, checked before the database is asked. A forged id past the
    column's range (twenty digits) reached SQLite's driver, which cannot bind it: a
    500 there, where PostgreSQL's answer was the form's "not a valid value". Now
    both backends answer that."""

    def clean(self, value: Any) -> Any:
        from django.db import connection

        key = self.to_field_name or "pk"
        assert self.queryset is not None  # a model's many-to-many box always has one
        opts = self.queryset.model._meta
        column = opts.pk if key == "pk" else opts.get_field(key)
        kind = column.get_internal_type()
        if kind not in connection.ops.integer_field_ranges:
            return super().clean(value)  # a text key (an agent's id): any string is one
        span = connection.ops.integer_field_range(kind)
        if span != (None, None) and isinstance(value, list | tuple | set | frozenset):
            low, high = span
            for pk in value:
                try:
                    number = int(str(pk).strip())
                except ValueError:
                    continue  # not a number: Django's own check names it
                if (low is not None and number < low) or (high is not None and number > high):
                    raise ValidationError(
                        self.error_messages["invalid_pk_value"],
                        code="invalid_pk_value",
                        params={"pk": pk},
                    )
        return super().clean(value)


class IdsInRange(admin.ModelAdmin):
    """Every many-to-many box of the console is a :class:`StoredIdsField`. The
    console's site mixes this into every admin it registers
    (clawboo.console.ClawbooAdminSite), Django's own (users, groups) included."""

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs.setdefault("form_class", StoredIdsField)
        return super().formfield_for_manytomany(db_field, request, **kwargs)


def confirmed_or_asked(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,
    queryset: Any,
    *,
    action: str,
    intro: str,
    submit: str,
) -> TemplateResponse | None:
    """None once the person has confirmed a final action (the page's "apply"); else the
    page that asks, listing the selected rows, as Django's "Delete selected" does."""
    if "apply" in request.POST:
        return None
    opts = modeladmin.model._meta
    return TemplateResponse(
        request,
        "admin/confirm_action.html",
        {
            **modeladmin.admin_site.each_context(request),
            "title": "Are you sure?",
            "intro": intro,
            "submit": submit,
            "rows": list(queryset),
            "action": action,
            "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "back": request.get_full_path(),
            "opts": opts,
        },
    )


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by the data layer: visible, never added or edited here.
    ``deletable``: staff may delete rows (the model's delete permission decides)."""

    deletable = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.deletable and super().has_delete_permission(request, obj)


def offered_values(
    field: str, title: str, choices: Callable[[], Sequence[tuple[str, str]]]
) -> type[admin.SimpleListFilter]:
    """A list filter on ``field`` whose menu is ``choices()``: an enum, or a small
    table's rows. Django's filter for a plain column ran a ``SELECT DISTINCT`` over the
    whole listed table on every page load, to build a menu of a few values. A value
    given in the URL filters whether or not the menu offers it; the parameter is
    Django's own (``field__exact``), so links to the list keep working."""

    class Offered(admin.SimpleListFilter):
        parameter_name = f"{field}__exact"

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            offered = list(choices())
            chosen = self.value()
            if chosen and chosen not in {value for value, _ in offered}:
                offered.append((chosen, chosen))
            return offered

        def queryset(self, request: HttpRequest, queryset: Any) -> Any:
            chosen = self.value()
            return queryset.filter(**{field: chosen}) if chosen else queryset

    Offered.title = title
    Offered.__name__ = f"{field}_offered"
    return Offered


class CommaListField(forms.CharField):
    """A list of short strings typed as ``bug, backend`` (a JSON list is read too, so
    a pasted ``["bug", "backend"]`` still works); shown back as ``bug, backend``.
    What a valid item is stays the data layer's call."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.TextInput(attrs={"class": "vTextField"}))
        kwargs.setdefault("help_text", "Comma-separated, e.g. <code>bug, backend</code>.")
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return ", ".join(str(item) for item in value)
        return value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        if isinstance(value, list | tuple):
            return [str(item) for item in value]
        text = str(value or "").strip()
        if text.startswith("["):
            try:
                items = json.loads(text)
            except ValueError:
                raise ValidationError(
                    "Enter the items separated by commas, or a JSON list of strings.",
                    code="invalid",
                ) from None
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise ValidationError("A JSON list here must hold strings only.", code="invalid")
            return [i.strip() for i in items if i.strip()]
        return [item.strip() for item in text.split(",") if item.strip()]

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return list(initial or []) != self.to_python(data)
        except ValidationError:
            return True


class PrettyJSONField(forms.JSONField):
    """JSON edited as indented text; invalid JSON is refused with the parser's own
    reason and place (line, column), and ``object_only`` refuses anything but an
    object. Empty input reads as ``{}`` (object_only) or ``null``."""

    def __init__(self, *, object_only: bool = False, **kwargs: Any) -> None:
        self.object_only = object_only
        kwargs.setdefault("required", False)
        kwargs.setdefault(
            "widget",
            forms.Textarea(
                attrs={
                    "rows": 8,
                    "spellcheck": "false",
                    "class": "vLargeTextField",
                    "style": "font-family: ui-monospace, monospace; font-size: 12px",
                }
            ),
        )
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values or (isinstance(value, str) and not value.strip()):
            return {} if self.object_only else None
        if isinstance(value, list | dict | int | float | JSONString):
            converted = value
        else:
            try:
                converted = json.loads(value, cls=self.decoder)
            except json.JSONDecodeError as exc:
                raise ValidationError(
                    "Not valid JSON: %(reason)s (line %(line)s, column %(column)s).",
                    code="invalid",
                    params={"reason": exc.msg, "line": exc.lineno, "column": exc.colno},
                ) from None
        if self.object_only and not isinstance(converted, dict):
            raise ValidationError(
                'Must be a JSON object, such as {"key": "value"}.', code="invalid"
            )
        return JSONString(converted) if isinstance(converted, str) else converted

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, InvalidJSONInput):
            return value  # the text as typed, for the person to fix
        if value is None and self.object_only:
            # An add form has no row to read: "null" shown there was refused on save.
            value = {}
        return json.dumps(value, indent=2, ensure_ascii=False, cls=self.encoder)


# --- stored keys and secrets: never shown, never filtered on ---------------------------

# How much of a stored key the admin shows: enough to tell two apart, too little to use.
KEY_SHOWN = 6


def key_models() -> tuple[type[Any], ...]:
    """The models whose primary key is a key a caller presents as it is stored (a
    person's API key, an agent's key): whoever reads one acts as its user."""
    from rest_framework.authtoken.models import Token

    from core.models import AgentToken

    return (Token, AgentToken)


def _masked_settings(agent: Any, value: Any) -> Any:
    from core import agent_secrets

    return agent_secrets.masked(value, agent.runtime)


def _masked_text(_row: Any, value: Any) -> Any:
    from core import agent_secrets

    return agent_secrets.MASK if value else ""


def masked_url(value: Any) -> str:
    """A URL as the admin shows a stored one: its scheme and host, never the path,
    query or user part that so often is the credential (``https://hooks.example/…``)."""
    if not value:
        return ""
    parts = urlsplit(str(value))
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}/…" if parts.scheme and host else "…"


def _masked_url(_row: Any, value: Any) -> Any:
    return masked_url(value)


# How a model's ``write_only_fields`` (``{column: "text" | "url"}``) show on a page.
_SHOWN: dict[str, Callable[[Any, Any], Any]] = {"text": _masked_text, "url": _masked_url}


def secret_fields() -> tuple[tuple[type[Any], str, Callable[[Any, Any], Any]], ...]:
    """The write-only columns the admin never shows (GOVERNANCE §6, "read agent
    secrets: never"), each with how a page shows it: a forge's token and webhook
    secret (set or not), an agent's settings, whose secrets sit at any depth
    (core.agent_secrets.masked), and the columns a model of any app names in its
    ``write_only_fields`` (a notification channel's signing secret and URL), read
    from Django's registry so that the foundation imports no app above it."""
    from django.apps import apps

    from core.models import Agent, Forge
    from core.repositories import FORGE_SECRETS

    declared = (
        (model, name, _SHOWN[kind])
        for model in apps.get_models()
        for name, kind in getattr(model, "write_only_fields", {}).items()
    )
    return (
        *((Forge, name, _masked_text) for name in FORGE_SECRETS),
        (Agent, "settings", _masked_settings),
        *declared,
    )


def shown_key(key: str) -> str:
    return f"{key[:KEY_SHOWN]}…"


def reaches_a_secret(model: Any, lookup: str) -> bool:
    """Whether the admin filter ``lookup`` (a changelist's query parameter, such as
    ``auth_token__key__startswith``) on ``model``'s rows reads a stored key or a
    write-only secret: a key model's own key (``key``, ``pk``), any relation to a key
    model, or a column of :func:`secret_fields` (``settings__api_key__startswith``).
    Such a filter keeps a row for the right first characters and drops it for wrong
    ones, which spells the value out one character at a time, whatever the page
    shows."""
    keys = tuple(m._meta.concrete_model for m in key_models())
    secrets = {(m._meta.concrete_model, name) for m, name, _ in secret_fields()}
    opts = model._meta
    for part in lookup.split("__"):
        if opts.concrete_model in keys and part in ("pk", opts.pk.name):
            return True
        if (opts.concrete_model, part) in secrets:
            return True
        try:
            field = opts.pk if part == "pk" else opts.get_field(part)
        except Exception:  # a lookup or transform (startswith, gt), or no such field
            return False
        related = field.related_model if field.is_relation else None
        if related is None or related == "self":
            return False
        if related._meta.concrete_model in keys:
            return True
        opts = related._meta
    return False


class SecretsStayHidden(admin.ModelAdmin):
    """An admin whose rows hold or relate to a stored key or a write-only secret (a
    user, an agent, a forge, a key itself): no filter of its changelist reaches it,
    and a page that cannot change the row (a staff person granted *view* only) shows
    each secret as the form does, masked -- Django shows a read-only field's stored
    value as it is (GOVERNANCE §6: the governed never hold the keys, and neither does
    a staff person allowed to view the rows)."""

    def lookup_allowed(self, lookup: str, value: Any, request: Any = None) -> bool:
        if reaches_a_secret(self.model, lookup):
            return False
        return super().lookup_allowed(lookup, value, request)

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        row = super().get_object(request, object_id, from_field)
        if row is not None and not self.has_change_permission(request, row):
            # This request saves nothing of it (no change permission): the secrets
            # leave the row it renders, in memory only.
            for model, name, shown in secret_fields():
                if isinstance(row, model):
                    setattr(row, name, shown(row, getattr(row, name)))
        return row
