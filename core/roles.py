"""Roles (GOVERNANCE §6): the governed never hold the keys.

Every request comes from one **principal** (:func:`principal_of`): a *person* (a
signed-in session or a person's own API token; staff or a team member), an *agent*
(a key bound to one agent, or the credential a run is given), a *machine* (a
worker host's token) or a *reviewer* (the critic's run credential). Agent, machine
and reviewer are the **agent side**: they build, people govern.

:data:`VERBS` is the one table of who may do what: every write operation of the
REST API (``"POST /api/board/tasks/{task_id}/approve"``, the OpenAPI path), every
MCP tool (``"mcp approve"``), every board page action (``"page <url name>"``) and
every admin action (``"admin <app>.<model> <action>"``) names the principals it
admits. :func:`check` reads it, before the body is read and before anything is
written; a verb the table does not name is refused (deny by default). Adding an
operation is adding a row; ``tests/core/test_roles.py`` fails on any write
operation, MCP tool or admin action missing from it, and ``docs/roles.md`` is
compared with it.

Body-borne verbs: ``human_override`` rides in the body of a transition or a
complete, so the row names the fields that turn the operation into a people verb
(:attr:`Verb.people_fields`). For the agent side only, the check parses the JSON
body (the parser, not the view: nothing is validated or written yet) to name the
verb — ``"POST …/transition with human_override"`` — and refuses it there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from core.errors import ClawbooError, Forbidden
from core.models import AgentToken, MachineToken, Team

Kind = Literal["person", "agent", "machine", "reviewer", "anonymous"]
RunScope = Literal["task", "subtasks", "never", "any"]
AGENT_SIDE: frozenset[str] = frozenset({"agent", "machine", "reviewer"})


class PersonRequired(ClawbooError):
    """A verb GOVERNANCE §6 keeps for people, asked by the agent side (403)."""

    code = "person_required"


@dataclass(frozen=True)
class Principal:
    kind: Kind
    # Who, for the refusal's detail: a username, ``agent a1``, ``machine host-1``.
    name: str
    staff: bool = False

    @property
    def agent_side(self) -> bool:
        return self.kind in AGENT_SIDE

    def describe(self) -> str:
        if self.kind == "person":
            return f"person {self.name!r}" + (" (staff)" if self.staff else "")
        return f"{self.kind} {self.name!r}"


ANONYMOUS = Principal("anonymous", "")

# Where a user object authenticated through a credential bound to one agent (the
# agent's key, a run's credential, both of which authenticate as the agent's owner)
# keeps that agent's team. Such a request is the agent side (GOVERNANCE §6): it sees
# its agent's team only, and the owner's other teams and staff powers stay with the
# owner's own credential.
_AGENT_TEAM = "_clawboo_agent_team"


def bind_to_agent_team(user: Any, team_id: str) -> None:
    """Mark ``user`` (this request's object) as acting through a key of an agent of
    ``team_id``."""
    setattr(user, _AGENT_TEAM, team_id)


def agent_team(user: Any) -> str | None:
    """The team of the agent whose key ``user`` acts through, or None (a person)."""
    team = getattr(user, _AGENT_TEAM, None)
    return team if isinstance(team, str) else None


def principal_of(user: Any, auth: Any = None) -> Principal:
    """The principal of a request's ``(user, auth)``, REST, websocket or page alike.

    The credential decides before the user does: an agent-bound key or a run's
    credential is the agent side whatever its owner is (staff included), and a
    machine token is a machine. Only a credential bound to nothing (a session, a
    person's own token) is a person."""
    if user is None or not getattr(user, "is_authenticated", False):
        return ANONYMOUS
    if isinstance(auth, MachineToken):
        return Principal("machine", auth.host)
    if isinstance(auth, AgentToken):
        return Principal("agent", auth.agent_id)
    # A run's credential (boardmcp.models.RunCredential) says which side it is.
    kind = getattr(auth, "principal_kind", None)
    if kind in ("agent", "reviewer"):
        return Principal(kind, str(getattr(auth, "agent_id", "")))
    if auth is not None and not _is_person_token(auth):
        # An unknown kind of credential is never taken for a person.
        return Principal("agent", str(getattr(auth, "pk", "")))
    # A machine's service user signed in some other way is still the machine.
    if hasattr(user, "machine_token"):
        return Principal("machine", str(user.get_username()))
    return Principal("person", str(user.get_username()), staff=staff_power(user))


def _is_person_token(auth: Any) -> bool:
    from rest_framework.authtoken.models import Token

    return isinstance(auth, Token)


# --- the table ---------------------------------------------------------------------

PEOPLE: frozenset[str] = frozenset({"person"})
BUILDERS: frozenset[str] = frozenset({"person", "agent", "machine"})
READERS: frozenset[str] = frozenset({"person", "agent", "machine", "reviewer"})
MACHINES: frozenset[str] = frozenset({"machine"})
RUNS: frozenset[str] = frozenset({"agent"})

# Any value of the field makes the verb a people verb.
ANY = None


@dataclass(frozen=True)
class Verb:
    """One operation and the principals it admits.

    ``people_fields``: body fields that make the operation a people verb when the
    agent side sends them (``{field: None}``: any non-null value; ``{field:
    (values,)}``: one of those values).

    ``permission``: an admin action's Django model permission (``"change"``,
    ``"delete"``) that the person needs as well: staff granted only ``view`` on a
    model reads it in the admin and runs none of its actions.

    ``model``: for an operation of the API, MCP or a page, the model (``"board.task"``)
    whose ``permission`` a staff person needs to do it beyond their own teams and
    agents (:func:`staff_power`); an admin action's model is in its name.

    ``run``: what a run's credential (minted for one run of one task) may do with
    it (:func:`check_run_scope`): ``"task"``, on its own task only (every operation
    on a task's path, unless its row says otherwise); ``"subtasks"``, on its own task
    and the subtasks split from it (board.access.owns_task decides); ``"never"``;
    ``"any"``, not about a task (the default for a path without one)."""

    name: str
    admits: frozenset[str]
    says: str
    people_fields: Mapping[str, tuple[Any, ...] | None] | None = None
    permission: str | None = None
    run: RunScope | None = None
    model: str | None = None

    @property
    def django_permission(self) -> str | None:
        """``"board.change_task"``: the Django model permission the row names, or None."""
        if self.permission is None:
            return None
        label = self.model or self.name.split(" ")[1]
        app_label, model = label.split(".")
        return f"{app_label}.{self.permission}_{model}"

    @property
    def run_scope(self) -> RunScope:
        if self.run is not None:
            return self.run
        return "task" if "{task_id}" in self.name else "any"


_T = "/api/board/tasks/{task_id}"

VERBS: tuple[Verb, ...] = (
    # --- the board: what agents do with their own work ---------------------------
    # A task's own run ceiling wins over its agent's (a person's setting), its base
    # branch over its repository's (where the work lands), its remote over its
    # agent's repository (what a remote worker clones and pushes the work to), and its
    # model over the one an operator approved in its agent's settings (the run's CLI
    # ``--model``, and the price its streamed usage is stopped at the ceiling by: an
    # unpriced model runs past it), and its max_attempts over the rule that a failed
    # run blocks its task for a person (with it, up to 100 failed runs each go back to
    # todo and are claimed and paid for again): filed by the agent side with any, the
    # agent would raise its own limit or choose where its code comes from and lands,
    # or what runs it, behind an approval that reads as the work's.
    Verb(
        "POST /api/board/tasks",
        BUILDERS,
        "create a task (an agent's needs approval; a subtask: under its own agents'"
        " tasks); its run ceiling (max_run_cents), retries (max_attempts), base branch,"
        " remote (metadata.repo_remote) and model (metadata.model), people only",
        people_fields={
            "max_run_cents": ANY,
            "max_attempts": ANY,
            "metadata.base_branch": ANY,
            "metadata.repo_remote": ANY,
            "metadata.model": ANY,
        },
    ),
    Verb("PATCH " + _T, PEOPLE, "edit a task (what would run, and where)"),
    Verb(
        f"POST {_T}/transition",
        BUILDERS,
        "move a task; the agent side only its own work to in_progress (from todo: the"
        " claim), or from in_progress to in_review or blocked; to done, todo, backlog"
        " or cancelled, with human_override, or out of review, people only",
        people_fields={"human_override": ANY, "to": ("done", "todo", "backlog", "cancelled")},
    ),
    # A run's credential claims nothing: the executor claimed its task, then started it.
    Verb(f"POST {_T}/claim", BUILDERS, "claim a task", run="never"),
    Verb("POST /api/board/claim-next", BUILDERS, "claim the next ready task", run="never"),
    Verb(f"POST {_T}/heartbeat", BUILDERS, "renew a claim's lease"),
    Verb(f"POST {_T}/release", BUILDERS, "give a claimed task back"),
    Verb(
        f"POST {_T}/complete",
        BUILDERS,
        "settle a held task done; with human_override, or a task in review, people only",
        people_fields={"human_override": ANY},
    ),
    Verb(f"POST {_T}/fail", BUILDERS, "settle a held task failed; a task in review, people only"),
    Verb(
        f"POST {_T}/submit",
        BUILDERS,
        "hand in work (a pushed branch, or the server's checkout) for the server to judge",
    ),
    Verb(
        f"POST {_T}/comments",
        BUILDERS,
        "comment (the agent side: on its own agents' tasks)",
        run="subtasks",
    ),
    Verb(
        f"POST {_T}/deps",
        BUILDERS,
        "say what a task waits on (the agent side: its own agents' tasks)",
        run="subtasks",
    ),
    Verb(f"DELETE {_T}/deps/{{dep_id}}", PEOPLE, "drop a dependency"),
    Verb(f"POST {_T}/cancel-dependents", PEOPLE, "cancel a task's dependents"),
    Verb(f"POST {_T}/executions", BUILDERS, "open a run's execution"),
    Verb(f"POST {_T}/executions/{{execution_id}}/log", BUILDERS, "report a run's log"),
    Verb(f"POST {_T}/executions/{{execution_id}}/usage", BUILDERS, "report a run's usage"),
    Verb(f"POST {_T}/executions/{{execution_id}}/steps", BUILDERS, "report a run's steps"),
    Verb(f"POST {_T}/executions/{{execution_id}}/stalled", BUILDERS, "report a stalled run"),
    Verb(
        f"POST {_T}/executions/{{execution_id}}/close",
        BUILDERS,
        "report how a run ended (what it ran, never what it means)",
    ),
    # Where the checkout starts is what its review is measured from, while a landing
    # takes everything since the base branch: a branch point off the base branch
    # would land commits no reviewer was shown. The server's default (the base
    # branch's tip) for the agent side; another point is a person's choice.
    Verb(
        f"POST {_T}/workspace",
        BUILDERS,
        "make a task's worktree; where it starts (base_ref, base_sha), people only; the"
        " agent side in its run's repository only (the claim's answer)",
        people_fields={"base_ref": ANY, "base_sha": ANY},
    ),
    Verb(f"POST {_T}/workspace/pause", BUILDERS, "pause a task's worktree"),
    Verb(f"POST {_T}/workspace/resume", BUILDERS, "resume a task's worktree"),
    Verb(
        f"POST {_T}/workspace/complete",
        BUILDERS,
        "finish a task's worktree (to review; the agent side: not work the server judges)",
    ),
    Verb(f"POST {_T}/workspace/review", BUILDERS, "open a review checkout"),
    Verb(f"POST {_T}/workspace/handoff", BUILDERS, "write a task's handoff"),
    Verb("POST /api/teams/{team_id}/chat", BUILDERS, "write in the team chat"),
    Verb("POST /api/agents/{agent_id}/pause", BUILDERS, "pause an agent (an agent: its own)"),
    Verb("POST /api/workers/beat", MACHINES, "a remote worker is alive"),
    # A login: it takes no credential (a username and password), so anyone may ask;
    # only a person's password answers, with that person's own key.
    Verb(
        "POST /api/auth/token",
        frozenset({"anonymous", "person"}),
        "trade a username and password for the user's own key (clawboo login)",
    ),
    # A forge's webhook: the forge holds no Clawboo key, so anyone may send one; only a
    # delivery whose HMAC-SHA256 signature verifies with the repository's webhook
    # secret is read (401 otherwise, nothing written). It merges nothing itself: it
    # makes the server ask the forge.
    Verb(
        "POST /api/repositories/{repo_id}/forge/webhook",
        frozenset({"anonymous"}),
        "a forge's webhook delivery (signature-checked; the server then asks the forge)",
    ),
    Verb(
        "POST /api/forge/{repo_id}/webhook",
        frozenset({"anonymous"}),
        "the same webhook at the contract's path (API.md)",
    ),
    # --- judgement and approvals: people only ------------------------------------
    Verb(f"POST {_T}/verdict", PEOPLE, "set or change a verdict"),
    Verb(f"POST {_T}/approve", PEOPLE, "approve (land) a task in review"),
    Verb(f"POST {_T}/request-changes", PEOPLE, "request changes on a task in review"),
    Verb(f"POST {_T}/approval", PEOPLE, "decide a task approval"),
    Verb("POST /api/approvals/{approval_id}", PEOPLE, "decide a tool approval"),
    # --- governing: people only (owner or staff, as each endpoint says) ----------
    Verb(
        "POST /api/agents/{agent_id}/resume",
        PEOPLE,
        "resume an agent (its owner or staff, as editing it; pausing is any member's)",
    ),
    Verb("POST /api/agents", PEOPLE, "register an agent"),
    Verb("PATCH /api/agents/{agent_id}", PEOPLE, "edit an agent"),
    Verb("POST /api/teams", PEOPLE, "create a team"),
    Verb("PATCH /api/teams/{team_id}", PEOPLE, "edit a team"),
    Verb("POST /api/budgets", PEOPLE, "create a budget"),
    Verb("PATCH /api/budgets/{budget_id}", PEOPLE, "edit a budget"),
    Verb("DELETE /api/budgets/{budget_id}", PEOPLE, "delete a budget"),
    Verb("POST /api/budgets/{budget_id}/resume", PEOPLE, "resume a budget"),
    Verb("POST /api/repositories", PEOPLE, "register a repository"),
    Verb("PATCH /api/repositories/{repo_id}", PEOPLE, "edit a repository"),
    Verb("DELETE /api/repositories/{repo_id}", PEOPLE, "remove a repository"),
    Verb("POST /api/routines", PEOPLE, "create a routine"),
    Verb("PATCH /api/routines/{routine_id}", PEOPLE, "edit a routine"),
    Verb("DELETE /api/routines/{routine_id}", PEOPLE, "delete a routine"),
    Verb("POST /api/routines/{routine_id}/pause", PEOPLE, "pause a routine"),
    Verb("POST /api/routines/{routine_id}/resume", PEOPLE, "resume a routine"),
    Verb("POST /api/routines/{routine_id}/run-now", PEOPLE, "fire a routine now"),
    Verb("POST /api/schedules", PEOPLE, "create a schedule"),
    Verb("PATCH /api/schedules/{schedule_id}", PEOPLE, "edit a schedule"),
    Verb("DELETE /api/schedules/{schedule_id}", PEOPLE, "delete a schedule"),
    Verb("POST /api/schedules/{schedule_id}/run", PEOPLE, "run a schedule now"),
    Verb("POST /api/board/reconcile", PEOPLE, "reconcile the board (staff)"),
    Verb("POST /api/worktrees/gc", PEOPLE, "collect old worktrees (staff)"),
    # --- MCP tools ------------------------------------------------------------------
    Verb("mcp list_tasks", READERS, "list the team's tasks"),
    Verb("mcp get_task", READERS, "read a task"),
    Verb("mcp read_handoff", READERS, "read a task's handoff"),
    # The reviewer reads the task it reviews (get_task, read_handoff; list_tasks
    # lists that one task), nothing else: not the team's spend nor its repositories.
    Verb("mcp spend", BUILDERS, "read the team's spend"),
    Verb("mcp get_repository", BUILDERS, "read a repository and its forge (secrets masked)"),
    Verb("mcp create_task", BUILDERS, "create a task (an agent's needs approval)"),
    Verb(
        "mcp create_subtask",
        BUILDERS,
        "split work into a subtask (the agent side: under its own agents' tasks)",
        run="subtasks",
    ),
    Verb(
        "mcp comment",
        BUILDERS,
        "comment (the agent side: on its own agents' tasks)",
        run="subtasks",
    ),
    Verb(
        "mcp link_dependency",
        BUILDERS,
        "say what a task waits on (the agent side: its own agents' tasks)",
        run="subtasks",
    ),
    Verb("mcp claim_task", BUILDERS, "claim a task", run="never"),
    Verb("mcp heartbeat", BUILDERS, "renew a claim's lease", run="task"),
    Verb(
        "mcp complete_task",
        BUILDERS,
        "settle a held task done (not a task in review)",
        run="task",
    ),
    Verb("mcp fail_task", BUILDERS, "settle a held task failed (not a task in review)", run="task"),
    Verb("mcp request_review", BUILDERS, "hand a held task to review", run="task"),
    Verb("mcp write_handoff", BUILDERS, "write a held task's handoff", run="task"),
    Verb("mcp decide_approval", PEOPLE, "decide a task approval"),
    Verb("mcp permission_prompt", RUNS, "ask a person to allow a tool call (a run only)"),
    # --- board pages (a signed-in session: people) ---------------------------------
    Verb("page login", PEOPLE, "sign in again"),
    Verb("page logout", PEOPLE, "sign out"),
    Verb("page routine-new", PEOPLE, "create a routine"),
    Verb("page routine-edit", PEOPLE, "edit a routine"),
    Verb("page routine-delete", PEOPLE, "delete a routine"),
    Verb("page routine-move", PEOPLE, "pause, resume or fire a routine"),
    Verb("page gateway-job-delete", PEOPLE, "delete a gateway job"),
    Verb("page gateway-job-move", PEOPLE, "pause, resume or fire a gateway job"),
    # --- the admin (staff sessions: people) ------------------------------------------
    Verb("admin", PEOPLE, "add, change or delete a row in the admin (staff)"),
    # Deleting rows needs the model's delete permission; every other action changes
    # the rows it is run on (approve, resume, cancel, send again): change.
    *(
        Verb(
            f"admin {model} {action}",
            PEOPLE,
            f"an admin action (staff with the {permission} permission)",
            permission=permission,
        )
        for model, actions in (
            ("auth.group", ("delete_selected",)),
            ("auth.user", ("delete_selected",)),
            ("clawboo.agent", ("delete_selected", "pause_agents", "resume_agents")),
            ("clawboo.repository", ("delete_selected",)),
            ("clawboo.machinetoken", ("revoke",)),
            ("clawboo.heartbeat", ("delete_selected",)),
            ("board.toolapproval", ("allow_once", "deny")),
            ("board.toolgrant", ("delete_selected",)),
            (
                "board.task",
                (
                    "release_tasks",
                    "cancel_tasks",
                    "move_to_todo",
                    "move_to_backlog",
                    "move_to_blocked",
                    "move_to_in_review",
                    "move_to_done",
                    "request_changes",
                    "override_verification",
                    "approve_work",
                    "deny_work",
                    "approve_tasks",
                ),
            ),
            ("board.budget", ("delete_selected", "resume")),
            ("routines.routine", ("delete_selected", "pause", "resume", "run_now")),
            ("routines.routinefire", ("delete_selected",)),
            ("ops.notificationchannel", ("delete_selected",)),
            ("ops.notificationdelivery", ("delete_selected", "send_again")),
            ("background_queue.scheduledjob", ("delete_selected",)),
            ("background_queue.successfuljob", ("delete_selected", "resubmit_task")),
            ("background_queue.failedjob", ("delete_selected", "resubmit_task")),
            ("background_queue.queuedjob", ("delete_selected",)),
        )
        for action in actions
        for permission in ("delete" if action == "delete_selected" else "change",)
    ),
)

# What a staff person needs, beyond their own teams and agents, for each operation a
# person does (:func:`staff_power`): the Django model permission the admin asks for
# the same change. The first entry whose prefix names the verb decides; an operation
# a person does that none names is refused to staff without a team of its own
# (tests/core/test_roles.py fails on one missing).
STAFF_NEEDS: tuple[tuple[str, str, str], ...] = (
    ("POST /api/board/tasks/{task_id}", "board.task", "change"),
    ("PATCH /api/board/tasks/{task_id}", "board.task", "change"),
    ("DELETE /api/board/tasks/{task_id}", "board.task", "change"),
    ("POST /api/board/tasks", "board.task", "add"),
    ("POST /api/board/claim-next", "board.task", "change"),
    ("POST /api/board/reconcile", "board.task", "change"),
    ("POST /api/worktrees/gc", "board.workspace", "delete"),
    ("POST /api/approvals/", "board.toolapproval", "change"),
    ("POST /api/teams/{team_id}/chat", "clawboo.chatmessage", "add"),
    ("PATCH /api/teams/", "clawboo.team", "change"),
    ("POST /api/agents/", "clawboo.agent", "change"),
    ("POST /api/agents", "clawboo.agent", "add"),
    ("PATCH /api/agents/", "clawboo.agent", "change"),
    ("POST /api/budgets/", "board.budget", "change"),
    ("POST /api/budgets", "board.budget", "add"),
    ("PATCH /api/budgets/", "board.budget", "change"),
    ("DELETE /api/budgets/", "board.budget", "delete"),
    ("POST /api/repositories", "clawboo.repository", "add"),
    ("PATCH /api/repositories/", "clawboo.repository", "change"),
    ("DELETE /api/repositories/", "clawboo.repository", "delete"),
    ("POST /api/routines/", "routines.routine", "change"),
    ("POST /api/routines", "routines.routine", "add"),
    ("PATCH /api/routines/", "routines.routine", "change"),
    ("DELETE /api/routines/", "routines.routine", "delete"),
    ("POST /api/schedules/", "routines.routine", "change"),
    ("POST /api/schedules", "routines.routine", "add"),
    ("PATCH /api/schedules/", "routines.routine", "change"),
    ("DELETE /api/schedules/", "routines.routine", "delete"),
    ("mcp create_", "board.task", "add"),
    *(
        (f"mcp {tool}", "board.task", "change")
        for tool in (
            "comment",
            "link_dependency",
            "claim_task",
            "heartbeat",
            "complete_task",
            "fail_task",
            "request_review",
            "write_handoff",
            "decide_approval",
        )
    ),
    ("page routine-new", "routines.routine", "add"),
    ("page routine-delete", "routines.routine", "delete"),
    ("page gateway-job-delete", "routines.routine", "delete"),
    ("page routine-", "routines.routine", "change"),
    ("page gateway-job-", "routines.routine", "change"),
)
# Operations a person does that give no power over anyone's work: signing in and out,
# trading a password for one's own key, the admin's own pages (Django checks those),
# making a team (any person may; they become its member), and the MCP tools that
# only read.
NO_STAFF_POWER: frozenset[str] = frozenset(
    {
        "POST /api/auth/token",
        "POST /api/teams",
        "page login",
        "page logout",
        "admin",
        "mcp list_tasks",
        "mcp get_task",
        "mcp read_handoff",
        "mcp spend",
        "mcp get_repository",
    }
)


def _staff_needs(verb: Verb) -> Verb:
    if "person" not in verb.admits or verb.permission is not None:
        return verb
    for prefix, model, permission in STAFF_NEEDS:
        if verb.name.startswith(prefix):
            return replace(verb, model=model, permission=permission)
    return verb


VERBS = tuple(_staff_needs(verb) for verb in VERBS)

TABLE: dict[str, Verb] = {verb.name: verb for verb in VERBS}
assert len(TABLE) == len(VERBS), "a verb is named twice in the roles table"  # noqa: S101


def check(
    principal: Principal,
    verb: str,
    body: Callable[[], Any] | None = None,
) -> Verb:
    """The row of ``verb`` if ``principal`` may do it; else :class:`PersonRequired`
    (a people verb asked by the agent side) or :class:`~core.errors.Forbidden` (no such row, or
    one that admits nobody like the caller). ``body``: how to read the request's
    body, asked for only when the row names people fields and the caller is the
    agent side."""
    row = TABLE.get(verb)
    if row is None:
        raise Forbidden(f"{verb!r} is in no row of the roles table: refused to everyone")
    if principal.agent_side and row.people_fields and body is not None:
        try:
            data = body()
        except Exception:
            if principal.kind in row.admits:
                raise  # a body the parser refuses: 400, nothing written
            data = None  # refused below whatever it says
        shown = _people_field(row.people_fields, data)
        if shown is not None:
            raise _refusal(principal, f"{verb} with {shown}", people=True)
    if principal.kind not in row.admits:
        raise _refusal(principal, verb, people=not (row.admits & AGENT_SIDE))
    return row


def check_run_scope(principal: Principal, verb: str, run: str | None, task_id: Any) -> None:
    """A run's credential (``run``: the task it was minted for; None: another
    credential, no check) acts on its own run's task only (GOVERNANCE §6): not on
    another task its agent also holds -- another run's, or a claim left over, which
    it could otherwise renew, settle or hand in with a ticket the server fills in --
    and it claims no new work (the executor claims, then starts the run). Reads
    within its team stay. ``task_id``: the task the operation names (None: none).
    Rows whose run scope is ``"subtasks"`` reach the subtasks split from the run's
    task too: the door that has the task decides (board.access.owns_task)."""
    if run is None:
        return
    row = TABLE.get(verb)
    scope = row.run_scope if row is not None else "task"
    if scope == "never":
        raise Forbidden(
            f"{principal.describe()} may not {verb}: a run's credential claims no work "
            f"(it was minted for the run of task {run!r}, which the executor claimed)",
            principal=principal.kind,
            verb=verb,
        )
    if scope == "task" and task_id is not None and task_id != run:
        raise run_scope_refusal(principal, verb, run, task_id)


def run_scope_refusal(
    principal: Principal, verb: str, run: str, task_id: Any, *, on: str = "on "
) -> ClawbooError:
    """``on``: the word between the verb and the task (none for a verb that ends
    with its own, ``comment on``)."""
    return Forbidden(
        f"{principal.describe()} may not {verb} {on}task {task_id!r}: this credential "
        f"was minted for the run of task {run!r} and acts on that task only",
        principal=principal.kind,
        verb=verb,
    )


# Reads (GET, HEAD, OPTIONS): a signed-in caller reads its teams' (each view scopes
# them). The reviewer reads the change it reviews, nothing else: the task its
# credential was minted for, at this path and under it; any other read is refused.
REVIEWER_READS = "/api/board/tasks/{task_id}"


def check_read(principal: Principal, path: str, task_id: Any, own_task: str | None) -> None:
    """Refuse (``forbidden``) a reviewer's read of anything but the task it reviews:
    ``path`` is the OpenAPI path read, ``task_id`` the task it names (or None),
    ``own_task`` the reviewer's task."""
    if principal.kind != "reviewer":
        return
    under = path == REVIEWER_READS or path.startswith(REVIEWER_READS + "/")
    if under and own_task is not None and task_id == own_task:
        return
    raise Forbidden(
        f"{principal.describe()} may not read {path}: the reviewer reads the task it "
        "reviews, nothing else (GOVERNANCE §6)",
        principal=principal.kind,
        verb=f"GET {path}",
    )


def _people_field(fields: Mapping[str, tuple[Any, ...] | None], data: Any) -> str | None:
    """The people field ``data`` carries (``"human_override"``, ``"to done"``), or None."""
    if not isinstance(data, Mapping):
        return None
    for field, values in fields.items():
        # ``metadata.base_branch``: a key of an object the body carries.
        value: Any = data
        for part in field.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            continue
        if values is ANY:
            return field
        if isinstance(value, str) and value in values:
            return f"{field} {value}"
    return None


def refuse_agent_side(principal: Principal, verb: str) -> None:
    """A people verb named by the state it meets (completing a task in review is
    approving it): the agent side is refused as by the table."""
    if principal.agent_side:
        raise _refusal(principal, verb, people=True)


def _refusal(principal: Principal, verb: str, *, people: bool) -> ClawbooError:
    """``person_required`` for a people verb asked by the agent side; else a plain
    ``forbidden`` (e.g. a reviewer writing, or a person beating as a worker)."""
    if principal.agent_side and people:
        return PersonRequired(
            f"{principal.describe()} may not {verb}: a person decides this with "
            "their own credential (GOVERNANCE §6)",
            principal=principal.kind,
            verb=verb,
        )
    return Forbidden(f"{principal.describe()} may not {verb}", principal=principal.kind, verb=verb)


# --- pages and the admin ----------------------------------------------------------


def page_verb(request: Any) -> str | None:
    """The table's name for a write to a page or the admin, or None (the API and
    MCP are checked by their own doors)."""
    path = str(getattr(request, "path_info", ""))
    match = getattr(request, "resolver_match", None)
    if path.startswith(("/api/", "/mcp")) or match is None:
        return None
    if match.namespace == "admin":
        action = request.POST.get("action") if request.method == "POST" else None
        model_admin = getattr(match.func, "model_admin", None)
        if action and model_admin is not None and match.url_name.endswith("_changelist"):
            meta = model_admin.model._meta
            return f"admin {meta.app_label}.{meta.model_name} {action}"
        return "admin"
    return f"page {match.url_name or path}"


def check_admin_permission(user: Any, verb: str) -> None:
    """An admin action's row names the model permission it needs
    (:attr:`Verb.permission`): a person without it is refused (403), nothing run."""
    row = TABLE.get(verb)
    if row is None or row.django_permission is None or not verb.startswith("admin "):
        return  # a page's or the API's: staff's powers beyond their teams (staff_power)
    label = verb.split(" ")[1]
    if not user.has_perm(row.django_permission):
        raise Forbidden(
            f"{principal_of(user, None).describe()} may not {verb}: it needs the "
            f"{row.permission} permission on {label}"
        )


def admin_action_offered(user: Any, verb: str) -> bool:
    """Whether the admin offers ``user`` the action ``verb`` (``"admin <app>.<model>
    <action>"``) in its menu: the two checks :class:`PageRolesMiddleware` runs on
    the action's POST, so the menu lists what the person may run and no more."""
    try:
        check(principal_of(user, None), verb)
        check_admin_permission(user, verb)
    except ClawbooError:
        return False
    return True


# --- staff's powers ------------------------------------------------------------------

# Where a person's user object, for this request, keeps the row whose model permission
# the person lacks (:func:`bind_staff_power`).
_STAFF_WITHHELD = "_clawboo_staff_withheld"


class StaffPermissionRequired(Forbidden):
    """A staff person reaching beyond their own teams and agents without the Django
    model permission the roles table names for the operation: ``forbidden`` like any
    other, told apart only so a page's view can answer it as the page check does."""


def bind_staff_power(user: Any, verb: str | None) -> None:
    """Say, for this request, whether ``user``'s staff powers hold for ``verb``.

    Staff act on every team and as every agent; for a write that is a power over
    others' work, and a staff person's cross-team use of it needs the Django model
    permission the admin asks for the same change (the row's :attr:`Verb.model`
    and :attr:`Verb.permission`; a superuser holds them all). Without it the person
    keeps a member's powers -- in their own teams, as their own agents -- and
    reaching beyond them is refused (:func:`refuse_withheld`). Each door calls this
    once per request, before the view (REST: core.api.permissions; pages:
    :class:`PageRolesMiddleware`; MCP: boardmcp.tools); ``verb`` None (a read)
    leaves staff's reads as they are."""
    if user is None or not getattr(user, "is_authenticated", False):
        return
    row = TABLE.get(verb) if verb is not None else None
    needed = row.django_permission if row is not None else None
    withheld = (
        row is not None
        and needed is not None
        # Through an agent's key or a run's credential the owner is the agent side,
        # which holds no staff power to withhold (its own refusals answer).
        and agent_team(user) is None
        and bool(user.is_staff)
        and not user.is_superuser
        and not user.has_perm(needed)
    )
    if withheld:
        setattr(user, _STAFF_WITHHELD, row)
    elif hasattr(user, _STAFF_WITHHELD):
        delattr(user, _STAFF_WITHHELD)


def staff_power(user: Any) -> bool:
    """Whether ``user`` holds staff's powers (every team, every agent, the settings
    only staff change) for this request: an active staff person or superuser with
    their own credential (an agent's key or a run's credential is the agent side,
    whoever its owner is), holding the model permission of the write asked
    (:func:`bind_staff_power`). The one rule every door and view asks."""
    return bool(
        user is not None
        and getattr(user, "is_authenticated", False)
        and getattr(user, "is_active", True)
        and (user.is_staff or user.is_superuser)
        and agent_team(user) is None
        and getattr(user, _STAFF_WITHHELD, None) is None
    )


def holds(user: Any, verb: str) -> bool:
    """Whether ``user`` holds the Django model permission the table names for ``verb``
    (:attr:`Verb.django_permission`; a superuser holds them all, a row naming none
    asks none). For a write that does another's on the way -- a staff caller's
    ``repo_path`` that registers a repository -- the other's row decides."""
    row = TABLE.get(verb)
    needed = row.django_permission if row is not None else None
    return needed is None or bool(user.is_superuser) or bool(user.has_perm(needed))


def refuse_withheld(user: Any, what: str) -> None:
    """Refuse (403, naming the permission) a staff person whose staff powers this
    request withholds (:func:`bind_staff_power`) and who reached ``what`` -- a team
    not theirs, another's agent, a setting only staff change -- where a member would
    meet ``not found`` or ``forbidden``. A staff person may read it, so the refusal
    names what is missing rather than pretend it does not exist. Anyone else: no-op
    (the caller's own refusal follows)."""
    row = getattr(user, _STAFF_WITHHELD, None) if user is not None else None
    if isinstance(row, Verb):
        raise staff_refusal(principal_of(user, None), row, what)


def staff_refusal(principal: Principal, row: Verb, what: str) -> StaffPermissionRequired:
    return StaffPermissionRequired(
        f"{principal.describe()} may not {row.name} on {what}: beyond your own teams "
        f"and agents it needs the {row.permission} permission on {row.model} "
        f"({row.django_permission})",
        permission=row.django_permission,
        verb=row.name,
    )


def withheld_rows(user: Any) -> frozenset[str]:
    """The verbs whose model permission staff ``user`` lacks (none for a superuser or
    a person who is not staff): a door that binds its caller once (MCP) narrows it
    per call with these (:func:`bind_staff_power` for one request)."""
    if not getattr(user, "is_staff", False) or user.is_superuser:
        return frozenset()
    return frozenset(
        row.name
        for row in VERBS
        if row.django_permission is not None
        and not row.name.startswith("admin ")
        and not user.has_perm(row.django_permission)
    )


class PageRolesMiddleware:
    """The roles table's check for board page actions and admin actions: every
    write a signed-in principal sends to a page names a row, checked before the
    view runs (a signed-out caller meets the page's own sign-in)."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        return self.get_response(request)

    def process_view(self, request: Any, view_func: Any, args: Any, kwargs: Any) -> Any:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return None
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        verb = page_verb(request)
        if verb is None:
            return None
        try:
            check(principal_of(user, None), verb)
            check_admin_permission(user, verb)
            bind_staff_power(user, verb)
        except ClawbooError as exc:
            from django.http import HttpResponseForbidden

            return HttpResponseForbidden(exc.detail, content_type="text/plain")
        return None

    def process_exception(self, request: Any, exception: Exception) -> Any:
        """A page's view that met staff reaching beyond their teams without the
        permission (:func:`refuse_withheld`): 403 naming it, as the check above."""
        if isinstance(exception, StaffPermissionRequired):
            from django.http import HttpResponseForbidden

            return HttpResponseForbidden(exception.detail, content_type="text/plain")
        return None


# --- people's rows: whom a person who is not a superuser may govern ------------------
# Team membership is what both rules below count, and every member's power (a team's
# approvals, verdicts, agents) follows it: so who may change a team's members is
# the same kind of rule, kept beside the one it would otherwise undo.


def _member_teams(user: Any) -> set[str]:
    # Read here, not through core.registry: the registry asks this module (update_team).
    return set(Team.objects.filter(members=user).values_list("pk", flat=True))


def may_manage_person(asker: Any, person: Any) -> bool:
    """Whether ``asker`` (holding the admin's change or delete permission on users)
    may change ``person``'s row, set their password, or delete them: the one rule.

    A superuser: anyone. Anyone else: their own row, and a person who holds nothing
    the asker does not already hold as a member -- neither staff nor superuser, and
    every team they belong to or own an agent in is one of the asker's own teams.
    Setting a person's password is signing in as them: their teams' approvals,
    their agents' keys, their name on every verdict."""
    from core.models import Agent

    if asker.is_superuser or person.pk == asker.pk:
        return True
    if person.is_superuser or person.is_staff:
        return False
    theirs = set(Team.objects.filter(members=person).values_list("pk", flat=True))
    theirs |= set(Agent.objects.filter(owner=person).values_list("team_id", flat=True))
    return theirs <= _member_teams(asker)


def may_change_members(asker: Any, team_id: str) -> bool:
    """Whether ``asker`` may change who belongs to the existing team ``team_id``: the
    one rule every door that edits a team's members asks (the admin's team page;
    ``core.registry.update_team`` given ``by``). A superuser: any team. Anyone else
    (staff granted "change team" included): only a team they already belong to.

    Otherwise "change team" was every team's membership, and membership is every
    member's power: a staff person added themselves to another team, then decided
    its approvals and, through :func:`may_manage_person` (people wholly of the
    asker's teams), reset its members' passwords -- or took a member out of the team
    they did not share, so that the member became wholly of the asker's. A team
    being made names its first members freely (nothing is held in it yet)."""
    return bool(asker.is_superuser) or team_id in _member_teams(asker)


# --- the table as people read it (docs/roles.md) -----------------------------------

_COLUMNS = ("person", "agent", "machine", "reviewer")


def as_markdown() -> str:
    """``docs/roles.md``: the table, generated (``python manage.py roles``); a test
    compares the file with it."""
    lines = [
        "# Who may do what",
        "",
        "Generated from `core/roles.py` by `python manage.py roles > docs/roles.md`",
        "(`tests/core/test_roles.py` fails when the two differ). GOVERNANCE §6: every",
        "request comes from one principal -- a **person** (a signed-in session or a",
        "person's own API token; staff or a team member), an **agent** (a key bound to",
        "one agent, or a run's credential), a **machine** (a worker host's token) or the",
        "**reviewer** (the critic's run credential). Agent, machine and reviewer are the",
        "agent side. A write not in this table is refused to everyone; a verb kept for",
        "people answers the agent side `403 person_required` (the detail names the",
        "principal and the verb) before the body is read, and writes nothing. Whether a",
        "person may is then the endpoint's own rule (a member of the team, the agent's",
        "owner, or staff). Reads (GET) need a signed-in caller and show its teams only;",
        "the reviewer reads the task it reviews (`/api/board/tasks/{task_id}` and under",
        "it; MCP `get_task`, `read_handoff`, `list_tasks`), nothing else.",
        "",
        "",
        "A staff person acts on every team and as every agent; beyond their own teams and",
        "agents, each write needs the Django model permission in the *staff needs* column",
        "(the one the admin asks for the same change; a superuser holds them all). Without",
        "it they keep a member's powers, and reaching further is `403 forbidden` naming the",
        "permission, nothing written. Staff's reads are unchanged.",
        "",
        "People's rows, in the admin: anyone but a superuser changes the members of a team",
        "they already belong to, and of no other (`core.roles.may_change_members`; whoever",
        "makes a team names its first members), and changes, sets the password of or",
        "deletes only their own row and people who are not staff and wholly of their own",
        "teams (`core.roles.may_manage_person`). Only a superuser grants powers (staff and",
        "superuser flags, groups, permissions).",
        "",
        "| verb | " + " | ".join(_COLUMNS) + " | staff needs | what |",
        "|---|" + "---|" * len(_COLUMNS) + "---|---|",
    ]
    for verb in VERBS:
        marks = ["yes" if kind in verb.admits else "**never**" for kind in _COLUMNS]
        needs = f"`{verb.django_permission}`" if verb.django_permission else ""
        lines.append(f"| `{verb.name}` | " + " | ".join(marks) + f" | {needs} | {verb.says} |")
    lines += [
        "",
        "Body-borne people verbs: for the agent side, "
        + "; ".join(
            f"`{verb.name}` with "
            + ", ".join(
                f"`{field}`" if values is ANY else f"`{field}` {'/'.join(map(str, values))}"
                for field, values in verb.people_fields.items()
            )
            for verb in VERBS
            if verb.people_fields
        )
        + " is refused (`person_required`). Completing a task that is in review (REST",
        "`…/complete` or MCP `complete_task`) is approving it, and failing or blocking it",
        "(`…/fail`, a move to `blocked`, MCP `fail_task`) is turning it down: people only.",
        "",
        "A run's credential (minted for one run of one task) acts on that task only: "
        + ", ".join(f"`{v.name}`" for v in VERBS if v.run == "never")
        + " never (the executor claims, then starts the run); "
        + ", ".join(f"`{v.name}`" for v in VERBS if v.run == "subtasks")
        + " on its task and the subtasks split from it; every other write on a task,",
        "on its own task only -- not on another task its agent also holds (`403 forbidden`,",
        "nothing written).",
        "",
    ]
    return "\n".join(lines)
