"""Who sees what, and who may act as whom.

A user sees and writes only the teams they belong to; staff see all, and write
beyond their own teams with the model permission the roles table names for the
write (core.roles.staff_power; without it: a member's powers, and a refusal naming
the permission where a member would meet "not found"). What the caller cannot see
answers exactly as what does not exist (no existence oracle).
Acting as an agent (claim, heartbeat, settle, be assigned, create as it) needs its
owner's credential or staff; a token bound to one agent acts as that agent only.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models import Model, QuerySet

from core.api.auth import bound_agent, bound_agents
from core.checks import ID_PATTERN
from core.errors import ClawbooError, Forbidden, NotFound, ValidationFailed
from core.models import Agent, Team
from core.registry import agent_scope, member_team_ids
from core.roles import agent_team, bind_staff_power, principal_of, refuse_withheld, staff_power


def team_ids(user: Any) -> list[str] | None:
    """The user's team ids, or None for staff (every team). Through an agent's key or
    a run's credential: that agent's team only, whoever its owner is (staff too)."""
    bound = agent_team(user)
    if bound is not None:
        staff = user.is_staff or user.is_superuser
        return [bound] if staff or bound in member_team_ids(user) else []
    if staff_power(user):
        return None
    return member_team_ids(user)


def can_see_team(user: Any, team_id: str) -> bool:
    teams = team_ids(user)
    return teams is None or team_id in teams


M = TypeVar("M", bound=Model)


def scoped(user: Any, qs: QuerySet[M], field: str = "team_id") -> QuerySet[M]:
    """``qs`` cut to the rows of the user's teams (staff: all of them)."""
    teams = team_ids(user)
    return qs if teams is None else qs.filter(**{f"{field}__in": teams})


def visible(user: Any, qs: QuerySet[M], pk: Any, what: str, field: str = "team_id") -> M:
    """Row ``pk`` of ``qs``, or 404 when it does not exist *or* belongs to a team the
    user cannot see: the same answer for both."""
    row = scoped(user, qs, field).filter(pk=pk).first()
    if row is None:
        if qs.filter(pk=pk).exists():
            refuse_withheld(user, f"{what} {pk!r}")
        raise NotFound(f"{what} {pk!r} does not exist")
    return row


def visible_teams(user: Any) -> QuerySet[Team]:
    return scoped(user, Team.objects.order_by("id"), "pk")


def visible_team(user: Any, team_id: str) -> Team:
    return visible(user, Team.objects.all(), team_id, "team", field="pk")


def visible_agent(user: Any, agent_id: str) -> Agent:
    return visible(user, Agent.objects.select_related("owner"), agent_id, "agent")


def require_team(user: Any, team_id: Any, field: str = "team") -> str:
    """The team, if it exists and the user belongs to it; a team the user is not in
    is refused exactly like one that does not exist (400 naming the field)."""
    if (
        not isinstance(team_id, str)
        or not ID_PATTERN.match(team_id)
        or not Team.objects.filter(pk=team_id).exists()
    ):
        raise ValidationFailed(field, f"no team {team_id!r}")
    if not can_see_team(user, team_id):
        refuse_withheld(user, f"team {team_id!r}")
        raise ValidationFailed(field, f"no team {team_id!r}")
    return team_id


def refuse_another_agent(bound: str, agent_id: str, field: str = "agent_id") -> None:
    """A credential bound to one agent (its key, a run's credential, ``clawboo mcp
    --agent``) acts as that agent only: acting as -- or on the held task of -- another
    agent of its team is ``403 forbidden``, the one refusal REST (:func:`act_as`) and
    the MCP tools (boardmcp.tools) both raise here."""
    if bound != agent_id:
        raise Forbidden(f"this token acts as agent {bound!r} only, not {agent_id!r}", field=field)


