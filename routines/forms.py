"""The routine form, shared by the routines page and the admin.

Validation is the data layer's: :meth:`RoutineForm.clean` asks
:func:`routines.store.check_create` / :func:`~routines.store.check_update` (the
same checks the writes run), so a bad cron spec, an unknown timezone or an agent of
another team is shown beside its field. :meth:`RoutineForm.save` writes through
:func:`~routines.store.create_routine` / :func:`~routines.store.update_routine`
only; a refusal that only the write can see (a bound task taken meanwhile, a fire
that started) is raised as the store's error for the caller to show.
"""

from __future__ import annotations

import functools
from typing import Any
from zoneinfo import available_timezones

from django import forms

from core import server_commands
from core.errors import ClawbooError
from core.models import Agent, Team
from routines import occurrence, store
from routines.models import Routine

# The task_template keys the form edits, each a field of its own.
TEMPLATE_FIELDS = store.TEMPLATE_KEYS


@functools.cache
def timezone_choices() -> list[tuple[str, str]]:
    # Every zone the store accepts (a routine made over the API may use any of them).
    zones = sorted(available_timezones() - {"UTC"})
    return [("UTC", "UTC"), *((z, z.replace("_", " ")) for z in zones)]


def split_globs(text: Any) -> list[str] | None:
    """A form's globs, one a line (commas too), as the template's list (None: none)."""
    globs = [g.strip() for line in str(text or "").splitlines() for g in line.split(",")]
    return [g for g in globs if g] or None


class AgentChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.display_name} ({obj.id}, {obj.runtime}) — team {obj.team_id}"


