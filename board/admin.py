"""The admin as the operator console for the board.

Every write goes through :mod:`board.store`: the change form's status field offers
only the legal targets (from ``board.transitions``), saving calls the data layer,
and actions report per-row outcomes — declines are shown, not swallowed.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from board import checks, store
from board.models import (
    ExecutionProcess,
    Task,
    TaskComment,
    ToolApproval,
    ToolApprovalState,
    ToolGrant,
    Workspace,
)
from board.scope import check_touches
from board.store import approvals
from board.store.tool_approvals import revoke_grants
from board.transitions import Status, allowed_transitions_from
from core import server_commands
from core.admin_forms import (
    CommaListField,
    DataLayerAdmin,
    PrettyJSONField,
    ReadOnlyAdmin,
    confirmed_or_asked,
    offered_values,
)
from core.admin_lists import GrowingTableAdmin
from core.errors import ClawbooError, ValidationFailed
from core.models import Agent, Runtime


def _agent_link(agent_id: str | None) -> SafeString | str:
    """An agent's id as a link to its page (a run or task names it by id only)."""
    if not agent_id:
        return "-"
    return format_html(
        '<a href="{}">{}</a>', reverse("admin:clawboo_agent_change", args=[agent_id]), agent_id
    )


def _is_change_page(request: HttpRequest) -> bool:
    match = request.resolver_match
    return match is not None and str(match.url_name).endswith("_change")


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class CommentInline(ReadOnlyInline):
    model = TaskComment
    fields = ("created_at", "author", "body")
    readonly_fields = fields


# How much of a commit's SHA the task page's runs table shows.
SHA_SHOWN = 10


class ExecutionInline(ReadOnlyInline):
    model = ExecutionProcess
    fields = (
        "started_at",
        "agent_id",
        "runtime",
        "attempt",
        "status",
        "cost_cents",
        "commits",
        "error",
        "recovery_tombstone",
    )
    readonly_fields = fields

    @admin.display(description="commits")
    def commits(self, obj: ExecutionProcess) -> str:
        # Two whole SHAs a row pushed the table past a 1440 px screen; the run's
        # own page (its "View" link) has them whole.
        before, after = (sha[:SHA_SHOWN] if sha else "-" for sha in (obj.git_before, obj.git_after))
        return f"{before} → {after}"

    def get_queryset(self, request: HttpRequest) -> QuerySet[ExecutionProcess]:
        # Each run keeps up to 64 KB of log, which this table does not show: a task
        # worked fifty times read three megabytes for its page.
        return super().get_queryset(request).defer("log")


# The label menu reads the labels of this many of the newest tasks.
LABELS_FROM_NEWEST = 2000


class LabelFilter(admin.SimpleListFilter):
    title = "label"
    parameter_name = "label"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # The newest tasks' labels, what an operator looks for: the sample was the
        # model's order (highest priority first), so a label only low-priority tasks
        # carried was never offered, however new. A label typed in the URL stays shown.
        labels: set[str] = set()
        newest = Task.objects.order_by("-created_at").values_list("labels", flat=True)
        for row in newest[:LABELS_FROM_NEWEST]:
            labels.update(row or [])
        offered = sorted(labels)[:50]
        if self.value() and self.value() not in offered:
            offered.append(str(self.value()))
        return [(label, label) for label in offered]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Task]) -> QuerySet[Task]:
        if self.value():
            from board.store.ready import with_label

            return with_label(queryset, self.value() or "")
        return queryset


def registered_agents() -> list[tuple[str, str]]:
    # The registry is the small table; the tasks table is the board.
    return [(pk, pk) for pk in Agent.objects.order_by("pk").values_list("pk", flat=True)]


# Bulk moves the admin offers; each row still goes through the transition table.
MOVE_TARGETS = (Status.TODO, Status.BACKLOG, Status.BLOCKED, Status.IN_REVIEW, Status.DONE)


def _move_action(to: str) -> Any:
    """An admin action moving each selected task to ``to``, reporting each row."""

    def action(modeladmin: Any, request: HttpRequest, qs: QuerySet[Task]) -> None:
        who = request.user.get_username()
        modeladmin._each(
            request, qs, f"Moved to {to}", lambda tid: store.transition(tid, to, actor=who)
        )

    action.__name__ = f"move_to_{to}"
    note = " (verification gate applies)" if to == Status.DONE else ""
    return admin.action(description=f"Move to {Status(to).label.lower()}{note}")(action)


