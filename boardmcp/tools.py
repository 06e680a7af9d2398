"""The board's MCP tools: each a thin call into :mod:`board.store` (and the worktree
service for the handoff) under the caller's team scope (:mod:`boardmcp.credentials`).

A task the caller's teams do not hold answers exactly like one that does not exist.
Every refusal is a board refusal (:class:`core.errors.ClawbooError`) turned into a
tool error in one place (:meth:`BoardMcpServer.call_tool`): ``is_error`` with the
board's error body ``{"error": <code>, "detail": ..., "retryable": false, ...}``.
A lost claim race is ``conflict``: never retry it.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable
from contextvars import ContextVar
from typing import Annotated, Any, Literal, TypeVar

from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from board import checks, store
from board.access import (
    claimer,
    files_as,
    refuse_deciding_work_in_review,
    refuse_unjudged_done,
    refuse_unless_own_task,
)
from board.errors import ClaimConflict, TaskNotFound
from board.models import Task
from board.snapshot import route as route_of
from board.store import spend as spend_store
from board.store import tool_approvals
from boardmcp.credentials import Caller
from core import registry, repositories, roles
from core.api.access import act_as, act_as_assignee, refuse_another_agent
from core.checks import check_storable
from core.errors import ClawbooError, Forbidden, NotFound, ValidationFailed
from core.models import Repository
from worktrees import service as worktree_service

SERVER_NAME = "clawboo"
INSTRUCTIONS = (
    "The Clawboo task board of your team. Use it to see what your team is doing "
    "(list_tasks, get_task), to split your work (create_subtask), to leave notes for "
    "people and other agents (comment) and to say what waits on what (link_dependency). "
    "Tools that take task_id default to the task you were started for, if any. A tool "
    'error carries the board\'s code; "retryable": false means do not repeat the call.'
)
LIST_LIMIT = 200
# Codes a caller may usefully repeat later; every other refusal stands.
RETRYABLE = frozenset({"rate_limited"})
# Tools a runtime calls by its own protocol, not the model: arguments beyond the ones
# declared pass (a runtime's newer version may send more); every other tool refuses
# one it does not take, as the REST API refuses a body's unknown field.
OPEN_ARGUMENTS = frozenset({"permission_prompt"})

Status = Literal["backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"]
# The board's id shape (core.checks.ID_PATTERN, spelled for pydantic's regex engine,
# which has no \Z), checked before any query: a NUL reaching PostgreSQL would crash
# the tool instead of refusing it.
_ID_SHAPE = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
TaskId = Annotated[str, Field(min_length=1, max_length=128, pattern=_ID_SHAPE)]
# The agent a call acts as, where the caller may act as several (a person: their own
# agents; staff: any; a machine token: its bound ones): REST's ``agent_id``.
AgentId = Annotated[str, Field(min_length=1, max_length=128, pattern=_ID_SHAPE)]
AGENT = "agent"
Title = Annotated[str, Field(min_length=1, max_length=500)]
Text = Annotated[str, Field(max_length=20_000)]
# A task's scope: repository-relative path globs (board.scope checks each).
Touches = Annotated[list[Annotated[str, Field(min_length=1, max_length=256)]], Field(max_length=64)]


class Route(BaseModel):
    """Who may take a task: an agent of the team, a runtime, labels the agent carries."""

    agent: str | None = None
    runtime: str | None = None
    labels: list[str] | None = None


_F = TypeVar("_F", bound=Callable[..., Any])


class BoardMcpServer(MCPServer):
    """The SDK's server, with the board's refusals mapped to tool errors in one place.

    ``default_caller`` is the caller of a stdio process; over HTTP the caller comes
    with each request (:mod:`boardmcp.http`)."""

    def __init__(self, default_caller: Caller | None = None) -> None:
        super().__init__(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
        self.default_caller = default_caller

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            # A tool that is not there is a board refusal like any other (the SDK's
            # plain "Unknown tool: <name>" sent back whatever name came, a megabyte
            # too): its name is quoted cut, in the board's error body.
            tool = self._tool_manager.get_tool(name)
            if tool is None:
                raise NotFound(f"no tool {name!r}: tools/list names them")
            if name not in OPEN_ARGUMENTS:
                check_arguments(name, set(tool.parameters.get("properties", {})), arguments)
            # Text neither database stores (NUL, lone surrogates) is refused in any
            # argument, before a tool could hand it to a query.
            for key, value in (arguments or {}).items():
                check_storable(key, "arguments")
                check_storable(value, str(key))
            return await super().call_tool(name, arguments, context)
        except (ToolError, ClawbooError) as exc:
            body = refusal_body(exc)
            if body is None:
                raise
            return CallToolResult(
                content=[TextContent(type="text", text=json.dumps(body))],
                structured_content=body,
                is_error=True,
            )


def check_arguments(tool: str, declared: set[str], arguments: Any) -> None:
    """Refuse an argument ``tool`` does not take, naming it and the ones it does: a
    misspelt filter (``stauts``) must not answer an unfiltered list read as filtered."""
    for key in arguments if isinstance(arguments, dict) else ():
        if key not in declared:
            takes = ", ".join(sorted(declared)) or "none"
            raise ValidationFailed(
                str(key)[:60], f"is not an argument of {tool} (it takes: {takes})"
            )


def refusal_body(exc: BaseException) -> dict[str, Any] | None:
    """The board's error body for a tool failure, or None for a crash."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ClawbooError):
            body = cause.as_dict()
            break
        if isinstance(cause, ValidationError):
            error = cause.errors()[0]
            field = ".".join(str(part) for part in error["loc"]) or "arguments"
            body = {"error": "validation_error", "detail": f"{field}: {error['msg']}"}
            body["field"] = field
            break
        cause = cause.__cause__
    else:
        return None
    body["retryable"] = body["error"] in RETRYABLE
    if body["error"] == "conflict":
        body["detail"] += " (do not retry)"
    return body


