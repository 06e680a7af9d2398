"""Admin for the registry (teams, agents) and the event log; writes go through
:mod:`core.registry`."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from rest_framework.authtoken.admin import TokenAdmin
from rest_framework.authtoken.models import TokenProxy

from core import agent_secrets, authors, beats, machines, registry, repositories, roles
from core.admin_forms import (
    CommaListField,
    DataLayerAdmin,
    PrettyJSONField,
    ReadOnlyAdmin,
    SecretsStayHidden,
    confirmed_or_asked,
    offered_values,
    shown_key,
)
from core.admin_lists import GrowingTableAdmin
from core.api.access import govern_agent
from core.errors import ClawbooError
from core.models import Agent, AgentState, Event, Forge, Heartbeat, MachineToken, Repository, Team
from core.roles import may_manage_person

# What each governance field of a team does, in the words of docs/governance.md.
TEAM_HELP = {
    "approval_required": "Every new task of the team waits for a person's approval "
    "before an agent may claim it.",
    "reviewer_agent": "The critic: one of the team's agents, which reviews a risky change "
    "after its verification passed. Empty: no critic.",
    "max_concurrent": "The most of the team's tasks in progress at once, across every "
    "host. Empty: no team limit (each agent's own still holds).",
}


@admin.register(Team)
class TeamAdmin(DataLayerAdmin):
    # Its governance at a glance (approval, limit, critic) and what it holds.
    list_display = (
        "id",
        "name",
        "agents_link",
        "member_count",
        "approval_required",
        "max_concurrent",
        "reviewer_agent",
        "created_at",
    )
    # The reviewer may be null, which Django's own select_related() does not follow:
    # a query per team without this.
    list_select_related = ("reviewer_agent",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Team]:
        # Counted in the list's own query (a query a row otherwise); the agents in a
        # subquery, as a second join would multiply the members' rows.
        agents = Agent.objects.filter(team=OuterRef("pk")).values("team")
        return (
            super()
            .get_queryset(request)
            .annotate(
                agent_count=Subquery(agents.annotate(n=Count("pk")).values("n")[:1]),
                member_total=Count("members", distinct=True),
            )
        )

    @admin.display(description="agents")
    def agents_link(self, obj: Team) -> SafeString:
        url = reverse("admin:clawboo_agent_changelist")
        count = getattr(obj, "agent_count", None) or 0
        return format_html('<a href="{}?team__id__exact={}">{}</a>', url, obj.pk, count)

    @admin.display(description="members")
    def member_count(self, obj: Team) -> int:
        return getattr(obj, "member_total", None) or 0

    search_fields = ("id", "name")
    filter_horizontal = ("members",)
    readonly_fields = ("its_rows", "last_event_seq", "created_at")

    @admin.display(description="its rows")
    def its_rows(self, obj: Team) -> SafeString | str:
        """Links to the team's agents, tasks and event log: its page named none."""
        if not obj.pk:
            return "-"
        lists = (
            ("agents", "admin:clawboo_agent_changelist", {"team__id__exact": obj.pk}),
            ("tasks", "admin:board_task_changelist", {"team__id__exact": obj.pk}),
            ("events", "admin:clawboo_event_changelist", {"team__id__exact": obj.pk}),
        )
        return format_html_join(
            " · ",
            '<a href="{}?{}">{}</a>',
            ((reverse(name), urlencode(query), label) for label, name, query in lists),
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A team not yet made has no rows to link.
        if obj is None:
            return self.readonly_fields[1:]
        # Its members are shown, not offered, to whom the rule keeps them from.
        mine = roles.may_change_members(request.user, obj.pk)
        return (*self.readonly_fields, "id", *(() if mine else ("members",)))

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, help_texts=TEAM_HELP, **kwargs)
        reviewer: Any = form.base_fields.get("reviewer_agent")
        if reviewer is not None:
            # The critic is one of the team's own agents (core.registry refuses any
            # other on save): the menu listed every agent of every team.
            reviewer.queryset = Agent.objects.filter(team_id=obj.pk if obj else None)
        members: Any = form.base_fields.get("members")
        if members is not None:
            # A host's machine user is a member of its agents' teams: named as its host,
            # as the board names it, not "machine-<hash>" (one query for all of them).
            machine_users = get_user_model().objects.filter(
                username__startswith=authors.MACHINE_PREFIX
            )
            shown = authors.shown_names(machine_users.values_list("username", flat=True))
            members.label_from_instance = lambda user: shown.get(user.username, user.username)
        return form

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        try:
            if not change:
                # A new team's first members are its maker's to name (nothing is held
                # in it yet); later changes meet core.roles.may_change_members.
                registry.create_team(
                    form.cleaned_data["id"],
                    form.cleaned_data["name"],
                    members=list(form.cleaned_data.get("members") or []),
                )
            data = form.cleaned_data
            reviewer = data.get("reviewer_agent")
            registry.update_team(
                obj.pk,
                name=data["name"] if change else None,
                approval_required=data.get("approval_required", False),
                max_concurrent=data.get("max_concurrent"),
                reviewer_agent=(
                    (reviewer.pk if reviewer else None)
                    if "reviewer_agent" in form.changed_data
                    else registry.UNSET
                ),
            )
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Read-only (not in the form) where the asker may not change them.
        if not change or "members" not in form.cleaned_data:
            return
        try:
            registry.update_team(
                form.instance.pk, members=list(form.cleaned_data["members"]), by=request.user
            )
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc


class AgentForm(forms.ModelForm):
    """Labels as a comma list; the limit defaults to one task at a time. Settings as
    indented JSON with every secret's value masked: the page shows
    that a secret is set, never what it is; leaving the mask keeps it, typing a new value
    replaces it (core.agent_secrets, applied by core.registry on save)."""

    settings = PrettyJSONField(
        object_only=True,
        help_text=f"Secret values show as {agent_secrets.MASK}: leave it to keep the "
        "secret, or type a new value to replace it.",
    )
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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.initial["settings"] = agent_secrets.masked(
                self.instance.settings, self.instance.runtime
            )


class DispatchStateFilter(admin.SimpleListFilter):
    # The stored column holds only active and paused; the list shows the derived
    # state, so the filter offers and picks that one (an unhealthy agent is not active).
    title = "state"
    parameter_name = "state"

    STATES = (AgentState.ACTIVE, AgentState.UNHEALTHY, AgentState.PAUSED)

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(state, state) for state in self.STATES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> QuerySet[Agent]:
        if self.value() in self.STATES:
            return queryset.filter(Agent.in_dispatch_state(str(self.value())))
        return queryset


@admin.register(Agent)
class AgentAdmin(SecretsStayHidden, DataLayerAdmin):
    form = AgentForm
    # What fits beside the filters at 1440 px; when it last changed is on its page.
    list_display = (
        "id",
        "display_name",
        "team",
        "runtime",
        "participant_kind",
        "owner",
        "shown_state",
        "health_ok",
    )
    list_filter = ("runtime", "participant_kind", "team", DispatchStateFilter, "health_ok")
    # The owner may be null, which Django's own select_related() does not follow.
    list_select_related = ("team", "owner")
    actions = ("pause_agents", "resume_agents")
    # "Whose agents are these?" is an operator's first question about a person.
    search_fields = ("id", "display_name", "owner__username")
    # Dispatch state is the breaker's, the preflight's and the pause actions' to write.
    _DISPATCH_READONLY = (
        "shown_state",
        "state_reason",
        "paused_by",
        "paused_at",
        "health_ok",
        "health_detail",
        "health_checked_at",
        "breaker_failures",
        "runs_on",
        "its_work",
    )
    fields = (*AgentForm.Meta.fields, "approved_by", *_DISPATCH_READONLY)

    @admin.display(description="state", ordering="state")
    def shown_state(self, obj: Agent) -> SafeString | str:
        # The state the API and the board show: an unhealthy agent is not "active".
        # Why it takes no work was only on its own page: the list said "paused", and
        # whether the breaker or a person did it, and after what, took a click a row.
        state = obj.dispatch_state
        why: dict[str, str] = {
            AgentState.PAUSED: obj.state_reason,
            AgentState.UNHEALTHY: obj.health_detail,
        }
        reason = why.get(state, "")
        if not reason:
            return state
        return format_html(
            '{}<br><span class="quiet" title="{}">{}</span>',
            state,
            reason,
            Truncator(reason).chars(60),
        )

    @admin.display(description="its work")
    def its_work(self, obj: Agent) -> SafeString | str:
        """Links to the rows that name this agent: its tasks, runs, budgets, routines."""
        if not obj.pk:
            return "-"
        lists = (
            ("tasks", "admin:board_task_changelist", {"assignee_agent_id__exact": obj.pk}),
            ("runs", "admin:board_executionprocess_changelist", {"agent_id": obj.pk}),
            ("budgets", "admin:board_budget_changelist", {"scope": "agent", "scope_id": obj.pk}),
            ("routines", "admin:routines_routine_changelist", {"agent__exact": obj.pk}),
        )
        return format_html_join(
            " · ",
            '<a href="{}?{}">{}</a>',
            ((reverse(name), urlencode(query), label) for label, name, query in lists),
        )

    @admin.display(description="runs on")
    def runs_on(self, obj: Agent) -> str:
        # As the API's runs_on and the board's Agents panel say it.
        place = machines.hosts_running([obj.pk]).get(obj.pk) if obj.pk else None
        if place is None:
            return "the server's workers"
        if place["live"]:
            return f"host {place['host']} (its worker beat {place['seen_at']:%Y-%m-%d %H:%M:%S})"
        if place["seen_at"] is None:
            return f"host {place['host']}: no worker has connected, so nothing runs its work"
        return (
            f"host {place['host']}: its worker was last seen {place['seen_at']:%Y-%m-%d %H:%M:%S}"
            ", so nothing runs its work"
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # What still names an agent (tasks, runs, budgets, routines) is above this
        # floor: ops.admin registers the agent admin that deletes, through that check.
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # Saving here is an operator's approval of what the agent runs (core.server_commands).
        base = ("id", "approved_by") if obj else ("approved_by",)
        return base + self._DISPATCH_READONLY

    @admin.action(description="Pause the selected agents (they claim nothing until resumed)")
    def pause_agents(self, request: HttpRequest, queryset: Any) -> None:
        who = request.user.get_username()
        paused: list[str] = []
        already: list[str] = []
        for agent in queryset:
            _, changed = registry.pause_agent(agent.pk, f"paused in the admin by {who}", by=who)
            (paused if changed else already).append(agent.pk)
        self._said(request, "Paused", paused, already, "already paused")

    @admin.action(description="Resume the selected agents (their breaker count starts over)")
    def resume_agents(self, request: HttpRequest, queryset: Any) -> None:
        resumed: list[str] = []
        not_paused: list[str] = []
        refused: list[str] = []
        for agent in queryset:
            # The rule editing the agent holds to (its owner or staff): one rule for
            # every door that resumes it (core.api.access.govern_agent).
            try:
                govern_agent(request, agent.pk)
            except ClawbooError:
                refused.append(agent.pk)
                continue
            was_paused = agent.state == AgentState.PAUSED
            registry.resume_agent(agent.pk, by=request.user.get_username())
            (resumed if was_paused else not_paused).append(agent.pk)
        self._said(request, "Resumed", resumed, not_paused, "not paused")
        if refused:
            self.message_user(
                request,
                f"Not resumed (only its owner or staff may): {', '.join(refused)}",
                messages.WARNING,
            )

    def _said(
        self, request: HttpRequest, verb: str, done: list[str], left: list[str], why: str
    ) -> None:
        # The action said nothing at all: the list's state column was the only answer.
        text = f"{verb} {len(done)} agent(s)" + (f": {', '.join(done)}" if done else "")
        if left:
            text += f"; {why}: {', '.join(left)}"
        self.message_user(request, text, messages.SUCCESS if done else messages.WARNING)

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


@admin.register(Repository)
class RepositoryAdmin(DataLayerAdmin):
    """Staff register a team's repositories here (the admin is staff-only); the path
    is checked and stored as its real path by :mod:`core.repositories`."""

    list_display = ("id", "team", "path", "base_branch", "landing", "updated_at")
    list_filter = ("team",)
    search_fields = ("id", "path")
    # The forge has its own page (ForgeAdmin): its secrets never enter this form.
    fields = tuple(name for name in repositories.FIELDS if name != "forge")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("id", "team") if obj else ()

    def save_model(self, request: HttpRequest, obj: Repository, form: Any, change: bool) -> None:
        data = form.cleaned_data
        fields = {name: data.get(name) or "" for name in repositories.EDITABLE if name != "forge"}
        try:
            if change:
                saved = repositories.update(obj.pk, fields)
            else:
                saved = repositories.register(team=data["team"].pk, id=data["id"], **fields)
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc
        obj.pk, obj.path = saved.pk, saved.path

    def delete_model(self, request: HttpRequest, obj: Repository) -> None:
        repositories.delete(obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for repo in queryset:
            repositories.delete(repo.pk)


class ForgeForm(forms.ModelForm):
    """The secrets are password fields that never show their value; left blank, the
    stored one is kept."""

    token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="write-only; blank keeps the stored token",
    )
    webhook_secret = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="write-only; blank keeps the stored secret",
    )
    required_checks = CommaListField(required=False)

    class Meta:
        model = Forge
        fields = (
            "repository",
            "kind",
            "api_url",
            "repo",
            "token",
            "webhook_secret",
            "merge_method",
            "required_checks",
        )