EDITABLE = ("title", "description", "priority", "labels", "metadata", "repository", "max_run_cents")
ROUTE_FIELDS = ("route_agent_id", "route_runtime", "route_labels")


def _route(data: dict[str, Any]) -> dict[str, Any]:
    """The form's route fields as the data layer's ``route`` (empty: none)."""
    return {
        "agent": data.get("route_agent_id") or None,
        "runtime": data.get("route_runtime") or None,
        "labels": data.get("route_labels") or [],
    }


# The task's own fields an operator sets (the admin's page adds the route and scope).
TASK_FORM_FIELDS = (
    "id",
    "team",
    "title",
    "description",
    "status",
    "priority",
    "labels",
    "metadata",
    "repository",
    "parent_task",
    "file_mutating",
    "max_attempts",
    "max_run_cents",
)


class TaskForm(forms.ModelForm):
    """The status menu offers the current status and its legal targets only; labels
    are a comma list and metadata indented JSON, each checked by the board's rule
    (``board.checks``) before anything is written."""

    labels = CommaListField()
    metadata = PrettyJSONField(object_only=True)
    route_agent_id = forms.CharField(
        required=False,
        label="Route: agent",
        help_text="Only this agent (its id) may take the task. Empty: any agent of the team.",
    )
    route_runtime = forms.ChoiceField(
        required=False,
        choices=[("", "any"), *Runtime.choices],
        label="Route: runtime",
        help_text="Only an agent of this runtime may take the task.",
    )
    route_labels = CommaListField(
        required=False,
        label="Route: agent labels",
        help_text="Only an agent carrying every one of these labels may take the task.",
    )

    touches = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "src/**\ndocs/*.md"}),
        label="Touches",
        help_text="Repository paths (globs) the task changes, one a line: no claim starts "
        "it while overlapping work of its repository is in progress or waiting to land.",
    )

    claim_agent = forms.CharField(
        required=False,
        label="Claim for agent",
        help_text="Claims the task for this agent (its id), as the agent's own claim "
        "would: a todo task is claimed as it stands; with the status in progress, the move "
        "takes this claim (without one that move is refused).",
    )
    override_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Human override: why",
        help_text="Recorded as yours (the logged-in user).",
    )

    class Meta:
        model = Task
        fields = TASK_FORM_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = self.instance.status if self.instance.pk else None
        if "status" in self.fields:
            options: list[str] = (
                [Status.TODO, Status.BACKLOG]
                if current is None
                else [current, *allowed_transitions_from(current)]
            )
            status_field: Any = self.fields["status"]
            status_field.choices = [(s, Status(s).label) for s in options]
        if "id" in self.fields:
            self.fields["id"].required = False
            self.fields["id"].help_text = "Leave empty to generate one."
        if self.instance.pk and self.instance.touches:
            self.initial["touches"] = "\n".join(self.instance.touches)
        repository: Any = self.fields.get("repository")
        if self.instance.pk and repository is not None:
            # Its own team's repositories: another team's was offered, and refused on save.
            repository.queryset = repository.queryset.filter(team_id=self.instance.team_id)

    def clean_touches(self) -> list[str] | None:
        text = str(self.cleaned_data.get("touches") or "")
        globs = [g.strip() for line in text.splitlines() for g in line.split(",") if g.strip()]
        try:
            return check_touches(globs or None)
        except ValidationFailed as exc:
            raise forms.ValidationError(exc.detail) from None

    def clean_labels(self) -> list[str]:
        try:
            return checks.check_labels(self.cleaned_data.get("labels") or [])
        except ValidationFailed as exc:
            raise forms.ValidationError(exc.detail.removeprefix("labels: ")) from None

    def clean_id(self) -> Any:
        # Uniqueness is the data layer's call (a repeat create is answered there).
        return self.cleaned_data.get("id") or None

    def validate_unique(self) -> None:
        return

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("claim_agent"):
            problem = _claim_typed_problem(self.instance, data.get("status"))
            if problem:
                self.add_error("claim_agent", problem)
        return data


