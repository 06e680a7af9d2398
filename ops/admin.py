"""Admin for notifications and budgets: channels are saved through :mod:`ops.notify`;
each delivery is shown with its attempts and can be sent again; budgets are saved
through :mod:`board.store.spend`. Agents are deleted here, through
:mod:`ops.agent_removal` (the registry's floor cannot see what names an agent)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from board.models import Budget, BudgetScope
from board.store import spend
from core.admin import AgentAdmin
from core.admin_forms import DataLayerAdmin, ReadOnlyAdmin, SecretsStayHidden, masked_url
from core.admin_lists import GrowingTableAdmin
from core.errors import ClawbooError, NotFound, ValidationFailed
from core.models import Agent
from ops import agent_removal, budget_scopes, notify
from ops.models import NotificationChannel, NotificationDelivery, Reason, new_secret


class ChannelForm(forms.ModelForm):
    """The webhook's URL and signing secret are write-only, as a forge's token is: the
    page shows where the URL goes (scheme and host) and that a secret is set, never
    either value; left blank, the stored one is kept (a new channel's secret is made
    for it)."""

    url = forms.URLField(
        max_length=1024,
        required=False,
        assume_scheme="https",
        help_text="write-only (it often carries the token); blank keeps the stored URL",
    )
    secret = forms.CharField(
        max_length=128,
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="write-only; blank keeps the stored secret (a new channel gets one)",
    )
    reasons = forms.MultipleChoiceField(
        choices=Reason.choices, widget=forms.CheckboxSelectMultiple, initial=Reason.values
    )

    # Whether this save made the channel's secret (none typed, none stored).
    made_secret = False

    class Meta:
        model = NotificationChannel
        fields = ("team", "name", "kind", "url", "secret", "recipients", "reasons", "enabled")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.url if self.instance.pk is not None else ""
        self.initial["url"] = ""
        self.initial["secret"] = ""
        if stored:
            self.fields["url"].widget.attrs["placeholder"] = masked_url(stored)

    def clean(self) -> Any:
        data: dict[str, Any] = super().clean() or self.cleaned_data
        # Blank keeps what is stored (the instance still holds it).
        for name in ("url", "secret"):
            if not data.get(name) and self.instance.pk is not None:
                data[name] = getattr(self.instance, name)
        self.made_secret = not data.get("secret")
        if self.made_secret:
            data["secret"] = new_secret()
        return data


@admin.register(NotificationChannel)
class NotificationChannelAdmin(SecretsStayHidden, DataLayerAdmin):
    form = ChannelForm
    list_display = ("name", "team", "kind", "enabled", "updated_at")
    list_filter = ("kind", "enabled", "team")
    # Not the URL: a search that keeps a row for the right fragment spells it out.
    search_fields = ("name", "recipients")

    def save_model(
        self, request: HttpRequest, obj: NotificationChannel, form: Any, change: bool
    ) -> None:
        try:
            notify.save_channel(obj)
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc
        if form.made_secret:
            # The page never shows it again: the receiver needs it to check signatures.
            self.message_user(
                request,
                f"Signing secret of {obj.name} (shown once): {obj.secret}",
                messages.WARNING,
            )


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(SecretsStayHidden, GrowingTableAdmin, ReadOnlyAdmin):
    list_display = (
        "id",
        "channel",
        "reason",
        "task_link",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "created_at",
    )
    # Dates as fixed spans, not a date hierarchy: its menu read the whole table's
    # first and last dates and its distinct years on every load.
    list_filter = ("status", "reason", "channel", ("created_at", admin.DateFieldListFilter))
    search_fields = ("task_id", "team_id")
    readonly_fields = [f.name for f in NotificationDelivery._meta.fields]
    actions = ("send_again",)
    deletable = True

    @admin.display(description="task", ordering="task_id")
    def task_link(self, obj: NotificationDelivery) -> SafeString | str:
        # Which task the person was told about, a click from its page.
        if not obj.task_id:
            return "-"
        url = reverse("admin:board_task_change", args=[obj.task_id])
        return format_html('<a href="{}">{}</a>', url, obj.task_id)

    @admin.action(description="Send again now")
    def send_again(self, request: HttpRequest, queryset: QuerySet[NotificationDelivery]) -> None:
        count = notify.retry_now(queryset.values_list("id", flat=True))
        self.message_user(request, f"queued {count} delivery(ies) again")


# What each budget field takes, in the words of docs/governance.md (Spend).
BUDGET_HELP = {
    "scope_id": "What the scope names: the team's, agent's or routine's id, or a"
    " task's for a task tree (the task and every descendant).",
    "window": "Per UTC day, per UTC month, or in total (never starts over).",
    "limit_cents": "In cents: 500 is $5.00.",
    "mode": "At 80 % and 100 % a notification goes out: warn only notifies; cap also"
    " stops the scope at 100 % (its claims wait, its running runs stop) until the"
    " window ends or an operator resumes it.",
}


# The admin page of what each scope names (a task tree's scope id is its root task).
SCOPE_PAGES: dict[str, str] = {
    BudgetScope.TEAM: "admin:clawboo_team_change",
    BudgetScope.AGENT: "admin:clawboo_agent_change",
    BudgetScope.ROUTINE: "admin:routines_routine_change",
    BudgetScope.TASK_TREE: "admin:board_task_change",
}


@admin.register(Budget)
class BudgetAdmin(DataLayerAdmin):
    """Budgets, saved through :mod:`board.store.spend`; the team is the scope's."""

    fields = ("scope", "scope_id", "window", "limit_cents", "mode", "team", "spent", "status")
    readonly_fields = ("team", "spent", "status")
    list_display = (
        "scope",
        "scope_link",
        "team",
        "window",
        "limit_cents",
        "mode",
        "spent",
        "status",
    )
    list_filter = ("scope", "window", "mode", "team")
    search_fields = ("scope_id",)
    actions = ["resume"]

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        return super().get_form(request, obj, change, help_texts=BUDGET_HELP, **kwargs)

    @admin.display(description="scope id", ordering="scope_id")
    def scope_link(self, obj: Budget) -> SafeString:
        """The team, agent, routine or task the budget holds, as a link to its page."""
        page = SCOPE_PAGES[obj.scope]
        return format_html('<a href="{}">{}</a>', reverse(page, args=[obj.scope_id]), obj.scope_id)

    @admin.display(description="spent (¢, this window)")
    def spent(self, obj: Budget) -> int | str:
        return obj.spent_at(timezone.now()) if obj.pk else "-"

    @admin.display(description="status")
    def status(self, obj: Budget) -> str:
        return obj.status_at(timezone.now()) if obj.pk else "-"

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        fields = {name: getattr(obj, name) for name in budget_scopes.FIELDS}
        try:
            team = budget_scopes.scope_team(obj.scope, obj.scope_id)
            if team is None:
                raise ValidationFailed("scope_id", f"no {obj.scope} {obj.scope_id!r}")
            if change:
                saved = spend.update_budget(obj.pk, fields, team)
            else:
                saved = spend.create_budget(team, fields)
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc
        obj.pk, obj.team_id = saved.pk, saved.team_id

    def delete_model(self, request: HttpRequest, obj: Budget) -> None:
        spend.delete_budget(obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Budget]) -> None:
        for budget in queryset:
            spend.delete_budget(budget.pk)

    @admin.action(description="Resume (lift a paused cap until the next spend)")
    def resume(self, request: HttpRequest, queryset: QuerySet[Budget]) -> None:
        # It counted every row selected as resumed, and resuming one that paused
        # nothing still told every board a budget was resumed.
        at = timezone.now()
        resumed: list[str] = []
        not_paused: list[str] = []
        for budget in queryset:
            if budget.status_at(at) == "paused":
                spend.resume_budget(budget.pk)
                resumed.append(str(budget))
            else:
                not_paused.append(str(budget))
        text = f"Resumed {len(resumed)} budget(s)" + (f": {'; '.join(resumed)}" if resumed else "")
        if not_paused:
            text += f". Not paused (nothing to lift): {'; '.join(not_paused)}"
        self.message_user(request, text, messages.SUCCESS if resumed else messages.WARNING)


