"""Which tasks a user sees: those of the teams they belong to (staff: all)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from board.errors import TaskNotFound
from board.models import Task
from board.transitions import Status
from core.api.access import act_as_assignee, can_see_team
from core.api.auth import bound_agent, bound_agents, run_task
from core.checks import ID_PATTERN
from core.errors import Forbidden, ValidationFailed
from core.registry import agent_scope
from core.roles import Principal, principal_of, refuse_withheld, run_scope_refusal


def visible_task(user: Any, task_id: str) -> Task:
    """The task, or 404 when it does not exist *or* belongs to a team the user cannot see."""
    task = Task.objects.filter(pk=task_id).first()
    if task is None:
        raise TaskNotFound(task_id)
    if not can_see_team(user, task.team_id):
        refuse_withheld(user, f"task {task_id!r}")
        raise TaskNotFound(task_id)
    return task


def audited_override(request: Any, value: Any) -> Any:
    """A human override is recorded as the authenticated user's (audit): ``by`` may
    be left out, and if given must name that user."""
    if not isinstance(value, dict):
        return value  # the data layer names what is wrong
    who = request.user.get_username()
    given = value.get("by")
    if given is not None and given != who:
        raise ValidationFailed(
            "human_override.by", f"is the authenticated user ({who!r}); leave it out"
        )
    return {**value, "by": who}


def refuse_settling_its_own_run(run_task: str | None, task_id: str) -> None:
    """A run's credential never settles the task it was started for (complete, fail,
    release, a move): the executor does when the run ends, after its judge. The MCP
    tools say so too (boardmcp.tools); this is the REST door's half."""
    if run_task is not None and run_task == task_id:
        raise Forbidden(
            f"task {task_id!r} is settled by the executor when your run ends: finish the "
            "work and stop (to report a failure, say so and exit with an error)"
        )


def refuse_deciding_work_in_review(principal: Principal, task: Task, verb: str) -> None:
    """Work in review waits for a person (GOVERNANCE §6): completing it is approving
    it, failing or blocking it is turning it down -- and a hard fail cancels what
    waits on it. The agent side does none of these, for its own agents' work too
    (``403 person_required``, nothing written). REST (complete, fail, a move to
    blocked) and MCP (``complete_task``, ``fail_task``) ask here."""
    if task.status == Status.IN_REVIEW:
        from core.roles import refuse_agent_side

        refuse_agent_side(principal, f"{verb} on a task in review")


def refuse_unjudged_done(principal: Principal, task: Task, move: str = "complete") -> None:
    """GOVERNANCE §4, §6: the judge's side stays with the server. File-mutating work
    the server can judge -- pushed to a registered repository's remote, or made in
    the server's own checkout of the task -- reaches review and done through the
    server's judge (``POST …/submit``: judged, then review), never by its builder's
    own complete, move to review or worktree completion (``move`` names which, for
    the refusal): the agent side is refused (403, nothing written); a person may
    still settle it. Work the server cannot see (no checkout here, no remote to
    fetch it from) lands nothing, and is settled as any other task."""
    if not (principal.agent_side and task.status == Status.IN_PROGRESS):
        return
    if not server_judges(task):
        return
    raise Forbidden(
        f"{principal.describe()} may not {move} task {task.id!r}: hand its work in with "
        f"POST /api/board/tasks/{task.id}/submit (the ticket alone for work in the "
        "server's checkout; with branch and commit for a pushed branch), and the server "
        "judges it"
    )


def server_judges(task: Task) -> bool:
    """Whether the agent side's work on ``task`` is handed in to the server's judge:
    file-mutating work of a registered repository with a remote (a remote worker's
    pushed branch), or in the task's checkout on the server."""
    from board.repository import judged_on_server
    from board.store import live_workspace

    return judged_on_server(task) or (task.file_mutating and live_workspace(task.id) is not None)


def agent_side_holds(request: Any, task: Task) -> None:
    """The agent side works in a task's worktree only as the agent holding the task
    (GOVERNANCE §6: its own agents' tasks only): a task no agent holds, or one
    another agent holds, is refused (403) before anything is written. A person is
    held to the endpoint's own rule (a member of the task's team)."""
    if not principal_of(request.user, getattr(request, "auth", None)).agent_side:
        return
    if task.assignee_agent_id is None or task.status != Status.IN_PROGRESS:
        raise Forbidden(f"task {task.id!r} is held by no agent of yours: claim it first")
    act_as_assignee(request, task)