def _claim_typed_problem(task: Task, status: str | None) -> str | None:
    """Why an agent typed in "Claim for agent" cannot go with this status, or None.
    A claim takes a todo task (the board's one claim), or goes with a move into in
    progress; typed with the status left as it was, it was dropped without a word."""
    status = status or task.status
    if status == Status.IN_PROGRESS and task.status != Status.IN_PROGRESS:
        return None
    if status != task.status:
        return (
            f"A claim goes with the status In progress, not {Status(status).label}: choose "
            "In progress, or leave this box empty."
        )
    if task.status == Status.TODO:
        return None
    if task.status == Status.IN_PROGRESS:
        return (
            f"The task is in progress already, held by {task.assignee_agent_id or 'no agent'}: "
            "leave this box empty (to hand it over, release it first)."
        )
    return (
        f"A claim takes a todo task; this one is {Status(task.status).label}. Choose the "
        "status In progress as well to move it with this agent's claim, or leave this "
        "box empty."
    )


def _repository_of(
    user: Any, data: dict[str, Any], task: Task | None, changed: list[str]
) -> str | None:
    """The repository an admin save names: the one chosen, else the one a (new)
    ``metadata.repo_path`` resolves to or registers (the admin is staff's; registering
    needs what registering a repository needs: core.server_commands.repository_at)."""
    chosen = data.get("repository")
    if chosen is not None:
        return str(chosen.pk)
    raw = (data.get("metadata") or {}).get("repo_path")
    if raw is None or (task is not None and "metadata" not in changed):
        return None
    if task is not None and raw == (task.metadata or {}).get("repo_path"):
        return task.repository_id
    team = data["team"].pk if data.get("team") is not None else task.team_id if task else None
    if team is None:
        return None
    return server_commands.repository_at(user, team, raw, "metadata.repo_path").id