admin.site.unregister(Agent)


@admin.register(Agent)
class RemovableAgentAdmin(AgentAdmin):
    """The registry's agent admin, whose delete (the page and the bulk action alike)
    goes through :func:`ops.agent_removal.delete_agent`: an agent still named by a
    task, run, budget, routine, tool call or team is not deleted, and the page says
    which rows name it and to pause it instead. Django's own delete cascaded its
    routines without releasing their bound tasks and left the rest pointing at
    nobody."""

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        named = [
            _named_by_line(agent.pk, n) for agent in objs for n in agent_removal.named_by(agent.pk)
        ]
        if named:
            # Django lists these as protected rows and offers no confirm button; a
            # forged POST re-renders this page and deletes nothing.
            named.append(
                format_html(
                    'Pause the agent instead (the <a href="{}">agents list</a>\'s '
                    "Pause action): it then claims nothing, and its history stays.",
                    reverse("admin:clawboo_agent_changelist"),
                )
            )
        return deleted, counts, perms_needed, [*protected, *named]

    def delete_model(self, request: HttpRequest, obj: Agent) -> None:
        agent_removal.delete_agent(obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        agent_removal.delete_agents([agent.pk for agent in queryset])

    # The page above is drawn from a count taken before the delete locks the agents: a
    # claim, a run or another delete that commits in between is met by the delete's
    # own count (AgentStillNamed) or lock (NotFound). Either is said on the page, as
    # the refusal it is, and nothing is written -- not the log entry Django writes
    # first -- where it was a 500.
    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except (agent_removal.AgentStillNamed, NotFound) as refused:
            self.message_user(request, refused.detail, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions: dict[str, Any] = dict(super().get_actions(request))
        if "delete_selected" in actions:
            func, name, description = actions["delete_selected"]
            actions[name] = (_all_or_none(func), name, description)
        return actions


def _all_or_none(delete_selected: Any) -> Any:
    """Django's bulk delete, in one transaction: it logs each deletion before it
    deletes, so a delete refused after the confirmation page (a racing claim or
    delete) kept log entries of agents never deleted, and answered 500."""

    def action(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Agent]) -> Any:
        try:
            with transaction.atomic():
                return delete_selected(modeladmin, request, queryset)
        except (agent_removal.AgentStillNamed, NotFound) as refused:
            modeladmin.message_user(request, refused.detail, messages.ERROR)
            return None

    return action


def _named_by_line(agent_id: str, named: agent_removal.NamedBy) -> SafeString:
    text = f"agent {agent_id}: {named.count} {named.label}"
    if not named.place.admin_list:
        return format_html("{}", text)
    url = f"{reverse(named.place.admin_list)}?{urlencode(named.place.lookup(agent_id))}"
    return format_html('<a href="{}">{}</a>', url, text)