class RoutineForm(forms.ModelForm):
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    agent = AgentChoiceField(queryset=Agent.objects.none(), help_text="The routine fires as it.")
    cron_spec = forms.CharField(
        label="Schedule",
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "0 9 * * 1-5", "spellcheck": "false"}),
        help_text="Cron: minute hour day month weekday (a 6th field in front: seconds), "
        "e.g. <code>0 9 * * 1-5</code>; or a one-shot <code>once@2030-01-01T09:00</code>.",
    )
    timezone = forms.ChoiceField(
        choices=timezone_choices, initial="UTC", help_text="The schedule's wall clock."
    )
    title = forms.CharField(
        label="Task title", max_length=500, initial=store.DEFAULT_TITLE, strip=True
    )
    description = forms.CharField(
        label="Task description", required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    kind = forms.ChoiceField(
        choices=[(k, k) for k in store.TEMPLATE_KINDS],
        initial="code",
        help_text="code provisions a git worktree for each fire; research and chat do not.",
    )
    priority = forms.IntegerField(initial=0)
    repository = forms.CharField(
        label="Repository",
        required=False,
        max_length=128,
        help_text="Id of one of the team's registered repositories (staff register them).",
    )
    repo_path = forms.CharField(
        label="Repository path",
        required=False,
        max_length=1024,
        help_text="Staff: any repository path (registered for the team when saved); "
        "others: exactly a registered repository's path.",
    )
    model = forms.CharField(label="Model", required=False, max_length=1024)
    max_node_cents = forms.IntegerField(label="Cost cap (cents)", required=False, min_value=0)
    verify_cmd = forms.CharField(
        label="Verify command",
        required=False,
        max_length=1024,
        help_text="Judges each fire's change (staff, or an allowlisted command).",
    )
    team_task_id = forms.CharField(
        label="Bound task",
        required=False,
        max_length=128,
        help_text="Fire an existing task instead of a fresh one (one-shot schedules only).",
    )
    touches = forms.CharField(
        label="Touches",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "src/**\ndocs/*.md"}),
        help_text="Repository paths (globs) each fire's task changes, one a line: no agent "
        "starts it while overlapping work of its repository is in progress or waiting to "
        "land.",
    )
    approval_required = forms.BooleanField(
        label="Needs approval",
        required=False,
        help_text="Each fire's task waits for a person of the team to approve it before "
        "any agent takes it.",
    )

    class Meta:
        model = Routine
        fields = ("team", "agent", "cron_spec", "timezone", "catch_up")
        help_texts = {
            "catch_up": "After downtime: fire the newest missed slot (latest), none of them "
            "(skip), or each of them, up to 24 (all).",
        }

    def __init__(
        self, *args: Any, teams: list[str] | None = None, user: Any = None, **kwargs: Any
    ) -> None:
        """``teams``: the teams the person may see (None: all, as for staff); ``user``:
        who saves (a staff user's ``repo_path`` registers a repository only if they
        may register one: core.server_commands.repository_at)."""
        super().__init__(*args, **kwargs)
        self.operator = teams is None
        self.user = user
        team_qs = Team.objects.order_by("id")
        agent_qs = Agent.objects.select_related("team").order_by("team_id", "id")
        if teams is not None:
            team_qs = team_qs.filter(pk__in=teams)
            agent_qs = agent_qs.filter(team_id__in=teams)
        fields: Any = self.fields
        fields["team"].queryset = team_qs
        fields["agent"].queryset = agent_qs
        if not self.instance._state.adding:
            # A routine stays on its team; only its agent, schedule and task change.
            fields["team"].disabled = True
            template = self.instance.task_template or {}
            for name in TEMPLATE_FIELDS:
                if template.get(name) is not None:
                    self.initial[name] = template[name]
            if template.get("touches"):
                self.initial["touches"] = "\n".join(template["touches"])
        elif len(team_qs) == 1:
            self.initial.setdefault("team", team_qs[0].pk)

    # --- what the data layer is handed ------------------------------------------

    def task_template(self) -> dict[str, Any]:
        data = self.cleaned_data
        template: dict[str, Any] = {name: data.get(name) for name in TEMPLATE_FIELDS}
        for name in ("repository", "repo_path", "model", "team_task_id", "verify_cmd"):
            template[name] = template[name] or None
        template["description"] = template["description"] or ""
        template["touches"] = split_globs(template["touches"])
        team = data["team"].pk if data.get("team") is not None else self.instance.team_id
        if self.operator and template["repo_path"] and not template["repository"]:
            # A staff user's path resolves to (or registers) the team's repository.
            found = server_commands.repository_at(
                self.user, team, template["repo_path"], "task_template.repo_path"
            )
            template["repository"], template["repo_path"] = found.id, found.path
        return template

    def create_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "agent_id": data["agent"].pk,
            "team": data["team"].pk,
            "cron_spec": data["cron_spec"],
            "timezone": data["timezone"],
            "task_template": self.task_template(),
            "catch_up": data["catch_up"],
        }

    def changes(self) -> dict[str, Any]:
        """The edit as :func:`routines.store.update_routine` takes it: changed fields only."""
        data = self.cleaned_data
        changed = set(self.changed_data)
        out: dict[str, Any] = {}
        if "agent" in changed:
            out["agent_id"] = data["agent"].pk
        for name in ("cron_spec", "timezone", "catch_up"):
            if name in changed:
                out[name] = data[name]
        if changed & set(TEMPLATE_FIELDS):
            out["task_template"] = self.task_template()
        return out

    # --- validation and saving ----------------------------------------------------

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        if self.errors:
            # The data layer's checks need every field; the schedule alone can still be
            # checked now, so a bad spec is not left for a second round.
            schedule_edited = self.instance._state.adding or {"cron_spec", "timezone"} & set(
                self.changed_data
            )
            if schedule_edited and {"cron_spec", "timezone"} <= set(data):
                try:
                    occurrence.validate_new(data["cron_spec"], data["timezone"], store.now_ms())
                except ClawbooError as exc:
                    self.add_refusal(exc)
            return data
        try:
            if self.instance._state.adding:
                store.check_create(**self.create_arguments())
            else:
                # self.instance is still the row as read: construct_instance runs later.
                store.check_update(self.instance, self.changes())
        except ClawbooError as exc:
            self.add_refusal(exc)
        return data

    def add_refusal(self, exc: ClawbooError) -> None:
        """Show a data-layer refusal beside the field it names, else above the form."""
        named = str(getattr(exc, "field", None) or exc.extra.get("field") or "")
        if not named and "task_id" in exc.extra:
            named = "team_task_id"  # the one-owner and one-shot refusals of a bound task
        detail = exc.detail
        if named and detail.startswith(f"{named}: "):
            detail = detail[len(named) + 2 :]
        name = named.removeprefix("task_template.")
        name = {"agent_id": "agent"}.get(name, name)
        field = self.fields.get(name)
        if field is not None and not field.disabled:
            self.add_error(name, detail)
        else:
            self.add_error(None, exc.detail)

    def save_m2m(self) -> None:
        """Nothing related is edited here (the admin calls this after a save)."""

    def save(self, commit: bool = True) -> Any:
        """Write through the routines data layer (commit=False writes nothing)."""
        if not commit:
            return self.instance
        if self.instance._state.adding:
            routine = store.create_routine(**self.create_arguments())
        else:
            changes = self.changes()
            routine = (
                store.update_routine(self.instance.pk, changes)
                if changes
                else store.get_routine(self.instance.pk)
            )
        self.instance = routine
        return routine