@admin.register(Forge)
class ForgeAdmin(SecretsStayHidden, DataLayerAdmin):
    """A repository's forge (``landing_mode: pull_request``), written through
    :func:`core.repositories.update` like the REST API's ``forge``."""

    form = ForgeForm
    actions = None
    list_display = ("repository", "kind", "repo", "merge_method", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("repository",) if obj else ()

    def save_model(self, request: HttpRequest, obj: Forge, form: Any, change: bool) -> None:
        data = form.cleaned_data
        repo_id = obj.repository_id if change else data["repository"].pk
        stored = repositories.forge_of(repo_id)
        value: dict[str, Any] = {
            name: data.get(name) for name in ("kind", "api_url", "repo", "merge_method")
        }
        value["required_checks"] = list(data.get("required_checks") or [])
        for name in repositories.FORGE_SECRETS:
            given = data.get(name) or ""
            keep = stored is not None and getattr(stored, name)
            value[name] = given or (agent_secrets.MASK if keep else "")
        try:
            repositories.update(repo_id, {"forge": value})
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc

    def delete_model(self, request: HttpRequest, obj: Forge) -> None:
        repositories.update(obj.repository_id, {"forge": None})


# Every app above this floor writes its own kinds, and the log has no index on kind
# (each is paid on the claim path), so the kind menu offers those of the newest
# events: a bounded read by primary key, where the whole log was read a page load.
KINDS_FROM_NEWEST = 10_000


def recent_event_kinds() -> list[tuple[str, str]]:
    newest = Event.objects.order_by("-id").values("pk")[:KINDS_FROM_NEWEST]
    kinds = Event.objects.filter(pk__in=newest).order_by("kind").values_list("kind", flat=True)
    return [(kind, kind) for kind in kinds.distinct()]


@admin.register(Event)
class EventAdmin(GrowingTableAdmin, ReadOnlyAdmin):
    list_display = ("team", "seq", "kind", "task", "prev_status", "actor", "created_at")
    # Dates as fixed spans, not a date hierarchy, whose menu reads the whole log's min,
    # max and years on every load (no index on created_at: each is paid by every write).
    list_filter = (
        offered_values("kind", "kind", recent_event_kinds),
        "team",
        ("created_at", admin.DateFieldListFilter),
    )
    search_fields = ("task_id", "kind")
    fields = ("team", "seq", "kind", "task", "prev_status", "actor", "created_at", "payload_shown")
    readonly_fields = fields
    # Newest first by the primary key, the order events are written in: by
    # (created_at, seq), which no index holds, each page sorted the whole log.
    ordering = ("-id",)

    @admin.display(description="by")
    def actor(self, obj: Event) -> str:
        # Who moved it, when a person or an agent did (the audit's actor, GOVERNANCE).
        return str((obj.payload or {}).get("actor") or "-")

    @admin.display(description="payload")
    def payload_shown(self, obj: Event) -> SafeString:
        # Indented: it was one line of a few thousand characters.
        text = json.dumps(obj.payload, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', text)

    @admin.display(description="task", ordering="task_id")
    def task(self, obj: Event) -> SafeString | str:
        if not obj.task_id:
            return "-"
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:board_task_change", args=[obj.task_id]),
            obj.task_id,
        )


@admin.register(MachineToken)
class MachineTokenAdmin(admin.ModelAdmin):
    """Mint (the key is shown once, in a message) and revoke worker hosts' tokens."""

    list_display = ("id", "host", "prefix", "created_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("host", "prefix")
    # Agents are picked by typing (the plain box listed every agent of every team).
    autocomplete_fields = ("agents",)
    actions = ["revoke"]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ["host", "agents"]
        return ["host", "prefix", "agents", "created_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        if obj is None:
            return []
        return ["host", "prefix", "agents", "created_at", "revoked_at"]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            return
        agents = [a.id for a in form.cleaned_data["agents"]]
        try:
            token, key = machines.mint(obj.host, agents, created_by=request.user)
        except ClawbooError as exc:
            self.message_user(request, exc.detail, messages.ERROR)
            return
        # The admin then saves the form's agents on obj: make obj the minted row.
        obj.__dict__.update({k: v for k, v in token.__dict__.items() if k != "_state"})
        obj._state.adding = False
        self.message_user(request, f"Key for {token.host} (shown once): {key}", messages.WARNING)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoked, never deleted: the record says who could act, and until when

    @admin.action(description="Revoke the selected machine tokens… (final)")
    def revoke(self, request: HttpRequest, queryset: QuerySet[MachineToken]) -> Any:
        # A revoked key never works again: its host's worker stops until a new
        # token is minted and installed there. It ran at once on the selection.
        asked = confirmed_or_asked(
            self,
            request,
            queryset.order_by("id"),
            action="revoke",
            intro="These machine tokens will be revoked. It is final: each host's worker "
            "is refused from its next call until a new token is minted for it.",
            submit="Revoke these tokens",
        )
        if asked is not None:
            return asked
        # It said only a count: which host lost its key, and which was revoked
        # already, was left to the list.
        revoked: list[str] = []
        already: list[str] = []
        for token in queryset.order_by("id"):
            (revoked if machines.revoke(token.pk) else already).append(str(token))
        text = f"Revoked {len(revoked)} machine token(s)" + (
            f": {', '.join(revoked)}" if revoked else ""
        )
        if already:
            text += f"; revoked already: {', '.join(already)}"
        self.message_user(request, text, messages.SUCCESS if revoked else messages.WARNING)
        return None


class BeatFreshnessFilter(admin.SimpleListFilter):
    title = "freshness"
    parameter_name = "fresh"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "fresh"), ("no", "stale")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Heartbeat]) -> Any:
        if self.value() not in ("yes", "no"):
            return queryset
        return queryset.filter(beats.stale_beats(timezone.now(), stale=self.value() == "no"))