def act_as(
    request: Any, agent_id: Any, field: str = "agent_id", *, scope: tuple[str, Any] | None = None
) -> str:
    """The agent id, if the request may act as it.

    An unknown agent, or one of a team the caller cannot see: 400 (the same answer).
    Seen but not the caller's (not its owner, not staff), or not the one agent the
    caller's token is bound to: 403. Checked before anything is written. ``scope``:
    the agent's (team, owner id) where the caller has read the agent already.
    """
    user = request.user
    if scope is None and isinstance(agent_id, str) and ID_PATTERN.match(agent_id):
        scope = agent_scope(agent_id)
    if scope is not None and not can_see_team(user, scope[0]):
        refuse_withheld(user, f"agent {agent_id!r}")
    if scope is None or not can_see_team(user, scope[0]):
        raise ValidationFailed(field, f"no agent {agent_id!r} in the registry")
    # A plain Django request (a page, the admin) carries no API credential.
    bound = bound_agent(getattr(request, "auth", None))
    if bound is not None:
        refuse_another_agent(bound, agent_id, field)
    machine = bound_agents(getattr(request, "auth", None))
    if machine is not None:
        # Staff minted the machine token for these agents: that is its authority.
        if agent_id not in machine:
            raise Forbidden(f"this machine token may not act as agent {agent_id!r}", field=field)
        return agent_id
    if not staff_power(user) and scope[1] != user.pk:
        refuse_withheld(user, f"agent {agent_id!r} (another user's)")
        raise Forbidden(
            f"you may not act as agent {agent_id!r}: it belongs to another user", field=field
        )
    return agent_id


def act_as_assignee(request: Any, task: Any) -> None:
    """Heartbeats and settles act as the task's assignee: its owner's credential or
    staff (and a bound token only for that agent). A task held by an agent the
    caller cannot see or that is not registered: staff only. Unassigned: no check."""
    assignee = task.assignee_agent_id
    if assignee is None:
        return
    user = request.user
    scope = agent_scope(assignee)
    if scope is None or not can_see_team(user, scope[0]):
        bound = bound_agent(getattr(request, "auth", None))
        if staff_power(user) and bound in (None, assignee):
            return
        refuse_withheld(user, f"task {task.id!r}")
        raise Forbidden(
            f"task {task.id!r} is held by agent {assignee!r}, which you may not act as",
            field="agent_id",
        )
    act_as(request, assignee, "agent_id")


# Editing an agent, as the roles table names it: resuming one asks the same
# (GOVERNANCE §6, "resume an agent; edit an agent ... owner or staff").
EDIT_AGENT = "PATCH /api/agents/{agent_id}"


def govern_agent(request: Any, agent_id: str) -> Agent:
    """The agent, if the request may edit it or resume it: the one rule for both
    (REST ``PATCH /api/agents/{id}`` and ``…/resume``, the admin's resume action, the
    board's Resume button through :func:`may_govern_agent`). Its owner with their own
    credential, or staff (beyond their own agents with the model permission the roles
    table names); a member of its team who is neither: ``403 forbidden``; an agent
    the caller cannot see: 404. Checked before anything is written."""
    agent = visible_agent(request.user, agent_id)
    act_as(request, agent_id, "id")  # only its owner (or staff) changes an agent
    return agent


def may_govern_agent(request: Any, agent: Agent) -> bool:
    """For a read (the agents list the board's Agents panel shows, each ``agent`` one
    the caller sees): whether :func:`govern_agent` would admit this caller for it,
    asked as an edit of it would be (staff's powers bound for :data:`EDIT_AGENT`,
    then unbound as a read leaves them), from the row already read -- no query an
    agent. The agent side never governs (GOVERNANCE §6)."""
    user = request.user
    if principal_of(user, getattr(request, "auth", None)).agent_side:
        return False
    bind_staff_power(user, EDIT_AGENT)
    try:
        act_as(request, agent.id, "id", scope=(agent.team_id, agent.owner_id))
    except ClawbooError:
        return False
    finally:
        bind_staff_power(user, None)
    return True


def acting_name(request: Any) -> str:
    """Who the audit names for a request (an event's actor, a comment's or a chat
    message's author): the authenticated user -- or, through an agent's key or a
    run's credential, that agent. Those authenticate as the agent's owner, but what
    they write is the agent's, never signed with the person's name (GOVERNANCE §6)."""
    bound = bound_agent(getattr(request, "auth", None))
    return bound if bound is not None else str(request.user.get_username())


def require_person(request: Any, what: str = "decide an approval") -> str:
    """The authenticated user's name, if the request comes from a person with their
    own credential: the agent side (an agent's key, a run's credential, a machine
    token) never decides for a person (``403 person_required``, GOVERNANCE §6)."""
    from core.roles import principal_of, refuse_agent_side

    refuse_agent_side(principal_of(request.user, getattr(request, "auth", None)), what)
    return str(request.user.get_username())