# The caller of the call a governed tool is running (Caller.acting: narrowed for a
# staff person without the tool's model permission); caller_of answers it first.
_ACTING: ContextVar[Caller | None] = ContextVar("clawboo_mcp_acting", default=None)


def caller_of(ctx: Context) -> Caller:
    acting = _ACTING.get()
    if acting is not None:
        return acting
    server = ctx.mcp_server
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    caller = scope.get("clawboo.caller") if isinstance(scope, dict) else None
    if caller is None and isinstance(server, BoardMcpServer):
        caller = server.default_caller
    if caller is None:  # the HTTP app authenticates before any call gets here
        raise Forbidden("no credential")
    return caller


def board_call(fn: _F) -> _F:
    """A tool body runs in a worker thread: the thread's database connection is
    handled as Django handles a request's (stale ones closed before and after)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return run  # type: ignore[return-value]


# --- scope -------------------------------------------------------------------------


def _visible(caller: Caller, task_id: Any, field: str = "task_id") -> Task:
    if not isinstance(task_id, str):
        raise ValidationFailed(field, "must be a task id")
    task = store.find_task(task_id)
    if task is None:
        raise TaskNotFound(task_id)
    if not caller.sees(task.team_id):
        caller.refuse_withheld(f"task {task_id!r}")
        raise TaskNotFound(task_id)
    if caller.read_only and task.id != caller.task_id:
        # The reviewer reads the change it reviews, nothing else (GOVERNANCE §6).
        raise TaskNotFound(task_id)
    return task


def _task_id(caller: Caller, task_id: str | None) -> str:
    if task_id is not None:
        return task_id
    if caller.task_id is None:
        raise ValidationFailed("task_id", "required: this credential is bound to no task")
    return caller.task_id


def _acting_as(caller: Caller, named: str | None) -> str | None:
    """The agent a call acts as when it names ``named`` (a tool's ``agent``): one the
    caller may act as by REST's own rule (:func:`core.api.access.act_as`, which the
    ``agent_id`` of a claim asks) -- a person: their own agents (staff: any of a team
    they see); a machine token: its bound agents; a credential bound to one agent (its
    key, a run's, ``clawboo mcp --agent``): that agent only. Refused as REST refuses
    it: an unknown agent or one of a team the caller cannot see ``validation_error``,
    another person's or another agent ``forbidden``. Named none: the agent the
    credential is bound to, or None (a person, a machine token)."""
    if named is None or named == caller.agent_id:
        return caller.agent_id
    return str(act_as(caller, named, AGENT))


def _team(caller: Caller, team: str | None) -> str:
    """The team a create lands in: the caller's own, or one chosen within its scope."""
    if team is not None:
        if caller.teams is not None and team not in caller.teams:
            caller.refuse_withheld(f"team {team!r}")
            raise ValidationFailed("team", f"no team {team!r}")
        return team
    if caller.teams:
        return caller.teams[0]
    if caller.teams is not None:
        # A person of no team (or staff acting as a member) files nowhere by default.
        caller.refuse_withheld("a team of its own")
        raise ValidationFailed("team", "you belong to no team: name one you belong to")
    return registry.DEFAULT_TEAM


def _held(
    caller: Caller,
    task_id: str | None,
    ticket: str | None,
    *,
    settles: bool,
    agent: str | None = None,
) -> tuple[str, str, str]:
    """The task, the ticket to fence a write with and the agent holding it, when the
    caller acts as that agent (``agent``: the one it names, :func:`_acting_as`). A
    run may not settle its own task (``settles``): the executor does, after it."""
    tid = _task_id(caller, task_id)
    task = _visible(caller, tid)
    if settles and caller.run and tid == caller.task_id:
        raise Forbidden(
            f"task {tid!r} is settled by the executor when your run ends: finish the "
            "work and stop (to report a failure, say so and exit with an error)"
        )
    acting = _acting_as(caller, agent)
    if caller.agent_id is not None and task.assignee_agent_id is not None:
        # Another agent's task is refused as REST refuses it (act_as_assignee): 403,
        # never the claim conflict below -- retrying or re-claiming cannot change it.
        refuse_another_agent(caller.agent_id, task.assignee_agent_id)
    elif caller.agent_id is None:
        # A person (or a machine token) acts as the task's holder, as REST's heartbeat
        # and settles do: their own agent's (staff: any), else 403.
        act_as_assignee(caller, task)
    held_by = task.assignee_agent_id
    if held_by is None or (acting is not None and held_by != acting):
        who = "any agent" if acting is None else f"agent {acting!r}"
        raise ClaimConflict(
            f"task {tid!r} is not held by {who}; claim it first",
            reason="not-my-task",
            status=task.status,
        )
    if ticket is None:
        own = caller.ticket if tid == caller.task_id else None
        ticket = own or store.Ticket.for_task(task).encode()
    return tid, ticket, held_by


def _own(caller: Caller, task: Task, verb: str) -> Task:
    """``task``, if it is the caller's own (board.access.owns_task): the agent side
    comments on and links its own agents' tasks only."""
    refuse_unless_own_task(caller.principal, task, caller.own_agents, _run(caller), verb)
    return task


def _run(caller: Caller) -> str | None:
    """The task a run's credential was minted for (None: any other caller, the stdio
    one bound to a task included)."""
    return caller.task_id if caller.run else None


def _settled(outcome: store.WriteOutcome) -> dict[str, Any]:
    return {"outcome": outcome.outcome, "task": _brief(outcome.raise_if_declined())}


# --- rendering -----------------------------------------------------------------------


def _brief(task: Task, depends_on: list[str] | None = None) -> dict[str, Any]:
    """The few fields an agent needs to pick a task out of a list."""
    body = {
        "id": task.id,
        "title": task.title,
        "status": task.status,
        "priority": task.priority,
        "labels": task.labels,
        "assignee_agent_id": task.assignee_agent_id,
        "parent_task_id": task.parent_task_id,
        # Work an agent files waits for a person: say so, rather than look ready.
        "approval": task.approval,
        "route": route_of(task),
        # What the task says it changes (globs), or null.
        "touches": task.touches,
    }
    if depends_on is not None:
        body["depends_on"] = depends_on
    return body


# --- the tools -----------------------------------------------------------------------

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


@board_call
def list_tasks(
    ctx: Context,
    status: Status | None = None,
    ready: bool = False,
    label: str | None = None,
    parent_task_id: TaskId | None = None,
    assignee: str | None = None,
    limit: Annotated[int, Field(ge=1, le=LIST_LIMIT)] = 50,
) -> dict[str, Any]:
    """List your team's tasks, highest priority first. Use it to see what is being
    worked on, what is ready to claim (ready=true: todo with every dependency done)
    or what a task was split into (parent_task_id)."""
    caller = caller_of(ctx)
    qs = store.list_tasks(
        team=None if caller.teams is None else list(caller.teams),
        status=status,
        assignee=assignee,
        label=label,
        parent=parent_task_id,
        ready=ready,
    )
    if caller.read_only:
        qs = qs.filter(pk=caller.task_id)  # the reviewer's list is the task it reviews
    tasks = list(qs[: limit + 1])
    deps = store.depends_on_map([t.id for t in tasks[:limit]])
    return {
        "tasks": [_brief(t, deps[t.id]) for t in tasks[:limit]],
        "truncated": len(tasks) > limit,
    }


@board_call
def get_task(ctx: Context, task_id: TaskId | None = None) -> dict[str, Any]:
    """One task in full: description, status, its dependencies, subtasks, comments and
    verification verdict. Defaults to the task you were started for."""
    caller = caller_of(ctx)
    task = _visible(caller, _task_id(caller, task_id))
    subtasks = list(store.list_tasks(parent=task.id))
    return {
        "task": task.as_dict(depends_on=store.depends_on_ids(task.id)),
        "subtasks": [_brief(t) for t in subtasks],
        "comments": [c.as_dict() for c in store.list_comments(task.id)],
    }


def _create(
    caller: Caller,
    *,
    title: str,
    description: str,
    priority: int,
    labels: list[str] | None,
    depends_on: list[str] | None,
    status: str,
    parent: Task | None,
    team: str | None,
    repository: str | None,
    route: Route | None = None,
    touches: list[str] | None = None,
    agent: str | None = None,
) -> dict[str, Any]:
    # First, as REST asks ``created_by_agent_id``: an agent the caller may not act as.
    named = None if agent is None else _acting_as(caller, agent)
    # Checked (and capped) before each is looked up: a repeated id is one lookup.
    for dep in checks.check_id_list(depends_on, "depends_on"):
        _visible(caller, dep, "depends_on")
    team_id = parent.team_id if parent is not None else _team(caller, team)
    created = store.create_task(
        title=title,
        description=description,
        # The agent side files work as one of its agents: the board's ceilings and
        # rate limit apply, and it waits for a person's approval (a machine token
        # too: its one agent, or the one it names). A person files as nobody unless
        # they name one of their agents.
        created_by_agent_id=files_as(
            caller.principal, caller.own_agents, team_id, named, field=AGENT
        ),
        team=team_id,
        priority=priority,
        labels=labels,
        depends_on=depends_on,
        status=status,
        parent_task_id=parent.id if parent is not None else None,
        # By id only: a path is never taken from an agent.
        repository=repository,
        route=None if route is None else route.model_dump(),
        touches=touches,
        # Its subtask is listed to a run of its parent: as its comment, it counts.
        agent_side=caller.principal.agent_side,
        # Its filer was read from the registry: the credential's agent, or one act_as found.
        registered=True,
    )
    return {"task": _brief(created.task, store.depends_on_ids(created.task.id))}


@board_call
def create_task(
    ctx: Context,
    title: Title,
    description: Text = "",
    priority: int = 0,
    labels: list[str] | None = None,
    depends_on: list[TaskId] | None = None,
    status: Literal["todo", "backlog"] = "todo",
    team: str | None = None,
    repository: TaskId | None = None,
    route: Route | None = None,
    touches: Touches | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """File a new top-level task for your team (a separate piece of work, not part of
    yours; for that use create_subtask). Rate limited for agents. repository: the id of
    one of your team's registered repositories the task's worktree is made in. route: who may
    take it (an agent id of your team, a runtime, labels the agent must carry). touches: the
    repository paths (globs: src/**, docs/*.md) the task will change; no agent starts it
    while overlapping work in that repository is in progress or waiting to land. agent:
    the agent that files it (a person's key: one of your own; it then waits for approval
    as an agent's work does)."""
    caller = caller_of(ctx)
    return _create(
        caller,
        title=title,
        description=description,
        priority=priority,
        labels=labels,
        depends_on=depends_on,
        status=status,
        parent=None,
        team=team,
        repository=repository,
        route=route,
        touches=touches,
        agent=agent,
    )


@board_call
def create_subtask(
    ctx: Context,
    title: Title,
    description: Text = "",
    parent_task_id: TaskId | None = None,
    priority: int = 0,
    labels: list[str] | None = None,
    depends_on: list[TaskId] | None = None,
    status: Literal["todo", "backlog"] = "todo",
    repository: TaskId | None = None,
    route: Route | None = None,
    touches: Touches | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Split work into a child task of parent_task_id (default: your task; one of your
    own: assigned to, held or filed by you), which your team's agents can then claim.
    Depth and per-parent child limits apply. It works in the parent's repository unless
    repository names another of your team's. route: who may take it (an agent id of your
    team, a runtime, labels the agent must carry). touches: the repository paths (globs)
    it will change, as for create_task. agent: the agent that files it, as for
    create_task."""
    caller = caller_of(ctx)
    parent = _visible(caller, _task_id(caller, parent_task_id), "parent_task_id")
    # A subtask spends its parent's tree (child limit, cap budget): under your own tasks.
    _own(caller, parent, "file a subtask under")
    return _create(
        caller,
        title=title,
        description=description,
        priority=priority,
        labels=labels,
        depends_on=depends_on,
        status=status,
        parent=parent,
        team=None,
        repository=repository,
        route=route,
        touches=touches,
        agent=agent,
    )


@board_call
def comment(
    ctx: Context,
    body: Annotated[str, Field(min_length=1, max_length=20_000)],
    task_id: TaskId | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Leave a note on a task (default: your task) for people and other agents:
    progress, a question, a finding. Signed with your name (agent: signed as that
    agent, one of your own -- REST's ``author``). Only on your own tasks: one assigned
    to you, held by you, or filed by you (your subtasks)."""
    caller = caller_of(ctx)
    task = _own(caller, _visible(caller, _task_id(caller, task_id)), "comment on")
    # As REST's ``author``: naming who you sign as already is no act as another.
    named = None if agent in (None, caller.signs_as) else _acting_as(caller, agent)
    author = named or caller.signs_as
    said = store.add_comment(task.id, body, author, agent_side=caller.principal.agent_side)
    return {"comment": said.as_dict()}


@board_call
def link_dependency(ctx: Context, task_id: TaskId, depends_on: TaskId) -> dict[str, Any]:
    """Say that task_id cannot start until depends_on is done (refused if it would
    make a cycle). task_id is one of your own tasks: assigned to you, held by you, or
    filed by you (your subtasks); depends_on any task of your team."""
    caller = caller_of(ctx)
    # The rule is the waiting task's (task_id); depends_on is any of the team's.
    task = _own(caller, _visible(caller, task_id), "add a dependency to")
    _visible(caller, depends_on, "depends_on")
    created = store.link(task.id, depends_on)
    return {
        "created": created,
        "task": _brief(store.get_task(task.id), store.depends_on_ids(task.id)),
    }


@board_call
def claim_task(
    ctx: Context, task_id: TaskId | None = None, agent: AgentId | None = None
) -> dict[str, Any]:
    """Take a ready task to work on: task_id, or the next ready one of your team.
    A conflict means someone else has it or it is not ready: do not retry it.
    agent: the agent that claims -- required with a person's key (one of your own
    agents; staff: any), optional with an agent's (its own only)."""
    caller = caller_of(ctx)
    if task_id is not None:
        _visible(caller, task_id)
    acting = _acting_as(caller, agent)
    if acting is None:
        # As REST's claim: a machine token's one agent, else name one (400).
        acting = act_as(caller, claimer(caller, None, AGENT), AGENT)
    agent_row = registry.get_agent(acting)
    if task_id is not None:
        result = store.claim(task_id, agent_row.id, agent_row.runtime, registered=True)
        result.raise_for_outcome(task_id)
    else:
        found = store.claim_next(
            agent_row.id, runtime=agent_row.runtime, team=agent_row.team_id, registered=True
        )
        if found is None:
            return {"task": None, "ticket": None}
        result = found.raise_for_outcome("")
    assert result.task is not None
    return {"task": _brief(result.task), "ticket": result.ticket}


@board_call
def heartbeat(
    ctx: Context,
    task_id: TaskId | None = None,
    ticket: str | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Renew your lease on a task you hold (default: your task), so it is not taken
    back as stale during long work. agent: the holder you act as (a person's key: one
    of your own agents, else the task's holder if it is yours)."""
    caller = caller_of(ctx)
    tid, fence, _holder = _held(caller, task_id, ticket, settles=False, agent=agent)
    task = store.renew_lease(tid, fence).raise_if_declined()
    assert task.lease_until is not None
    return {"lease_until": task.lease_until.isoformat()}


@board_call
def complete_task(
    ctx: Context,
    task_id: TaskId | None = None,
    output: dict[str, Any] | str | None = None,
    ticket: str | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Mark a task you hold done, with its output. Not for the task an executor run
    was started for: the executor settles that one when you stop. agent: the holder
    you act as, as for heartbeat."""
    caller = caller_of(ctx)
    task = _visible(caller, _task_id(caller, task_id))
    refuse_deciding_work_in_review(caller.principal, task, "mcp complete_task")
    tid, fence, _holder = _held(caller, task_id, ticket, settles=True, agent=agent)
    refuse_unjudged_done(caller.principal, task)
    return _settled(store.complete(tid, output, ticket=fence, if_allowed=True))


@board_call
def fail_task(
    ctx: Context,
    error: Text,
    task_id: TaskId | None = None,
    ticket: str | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Give up on a task you hold, saying why: it goes back to the queue while attempts
    remain, else it is blocked for a person. agent: the holder you act as, as for
    heartbeat."""
    caller = caller_of(ctx)
    task = _visible(caller, _task_id(caller, task_id))
    refuse_deciding_work_in_review(caller.principal, task, "mcp fail_task")
    tid, fence, _holder = _held(caller, task_id, ticket, settles=True, agent=agent)
    return _settled(store.fail(tid, error, ticket=fence, if_allowed=True))


@board_call
def request_review(
    ctx: Context,
    task_id: TaskId | None = None,
    ticket: str | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Hand a task you hold to a person for review (in_progress → in_review). agent:
    the holder you act as, as for heartbeat."""
    caller = caller_of(ctx)
    tid, fence, _holder = _held(caller, task_id, ticket, settles=True, agent=agent)
    refuse_unjudged_done(caller.principal, _visible(caller, tid), "move to review")
    return _settled(store.await_review(tid, ticket=fence, if_allowed=True))


@board_call
def read_handoff(ctx: Context, task_id: TaskId | None = None) -> dict[str, Any]:
    """The task's AGENT_HANDOFF.json (what is done, broken, next), as the last runtime
    on it left it; null when there is none."""
    caller = caller_of(ctx)
    task = _visible(caller, _task_id(caller, task_id))
    return {"handoff": worktree_service.show_handoff(task.id)}


@board_call
def write_handoff(
    ctx: Context,
    handoff: dict[str, Any],
    task_id: TaskId | None = None,
    agent: AgentId | None = None,
) -> dict[str, Any]:
    """Write the task's AGENT_HANDOFF.json for whoever resumes it: completedSubtasks,
    brokenOrUnverified, nextBestStep (runtime, handoffFrom and timestamp are filled in
    when left out). Only for a task you hold. agent: the holder you act as, as for
    heartbeat."""
    caller = caller_of(ctx)
    tid, _fence, holder = _held(caller, task_id, None, settles=False, agent=agent)
    held_by = registry.get_agent(holder)
    doc = {
        "runtime": held_by.runtime,
        "handoffFrom": held_by.display_name,
        "timestamp": dt.datetime.now(dt.UTC).isoformat(),
        **handoff,
    }
    return {"handoff": worktree_service.write_handoff(tid, doc)}


@board_call
def get_repository(ctx: Context, repository_id: str) -> dict[str, Any]:
    """A repository of your team: its path, base branch, verify command, how approved
    work lands (landing_mode) and its forge (kind, API, owner/name, merge method,
    required checks; the token and webhook secret are never shown)."""
    caller = caller_of(ctx)
    repo = Repository.objects.filter(pk=repository_id).first()
    if repo is None or (caller.teams is not None and repo.team_id not in caller.teams):
        raise NotFound(f"repository {repository_id!r} does not exist")
    return {"repository": repositories.as_dict(repo)}


@board_call
def spend(ctx: Context, task_id: TaskId | None = None) -> dict[str, Any]:
    """What your team has spent against its budgets (each with spent_cents and
    status: active, soft_capped or paused -- a paused cap claims nothing more), and
    what a task and its subtasks cost so far (defaults to the task you were started
    for). Use it before splitting off more work."""
    caller = caller_of(ctx)
    at = store.now()
    teams = None if caller.teams is None else list(caller.teams)
    body: dict[str, Any] = {
        "budgets": [b.as_dict(at) for b in spend_store.list_budgets(teams)],
        "task": None,
    }
    wanted = task_id if task_id is not None else caller.task_id
    if wanted is not None:
        task = _visible(caller, wanted)
        body["task"] = {
            "id": task.id,
            "max_run_cents": task.max_run_cents,
            **task.as_dict()["cost"],
        }
    return body


def decide_approval(
    ctx: Context,
    task_id: TaskId,
    decision: Literal["approve", "deny"],
    reason: Annotated[str, Field(max_length=2_000)] | None = None,
    revision: Annotated[int, Field(ge=0)] | None = None,
) -> dict[str, Any]:
    """A person's yes or no to a task that waits for approval before any agent takes
    it. People only: an agent's credential is refused (forbidden). revision: the
    task's revision you read (get_task); refused if it changed since -- what you
    decide on is what you saw."""
    caller = caller_of(ctx)
    roles.refuse_agent_side(caller.principal, "mcp decide_approval")
    task = _visible(caller, task_id)
    decided = store.decide_approval(
        task.id, decision, by=caller.name, reason=reason, revision=revision
    )
    return {"task": _brief(decided), "approval": decided.approval}


# The tool Claude Code asks when its permission mode does not allow a call
# (``--permission-prompt-tool mcp__<server>__permission_prompt``; executor.runtimes.
# claude_code). Its contract (2.1.332): called with {tool_name, input, tool_use_id};
# answers one JSON text, {"behavior": "allow", "updatedInput": {...}} or
# {"behavior": "deny", "message": "..."}.
PERMISSION_PROMPT_TOOL = "permission_prompt"


@board_call
def permission_prompt(
    ctx: Context,
    tool_name: Annotated[str, Field(min_length=1, max_length=255)],
    input: dict[str, Any] | None = None,  # noqa: A002 - the runtime's own argument name
    tool_use_id: str | None = None,
) -> dict[str, Any]:
    """Asked by the runtime, not by the model: a tool call your permission mode does
    not allow waits for a person of your team, who allows it or not. No answer in
    time is a no."""
    caller = caller_of(ctx)
    if not caller.run or caller.agent_id is None or caller.task_id is None:
        raise Forbidden("only a run's own credential asks for a tool call's approval")
    arguments = input or {}
    pending = store.ask_tool_call(
        caller.task_id, caller.agent_id, tool_name, arguments, tool_use_id or ""
    )
    if pending is None:  # allow_always holds for this agent and tool
        return {"behavior": "allow", "updatedInput": arguments}
    answer = store.wait_tool_call(pending.id)
    if answer.state == "allowed":
        return {"behavior": "allow", "updatedInput": arguments}
    if answer.state == "denied" and answer.decided_by == tool_approvals.SERVER:
        message = f"denied running {tool_name} (approval {answer.id}): {tool_approvals.TOO_LONG}"
    elif answer.state == "denied":
        message = f"{answer.decided_by} denied running {tool_name} (approval {answer.id})"
    else:
        message = f"nobody approved running {tool_name} in time (approval {answer.id}): denied"
    return {"behavior": "deny", "message": message}


TOOLS: tuple[tuple[Callable[..., Any], ToolAnnotations], ...] = (
    (list_tasks, READ),
    (get_task, READ),
    (create_task, WRITE),
    (create_subtask, WRITE),
    (comment, WRITE),
    (link_dependency, WRITE),
    (claim_task, WRITE),
    (heartbeat, WRITE),
    (complete_task, WRITE),
    (fail_task, WRITE),
    (request_review, WRITE),
    (read_handoff, READ),
    (get_repository, READ),
    (write_handoff, WRITE),
    (spend, READ),
    (decide_approval, WRITE),
    (permission_prompt, WRITE),
)


def governed(fn: _F) -> _F:
    """Every tool goes through the roles table (core.roles) before its body runs:
    ``mcp <tool>`` names who may call it; a tool the table does not name is refused."""
    verb = f"mcp {fn.__name__}"

    @functools.wraps(fn)
    def run(ctx: Context, *args: Any, **kwargs: Any) -> Any:
        caller = caller_of(ctx)
        roles.check(caller.principal, verb)
        # A run's credential acts on its own run's task only: asked with the table,
        # before any state of the task is read, as the REST door asks it
        # (core.api.permissions) -- so both doors answer the same refusal first.
        roles.check_run_scope(caller.principal, verb, _run(caller), kwargs.get("task_id"))
        bound = _ACTING.set(caller.acting(verb))
        # REST's rules this door asks (core.api.access.act_as) read staff's powers
        # from the user, as the REST door binds them for its request.
        roles.bind_staff_power(caller.user, verb if caller.kind == "person" else None)
        try:
            return fn(ctx, *args, **kwargs)
        finally:
            roles.bind_staff_power(caller.user, None)
            _ACTING.reset(bound)

    return run  # type: ignore[return-value]


def build_server(default_caller: Caller | None = None) -> BoardMcpServer:
    server = BoardMcpServer(default_caller)
    for fn, hints in TOOLS:
        server.add_tool(governed(fn), annotations=hints, structured_output=False)
    return server