@admin.register(Heartbeat)
class HeartbeatAdmin(GrowingTableAdmin, ReadOnlyAdmin):
    """The parts and hosts that beat, remote workers among them (read-only)."""

    list_display = ("part", "host", "instance", "beat_at", "freshness", "detail")
    # The parts that beat, not a DISTINCT over every process's row (a part outside
    # them still filters from the URL, ?part__exact=).
    list_filter = (
        offered_values("part", "part", lambda: [(p, p) for p in beats.PARTS]),
        BeatFreshnessFilter,
    )
    deletable = True

    @admin.display(description="fresh?", ordering="beat_at")
    def freshness(self, obj: Heartbeat) -> SafeString | str:
        # A restarted process leaves its killed one's row behind until FORGET_AFTER:
        # which rows are alive was /healthz's to say, by the same rule (core.beats).
        since = beats.stale_since(obj.part, obj.beat_at)
        if since >= timezone.now():
            return "fresh"
        stamp = f"{timezone.localtime(since):%Y-%m-%d %H:%M:%S}"
        return format_html('<span class="stale">stale since {}</span>', stamp)


# --- people's API keys ---------------------------------------------------------------
# The REST framework's own page listed every person's key in plain text (a
# superuser's too) to any staff person allowed to view it, and its change form moved
# a key to another user: the key a staff person knows (their own) became the
# superuser's. Here a key shows as its first characters only, is revoked (deleted)
# with the delete permission, and is never made or moved: a person's key comes from
# their own password (POST /api/auth/token, clawboo login) or the server's own
# command (clawboo create_agent_token).