def owns_task(principal: Principal, task: Task, agents: Collection[str], run: str | None) -> bool:
    """GOVERNANCE §6: the agent side comments on, and makes wait, its own agents'
    tasks only. A task is its own when one of ``agents`` (the agent its key or run
    credential is bound to; a machine token's bound agents) is assigned to it or
    holds it (``assignee_agent_id``), or filed it (``created_by_agent_id``:
    delegation, an agent links and comments on the subtasks it filed). A run's
    credential (``run``: the task it was started for) is narrower
    (core.roles.check_run_scope):
    its own task and the subtasks split from it, whatever else its agent holds; the
    reviewer's, the task it reviews, nothing else. A person is held to the
    endpoint's own rule, so this answers True for one."""
    if not principal.agent_side:
        return True
    if principal.kind == "reviewer":
        return run is not None and task.id == run
    if run is not None:
        return task.id == run or task.parent_task_id == run
    return task.assignee_agent_id in agents or task.created_by_agent_id in agents


def refuse_unless_own_task(
    principal: Principal,
    task: Task,
    agents: Collection[str],
    run: str | None,
    verb: str,
) -> None:
    """:func:`owns_task`, or ``403 forbidden`` (as a worktree operation on a task the
    caller's agent does not hold), checked before the body is read: nothing is
    written. REST (:func:`agent_side_owns`) and MCP (boardmcp.tools) both call it."""
    if owns_task(principal, task, agents, run):
        return
    if run is not None and principal.kind != "reviewer":
        raise run_scope_refusal(principal, verb, run, task.id, on="")
    raise Forbidden(
        f"{principal.describe()} may not {verb} task {task.id!r}: it is not assigned "
        "to, held by or filed by an agent of yours (GOVERNANCE §6: its own agents' "
        "tasks only)"
    )


def files_as(
    principal: Principal,
    agents: Collection[str],
    team: str,
    named: Any = None,
    field: str = "created_by_agent_id",
) -> Any:
    """The agent a create is filed as (GOVERNANCE §5, §6: the agent side's work is
    delegation, and waits for a person's approval): ``named`` (REST's
    ``created_by_agent_id``, MCP's ``agent``: ``field``; the caller's right to act as
    it is :func:`core.api.access.act_as`'s), else, for the agent side, the one agent
    of ``agents`` -- the agent its key or run credential is bound to, or a machine
    token's only bound agent. A machine token of several agents names one. A person
    files as nobody unless it names an agent. REST and MCP both ask here, so no door
    of the agent side files work that skips approval.

    The agent is one of ``team``'s (the task's team): a machine token bound to agents
    of two teams, or a person owning agents in both, files one team's work as that
    team's agent, never as the other's (400 naming the field)."""
    if named is not None or not principal.agent_side:
        agent = named
    elif len(agents) != 1:
        raise ValidationFailed(
            field, "name the agent this machine token of several agents files the task as"
        )
    else:
        agent = next(iter(agents))
    scope = agent_scope(agent) if isinstance(agent, str) and ID_PATTERN.match(agent) else None
    if scope is not None and scope[0] != team:
        raise ValidationFailed(
            field,
            f"agent {agent!r} is of team {scope[0]!r}: a task of team {team!r} is filed "
            "as an agent of its own team",
        )
    return agent


def caller_agents(auth: Any) -> frozenset[str]:
    """The agents a request's credential acts for: the one its key or run credential
    is bound to, or a machine token's bound agents (none: a person's)."""
    bound = bound_agent(auth)
    return frozenset({bound}) if bound is not None else (bound_agents(auth) or frozenset())


def claimer(request: Any, named: Any, field: str = "agent_id") -> Any:
    """The agent a claim is for: the one named, else the one agent the caller's
    credential acts as (an agent's key knows its agent); 400 when it acts as none
    or several. REST (``…/claim``, ``claim-next``: ``agent_id``) and MCP
    (``claim_task``: ``agent``) ask here; the caller's right to act as it is
    :func:`core.api.access.act_as`'s, asked after."""
    if named is not None:
        return named
    agents = caller_agents(getattr(request, "auth", None))
    if len(agents) != 1:
        raise ValidationFailed(
            field,
            "is required: name the agent that claims (this credential acts as "
            + ("no one agent)" if not agents else f"{len(agents)} agents)"),
        )
    return next(iter(agents))


def agent_side_owns(request: Any, task: Task, verb: str) -> None:
    """The REST door's :func:`refuse_unless_own_task`: the caller's agents are the
    one its key or run credential is bound to, or a machine token's bound agents."""
    auth = getattr(request, "auth", None)
    principal = principal_of(request.user, auth)
    refuse_unless_own_task(principal, task, caller_agents(auth), run_task(auth), verb)