@admin.register(Task)
class TaskAdmin(DataLayerAdmin):
    form = TaskForm
    # What fits beside the filters at 1440 px; the id, attempts and dependencies are
    # on the change page (and the id is searchable).
    list_display = (
        "title",
        "shown_status",
        "team",
        "assignee",
        "priority",
        "verdict",
        "updated_at",
    )
    list_display_links = ("title",)

    @admin.display(description="assignee", ordering="assignee_agent_id")
    def assignee(self, obj: Task) -> SafeString | str:
        return _agent_link(obj.assignee_agent_id)

    @admin.display(description="its record")
    def its_record(self, obj: Task) -> SafeString | str:
        """Links to this task's runs and its events (what happened to it, in order)."""
        if not obj.pk:
            return "-"
        lists = (
            ("runs", "admin:board_executionprocess_changelist", {"task__exact": obj.pk}),
            ("events", "admin:clawboo_event_changelist", {"task_id": obj.pk}),
        )
        return format_html_join(
            " · ",
            '<a href="{}?{}">{}</a>',
            ((reverse(name), urlencode(query), label) for label, name, query in lists),
        )

    @admin.display(description="status", ordering="status")
    def shown_status(self, obj: Task) -> str:
        # As the board shows it: a task waiting for a person is in "Needs approval",
        # not plain "Todo" (which reads as work about to start).
        shown = obj.get_status_display()
        return f"{shown} · needs approval" if approvals.awaits(obj) else shown

    list_filter = (
        "status",
        "team",
        offered_values("assignee_agent_id", "assignee", registered_agents),
        LabelFilter,
        "verdict",
        "approval_state",
    )
    search_fields = ("id", "title", "description")
    # A parent is picked by typing: the plain menu listed every task of every team.
    autocomplete_fields = ("parent_task",)
    # The page runs long (its record, the review's diff, every run): Save was only
    # below all of it, far from the status and fields above.
    save_on_top = True
    ordering = ("-updated_at",)
    inlines = [CommentInline, ExecutionInline]
    actions = [
        "release_tasks",
        "cancel_tasks",
        *(_move_action(status) for status in MOVE_TARGETS),
        "request_changes",
        "override_verification",
        "approve_work",
        "deny_work",
    ]
    change_list_template = "admin/board/task/change_list.html"

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        always = (
            "assignee",  # a link to the agent's page, as in the list
            "assignee_runtime",
            "attempts",
            "abandonments",
            "lease_until",
            "worktree_ref",
            "branch_ref",
            "verdict",
            "verdict_evidence",
            "verification_view",
            "human_override",
            "error",
            "feedback",
            "output",
            "revision",
            "scope",
            "dependencies",
            "cost_tokens",
            "cost_cents",
            "tree_cost_tokens",
            "tree_cost_cents",
            "approval",
            "its_record",
            "created_at",
            "updated_at",
        )
        if obj is None:
            return always
        # Structure is fixed after create; content goes through update_task.
        return (*always, "id", "team", "parent_task", "file_mutating", "max_attempts")

    def get_fields(self, request: HttpRequest, obj: Task | None = None) -> Any:
        fields = [
            *TASK_FORM_FIELDS,
            "route_agent_id",
            "route_runtime",
            "route_labels",
            "touches",
        ]
        if obj is None:
            # What the board writes (attempts, lease, verdict, cost…) has nothing to
            # say before the task exists: two dozen dashes under the add form.
            return fields
        fields += ["claim_agent", "override_reason"]
        return fields + [f for f in self.get_readonly_fields(request, obj) if f not in fields]

    @admin.display(description="verification")
    def verification_view(self, obj: Task) -> Any:
        """The verdict's gate, findings (file:line), reviewer and attempts."""
        shown = obj.verification
        if shown is None:
            return "-"
        gate = shown["gate"] or {}
        findings = format_html_join(
            "",
            "<li><b>{}</b> {} <code>{}</code></li>",
            (
                (
                    f["severity"],
                    f["title"],
                    f"{f.get('file', '')}:{f.get('line', '')}" if f.get("file") else "",
                )
                for f in shown["findings"]
            ),
        )
        reviewer = shown["reviewer"] or {}
        return format_html(
            "gate: <code>{}</code> exit {} in {} ms{}<br>reviewer: {}<br>attempts: {}<ul>{}</ul>",
            gate.get("command") or "(none configured)",
            gate.get("exit_code"),
            gate.get("duration_ms"),
            " (timed out)" if gate.get("timed_out") else "",
            reviewer.get("agent") or "-",
            len(shown["attempts"]),
            findings,
        )

    @admin.display(description="depends on")
    def dependencies(self, obj: Task) -> Any:
        links = obj.dep_links.select_related("depends_on")
        return (
            format_html_join(
                ", ",
                '<a href="../../{}/change/">{}</a> ({})',
                ((d.depends_on_id, d.depends_on_id, d.depends_on.status) for d in links),
            )
            or "—"
        )

    def save_model(self, request: HttpRequest, obj: Task, form: Any, change: bool) -> None:
        data = form.cleaned_data
        try:
            if not change or "metadata" in form.changed_data:
                server_commands.check_task_commands(
                    data.get("metadata"),
                    request.user,
                    before=(form.initial.get("metadata") or {}) if change else None,
                )
            repository = _repository_of(
                request.user, data, obj if change else None, form.changed_data
            )
            if not change:
                created = store.create_task(
                    id=data.get("id"),
                    team=data["team"].pk,
                    title=data["title"],
                    description=data.get("description") or "",
                    status=data.get("status"),
                    priority=data.get("priority") or 0,
                    labels=data.get("labels") or [],
                    metadata=data.get("metadata") or {},
                    parent_task_id=data["parent_task"].pk if data.get("parent_task") else None,
                    file_mutating=bool(data.get("file_mutating")),
                    max_attempts=data.get("max_attempts"),
                    repository=repository,
                    max_run_cents=data.get("max_run_cents"),
                    route=_route(data),
                    touches=data.get("touches"),
                )
                obj.pk = created.task.pk
                return
            changes = {f: data[f] for f in EDITABLE if f in form.changed_data}
            if "repository" in changes or repository is not None:
                changes["repository"] = repository
            if set(ROUTE_FIELDS) & set(form.changed_data):
                changes["route"] = _route(data)
            if "touches" in form.changed_data:
                changes["touches"] = data.get("touches")
            if changes:
                store.update_task(obj.pk, changes)
            claim_agent = data.get("claim_agent") or None
            if claim_agent and "status" not in form.changed_data:
                # Typed without a status: claim the todo task for it (the form let
                # through no other case), through the same move as choosing In progress.
                data = {**data, "status": Status.IN_PROGRESS}
            if "status" in form.changed_data or claim_agent:
                who = request.user.get_username()
                override = None
                if data.get("override_reason"):
                    override = {"by": who, "reason": data.get("override_reason")}
                try:
                    store.transition(
                        obj.pk,
                        data["status"],
                        human_override=override,
                        agent_id=claim_agent,
                        actor=who,
                    )
                except ClawbooError as exc:
                    # A claim's refusal (agent paused, not routed, at its limit…) is
                    # about the agent typed: shown beside it.
                    field = "claim_agent" if claim_agent else None
                    raise self.refuse(request, exc, field) from exc
        except ClawbooError as exc:
            raise self.refuse(request, exc) from exc

    def get_inlines(self, request: HttpRequest, obj: Task | None) -> Any:
        # A task not yet filed has no comments or runs: two empty tables on the add page.
        return self.inlines if obj is not None else []

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return  # inlines are read-only; nothing to save around the data layer

    def construct_change_message(
        self, request: HttpRequest, form: Any, formsets: Any, add: bool = False
    ) -> Any:
        return super().construct_change_message(request, form, [], add)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # tasks are cancelled or dropped, never deleted

    # --- actions (per-row outcomes) ------------------------------------------

    def _report(
        self, request: HttpRequest, verb: str, results: list[tuple[str, str, bool]]
    ) -> None:
        done = [tid for tid, text, ok in results if ok and text == "recorded"]
        if done:
            self.message_user(request, f"{verb}: {', '.join(done)}", messages.SUCCESS)
        same = [tid for tid, text, ok in results if ok and text == "unchanged"]
        if same:
            self.message_user(request, f"Unchanged (already so): {', '.join(same)}", messages.INFO)
        for tid, text, ok in results:
            if ok and text not in ("recorded", "unchanged"):
                self.message_user(request, f"{verb} {tid}: {text}", messages.SUCCESS)
            elif not ok:
                self.message_user(request, f"{verb} {tid}: {text}", messages.WARNING)

    def _each(self, request: HttpRequest, qs: QuerySet[Task], verb: str, fn: Any) -> None:
        """Run ``fn`` on each selected task through the data layer and report each
        row: a WriteOutcome's verdict, a sentence ``fn`` returns, or the refusal."""
        results: list[tuple[str, str, bool]] = []
        for task in qs.order_by("id"):
            try:
                outcome = fn(task.id)
                ok = True
                if isinstance(outcome, store.WriteOutcome):
                    ok = not outcome.declined
                    text = (
                        outcome.outcome
                        if ok
                        else f"declined ({outcome.reason}, task is {outcome.status})"
                    )
                    if outcome.cancelled:
                        text += f"; cancelled dependents {', '.join(outcome.cancelled)}"
                elif isinstance(outcome, tuple):
                    text, ok = outcome
                else:  # a Task: a move to the status it had writes nothing
                    text = "recorded" if outcome.revision != task.revision else "unchanged"
            except ClawbooError as exc:
                text, ok = f"refused: {exc.detail}", False
            results.append((task.id, text, ok))
        self._report(request, verb, results)

    @admin.display(description="approval before work")
    def approval(self, obj: Task) -> str:
        body = obj.approval
        if body is None:
            return "none needed"
        who = f" by {body['by']}" if body["by"] else ""
        why = f": {body['reason']}" if body["reason"] else ""
        return f"{body['state']}{who} at {body['at']}{why}"

    # Approval before work (GOVERNANCE §5): the staff user decides as themselves.
    @admin.action(description="Approve the work (agents may take it)")
    def approve_work(self, request: HttpRequest, qs: QuerySet[Task]) -> None:
        who = request.user.get_username()
        self._each(
            request, qs, "Approved", lambda tid: store.decide_approval(tid, "approve", by=who)
        )

    @admin.action(description="Deny the work (no agent takes it)")
    def deny_work(self, request: HttpRequest, qs: QuerySet[Task]) -> None:
        who = request.user.get_username()
        self._each(request, qs, "Denied", lambda tid: store.decide_approval(tid, "deny", by=who))

    @admin.action(description="Release (in progress → todo)")
    def release_tasks(self, request: HttpRequest, qs: QuerySet[Task]) -> None:
        self._each(request, qs, "Released", lambda tid: store.release(tid))

    @admin.action(description="Cancel… (final: a running one's run is stopped)")
    def cancel_tasks(self, request: HttpRequest, qs: QuerySet[Task]) -> Any:
        # Cancelled is final, and it was the menu's second entry, run on the
        # selection at once: a slip ended every selected task, running ones too.
        asked = confirmed_or_asked(
            self,
            request,
            qs.order_by("id"),
            action="cancel_tasks",
            intro="These tasks will be cancelled. Cancelled is final: no task leaves it, "
            "and a run in progress is stopped.",
            submit="Cancel these tasks",
        )
        if asked is not None:
            return asked
        self._each(request, qs, "Cancelled", lambda tid: store.cancel(tid))
        return None

    @admin.action(description="Mark done with a human override of a failed verification…")
    def override_verification(self, request: HttpRequest, qs: QuerySet[Task]) -> Any:
        form = OverrideForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            who = request.user.get_username()
            override = {"by": who, "reason": form.cleaned_data["reason"]}
            self._each(
                request, qs, "Done by override", lambda tid: self.finish(request, tid, override)
            )
            return None
        return TemplateResponse(
            request,
            "admin/board/task/override.html",
            {
                **self.admin_site.each_context(request),
                "title": "Record a human override",
                "tasks": qs,
                "form": form,
                "action": "override_verification",
                "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
                "opts": self.model._meta,
            },
        )

    def finish(self, request: HttpRequest, task_id: str, override: dict[str, str]) -> Any:
        """Settle one task ``done`` with a human override (the worktrees app's admin
        lands a reviewed change instead: ``worktrees.admin``)."""
        return store.transition(
            task_id, Status.DONE, human_override=override, actor=request.user.get_username()
        )

    @admin.action(description="Request changes (in review → back to its agent)…")
    def request_changes(self, request: HttpRequest, qs: QuerySet[Task]) -> Any:
        form = FeedbackForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            feedback = form.cleaned_data["feedback"]
            agent = form.cleaned_data.get("agent_id") or None
            who = request.user.get_username()

            def send_back(tid: str) -> tuple[str, bool]:
                sent = store.request_changes(tid, feedback, by=who, agent_id=agent)
                return f"sent back to {sent.task.assignee_agent_id}", True

            self._each(request, qs, "Changes requested", send_back)
            return None
        return TemplateResponse(
            request,
            "admin/board/task/feedback.html",
            {
                **self.admin_site.each_context(request),
                "title": "Request changes",
                "tasks": qs,
                "form": form,
                "action": "request_changes",
                "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
                "opts": self.model._meta,
            },
        )

    # --- reconciliation -------------------------------------------------------

    def get_urls(self) -> list[Any]:
        return [
            path(
                "reconcile/",
                self.admin_site.admin_view(self.reconcile_view),
                name="board_task_reconcile",
            ),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # A button per recovery pass, from the one table the command and API read;
        # none for staff granted view only, whom running one refuses (reconcile_view).
        passes = (
            [(name, p.label) for name, p in store.RECOVERY_PASSES.items()]
            if self.has_change_permission(request)
            else []
        )
        return super().changelist_view(request, {**(extra_context or {}), "recovery": passes})

    def reconcile_view(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:board_task_changelist"))
        if not self.has_change_permission(request):
            # A recovery pass moves tasks: staff granted only ``view`` may not run it.
            raise PermissionDenied("reconciling needs the change permission on tasks")
        which = request.POST.get("pass")
        try:
            if which not in store.RECOVERY_PASSES:
                self.message_user(request, "Unknown pass", messages.ERROR)
                return HttpResponseRedirect(reverse("admin:board_task_changelist"))
            released = store.RECOVERY_PASSES[which].run()
        except Exception as exc:  # an operator console reports, it does not crash
            self.message_user(request, f"Reconciliation failed: {exc}", messages.ERROR)
        else:
            self.message_user(
                request,
                f"{which} pass released {len(released)} task(s)"
                + (f": {', '.join(released)}" if released else ""),
                messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:board_task_changelist"))


class FeedbackForm(forms.Form):
    feedback = forms.CharField(widget=forms.Textarea, label="What should change")
    agent_id = forms.CharField(
        required=False, label="Agent", help_text="Leave empty: the agent that did the work."
    )


class OverrideForm(forms.Form):
    """Who overrides is the logged-in operator, never a typed name (audit)."""

    reason = forms.CharField(widget=forms.Textarea, label="Why")


@admin.register(TaskComment)
class TaskCommentAdmin(GrowingTableAdmin, ReadOnlyAdmin):
    # What was said: the list showed who and when, never the comment.
    list_display = ("task", "author", "body_start", "created_at")
    list_select_related = ("task",)
    search_fields = ("task__id", "author", "body")
    # Fixed spans, not a date hierarchy, whose menu read the whole table's first and
    # last dates, then its distinct years, on every load (no index on created_at).
    list_filter = (("created_at", admin.DateFieldListFilter),)

    @admin.display(description="comment")
    def body_start(self, obj: TaskComment) -> SafeString:
        return format_html('<span title="{}">{}</span>', obj.body, Truncator(obj.body).chars(100))


@admin.register(Workspace)
class WorkspaceAdmin(ReadOnlyAdmin):
    list_display = ("task", "status", "branch", "worktree_path", "updated_at")
    list_filter = ("status",)
    search_fields = ("task__id", "branch", "repo_path")


# How much of a run's error the list shows (the run's page shows it all).
ERROR_SHOWN = 80


@admin.register(ExecutionProcess)
class ExecutionAdmin(GrowingTableAdmin, ReadOnlyAdmin):
    """Every run, newest first: the operator's way to why a task failed. The run
    opens its own page; the task and the agent open theirs."""

    # What fits beside the filters at 1440 px: the cost and token columns are on
    # the run's page, the runtime and cost status are filters.
    list_display = (
        "run",
        "task_link",
        "agent_link",
        "status",
        "error_class",
        "error_start",
        "cost_cents",
        "started_at",
    )
    list_display_links = ("run",)
    list_filter = (
        "status",
        "error_class",
        offered_values("runtime", "runtime", lambda: Runtime.choices),
        "cost_status",
        # Fixed spans (today, past 7 days, this month, this year), not a date
        # hierarchy: its menu reads the whole table's min, max and years on every load.
        ("started_at", admin.DateFieldListFilter),
    )
    list_select_related = ("task",)
    search_fields = ("task__id", "agent_id", "error")
    # Newest first by the primary key, the order runs are opened in: the model's
    # (started_at, id), which no index holds, sorted every run for each page.
    ordering = ("-id",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ExecutionProcess]:
        # A run's log is up to a few hundred KB: the list shows none of it.
        queryset = super().get_queryset(request)
        return queryset if _is_change_page(request) else queryset.defer("log")

    # Why it ended first, then what it cost and what it changed.
    fields = (
        "task",
        "agent_link",
        "runtime",
        "attempt",
        "status",
        "error_class",
        "error",
        "exit_code",
        "recovery_tombstone",
        "log",
        "started_at",
        "finished_at",
        "stalled_at",
        "git_before",
        "git_after",
        "tokens_in",
        "tokens_out",
        "cache_read",
        "cache_write",
        "cost_cents",
        "cost_millicents",
        "cost_status",
        "pid",
        "native_session_id",
    )
    readonly_fields = fields

    @admin.display(description="run", ordering="id")
    def run(self, obj: ExecutionProcess) -> str:
        return f"#{obj.pk} · attempt {obj.attempt}"

    @admin.display(description="task", ordering="task_id")
    def task_link(self, obj: ExecutionProcess) -> SafeString:
        # The id, its title on hover: id and title side by side ran past the screen.
        return format_html(
            '<a href="{}" title="{}">{}</a>',
            reverse("admin:board_task_change", args=[obj.task_id]),
            obj.task.title,
            obj.task_id,
        )

    @admin.display(description="agent", ordering="agent_id")
    def agent_link(self, obj: ExecutionProcess) -> SafeString | str:
        return _agent_link(obj.agent_id)

    @admin.display(description="error")
    def error_start(self, obj: ExecutionProcess) -> SafeString | str:
        if not obj.error:
            return "-"
        # A path or a traceback line has no space to wrap at: break inside words.
        return format_html(
            '<span title="{}" style="word-break: break-word">{}</span>',
            obj.error,
            Truncator(obj.error).chars(ERROR_SHOWN),
        )


# How much of a tool call's arguments the list shows (the row's page shows it all).
CALL_SHOWN = 160


def offered_tools() -> list[tuple[str, str]]:
    """The tools calls wait on now (the pending ones: few, under their own partial
    index) and the tools an agent may always run (the grants: a row per agent and
    tool): what a person looks for. Every tool ever asked would be a DISTINCT over
    the whole audit on every load; one decided only long ago still filters from the
    URL (``?tool__exact=``)."""
    pending = ToolApproval.objects.filter(state=ToolApprovalState.PENDING)
    tools = {
        *pending.values_list("tool", flat=True),
        *ToolGrant.objects.values_list("tool", flat=True),
    }
    return [(tool, tool) for tool in sorted(tools)]


@admin.register(ToolApproval)
class ToolApprovalAdmin(GrowingTableAdmin, ReadOnlyAdmin):
    """Tool calls that waited for a person, and who answered (the audit). Answer a
    pending one with the actions, as yourself."""

    # What the call would run is what a person decides on: it was only on each row's
    # own page, so the list offered Allow on a bare "Bash".
    list_display = ("tool", "call", "task_link", "agent_link", "state", "decided_by", "created_at")
    list_filter = ("state", "decision", offered_values("tool", "tool", offered_tools))
    list_select_related = ("task",)
    search_fields = ("task__id", "agent_id", "tool")
    actions = ("allow_once", "deny")

    @admin.display(description="call")
    def call(self, obj: ToolApproval) -> SafeString:
        # The arguments as stored: secret-looking values were masked when it was asked.
        text = json.dumps(obj.arguments, ensure_ascii=False)
        return format_html(
            '<code title="{}" style="word-break: break-word">{}</code>',
            text,
            Truncator(text).chars(CALL_SHOWN),
        )

    @admin.display(description="task", ordering="task_id")
    def task_link(self, obj: ToolApproval) -> SafeString:
        return format_html(
            '<a href="{}">{}</a>', reverse("admin:board_task_change", args=[obj.task_id]), obj.task
        )

    @admin.display(description="agent", ordering="agent_id")
    def agent_link(self, obj: ToolApproval) -> SafeString | str:
        return _agent_link(obj.agent_id)

    def _answer(self, request: HttpRequest, qs: QuerySet[ToolApproval], decision: str) -> None:
        who = request.user.get_username()
        for row in qs.order_by("created_at"):
            try:
                store.decide_tool_call(row.id, decision, by=who)
                self.message_user(request, f"{decision}: {row}", messages.SUCCESS)
            except ClawbooError as exc:
                self.message_user(request, f"{row}: {exc.detail}", messages.WARNING)

    @admin.action(description="Allow once")
    def allow_once(self, request: HttpRequest, qs: QuerySet[ToolApproval]) -> None:
        self._answer(request, qs, "allow_once")

    @admin.action(description="Deny")
    def deny(self, request: HttpRequest, qs: QuerySet[ToolApproval]) -> None:
        self._answer(request, qs, "deny")


@admin.register(ToolGrant)
class ToolGrantAdmin(ReadOnlyAdmin):
    """``allow_always`` grants: delete one to make the agent ask again."""

    list_display = ("agent_id", "tool", "granted_by", "created_at")
    search_fields = ("agent_id", "tool")
    # Staff holding the model's delete permission (any staff, it read: one granted
    # only view deleted grants from a grant's own delete page).
    deletable = True

    def delete_model(self, request: HttpRequest, obj: ToolGrant) -> None:
        revoke_grants([obj.pk])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ToolGrant]) -> None:
        revoke_grants(list(queryset.values_list("pk", flat=True)))