def _key_of_a_user(token: TokenProxy) -> str:
    return f"key {shown_key(token.key)} of {token.user}" if token.key else "a revoked key"


# Its name everywhere the admin prints a row (a page's title, a deletion's message
# and log entry) was the key itself (Token.__str__); the proxy is the admin's only.
TokenProxy.__str__ = _key_of_a_user  # type: ignore[method-assign,assignment]

if admin.site.is_registered(TokenProxy):
    admin.site.unregister(TokenProxy)


@admin.register(TokenProxy)
class PersonKeyAdmin(SecretsStayHidden, TokenAdmin):
    list_display = ("user", "key_start", "created")
    fields = ("user", "key_start", "created")
    readonly_fields = ("user", "key_start", "created")

    @admin.display(description="key")
    def key_start(self, token: TokenProxy) -> str:
        return shown_key(token.key)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


# What a person may do, as the admin's users page sets it: only a superuser changes
# these. A staff person granted "change user" could otherwise make themselves (or
# anyone) superuser, staff, or a holder of any permission -- every power the roles
# table withholds from them (core.roles.staff_power) -- in one save.
POWER_FIELDS = ("is_superuser", "is_staff", "groups", "user_permissions")


def _holds_every_power(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "is_superuser", False))


@admin.register(User)
class PersonAdmin(SecretsStayHidden, UserAdmin):
    """Django's users page, with no filter through a user's keys (auth_token__key…).

    For anyone but a superuser, a person's powers (:data:`POWER_FIELDS`) are read-only,
    and a row is theirs to change (its details, its password, its deletion) only as
    :func:`may_manage_person` says: Django's own page let anyone granted "change
    user" reset anyone's password and sign in as them."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        if _holds_every_power(request):
            return fields
        return (*fields, *(name for name in POWER_FIELDS if name not in fields))

    # The password page (…/password/) asks this too, for the row it changes.
    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_change_permission(request, obj):
            return False
        return obj is None or may_manage_person(request.user, obj)

    # The bulk delete asks this for each selected row (get_deleted_objects).
    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if not super().has_delete_permission(request, obj):
            return False
        return obj is None or may_manage_person(request.user, obj)


if admin.site.is_registered(Group):
    admin.site.unregister(Group)


@admin.register(Group)
class PersonGroupAdmin(GroupAdmin):
    """A group's permissions are its members' powers: only a superuser changes them
    (a staff person granted "change group" would grant their own group every one)."""

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        return fields if _holds_every_power(request) else (*fields, "permissions")
