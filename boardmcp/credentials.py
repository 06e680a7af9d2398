"""Who is calling the board's MCP server, and what they may see: the caller's team
scope is bound here, from the credential, and never from a tool argument.

Three credentials name a caller:

- a **run credential** (:func:`mint_run_credential`): the executor mints one per run
  of an MCP-capable runtime; it acts as that run's agent, in the agent's team, and
  only while the run's claim holds. The only writer of ``mcp_run_credentials``;
- an **API token** (``Authorization: Token <key>``, the REST API's): through the
  project's configured token authentication, so a token bound to one agent acts as
  that agent only, and a person's token acts as the person in their teams;
- **stdio** (``clawboo mcp --agent A``): whoever can start the command can already
  reach the database; the process acts as agent ``A`` in its team.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from django.utils.module_loading import import_string
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from board import store
from board.errors import TaskNotFound
from board.models import Task
from board.transitions import Status
from boardmcp.models import RunCredential
from core import registry, roles, storage
from core.api.access import team_ids
from core.api.auth import RUN_KEY_PREFIX, bound_agent, bound_agents
from core.api.throttling import agent_client, client_of
from core.errors import ClawbooError
from core.models import Agent
from core.registry import member_team_ids
from core.roles import Principal, principal_of

MAX_KEY_LENGTH = 128


@dataclass(frozen=True)
class Caller:
    """The identity every tool call acts under.

    ``teams``: the teams it sees (None: every team, staff only). ``agent_id``: the one
    agent it may act as (claim, heartbeat, settle, file work as), or None (a person).
    ``task_id``/``ticket``: the run it belongs to, whose task the executor settles.
    """

    name: str
    teams: tuple[str, ...] | None
    agent_id: str | None = None
    task_id: str | None = None
    ticket: str | None = None
    run: bool = False
    # A critic's run: it reads the board and settles nothing (boardmcp.tools refuses
    # every writing tool).
    read_only: bool = False
    # Whose request budget a call spends (core.api.throttling): the token's user, or
    # the run's agent.
    client: str = ""
    # Its principal in GOVERNANCE §6 (core.roles): person, agent, machine or
    # reviewer; a caller made without saying is an agent, never a person.
    kind: str = "agent"
    staff: bool = False
    # A machine token's bound agents: over MCP it acts as none of them, yet their
    # tasks are its own (GOVERNANCE §6: it acts for them as their keys do).
    machine_agents: frozenset[str] = frozenset()
    # A staff person's own teams, and the tools whose model permission they lack
    # (core.roles.withheld_rows): for those, the member's powers only (:meth:`acting`).
    member_teams: tuple[str, ...] = ()
    withheld_verbs: frozenset[str] = frozenset()
    # The row whose permission this call lacks (set by :meth:`acting`).
    withheld: roles.Verb | None = None
    # The name its comments are signed with, when it is not ``name``: a machine
    # token's user, as over REST (core.api.access.acting_name). Its host's name is
    # an operator's free text, which may be a person's username (core.authors).
    author: str = ""
    # What REST's ``request.user`` and ``request.auth`` are for the same credential
    # (a run's: its agent's owner, bound to the agent's team, and the credential), so
    # a Caller answers core.api.access's rules as a request does: acting as an agent
    # is one rule (:func:`core.api.access.act_as`), asked by both doors.
    user: Any = field(default=None, compare=False, repr=False)
    auth: Any = field(default=None, compare=False, repr=False)

    @property
    def signs_as(self) -> str:
        return self.author or self.name

    def acting(self, verb: str) -> Caller:
        """This caller for one call of ``verb``: a staff person without the model
        permission the roles table names for it acts as a member of their own teams
        (core.roles.staff_power), and is told what is missing beyond them."""
        if self.teams is not None or verb not in self.withheld_verbs:
            return self
        return replace(self, teams=self.member_teams, withheld=roles.TABLE[verb])

    def refuse_withheld(self, what: str) -> None:
        """403 naming the permission, for a staff caller :meth:`acting` narrowed who
        reached ``what`` beyond their own teams; anyone else: no-op."""
        if self.withheld is not None:
            raise roles.staff_refusal(self.principal, self.withheld, what)

    @property
    def own_agents(self) -> frozenset[str]:
        """The agents whose tasks are this caller's own (board.access.owns_task)."""
        if self.agent_id is not None:
            return frozenset({self.agent_id})
        return self.machine_agents

    @property
    def principal(self) -> Principal:
        kind: Any = (
            self.kind if self.kind in ("person", "agent", "machine", "reviewer") else "agent"
        )
        return Principal(kind, self.name, staff=self.staff and kind == "person")

    def sees(self, team_id: str) -> bool:
        return self.teams is None or team_id in self.teams


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _plausible(key: Any) -> bool:
    # Checked before any query: a NUL or a surrogate would break the query itself.
    return (
        isinstance(key, str)
        and 0 < len(key) <= MAX_KEY_LENGTH
        and key.isascii()
        and key.isprintable()
    )


@dataclass(frozen=True)
class StdioCredential:
    """What ``clawboo mcp --agent A`` authenticates with, as core.api.auth reads a
    credential: bound to agent ``A`` (:func:`core.api.auth.bound_agent`), the agent
    side (:func:`core.roles.principal_of`)."""

    bound_agent_id: str
    principal_kind: str = "agent"


def _agent_user(agent: Agent) -> Any:
    """The user a credential bound to ``agent`` acts for, as REST's run authentication
    binds it (boardmcp.auth): its owner, seeing the agent's team only; an agent of no
    owner, nobody's (it sees no team beyond the one it is bound to)."""
    user = agent.owner if agent.owner_id is not None else AnonymousUser()
    roles.bind_to_agent_team(user, agent.team_id)
    return user


def agent_caller(
    agent: Agent,
    *,
    task_id: str | None = None,
    ticket: str | None = None,
    user: Any = None,
    auth: Any = None,
) -> Caller:
    """A caller acting as ``agent`` only; ``user``/``auth``: the credential's, as
    REST would read them (default: the stdio process's)."""
    return Caller(
        name=agent.id,
        teams=(agent.team_id,),
        agent_id=agent.id,
        task_id=task_id,
        ticket=ticket,
        user=user if user is not None else _agent_user(agent),
        auth=auth if auth is not None else StdioCredential(agent.id),
    )


def caller_for_agent(agent_id: str, task_id: str | None = None) -> Caller:
    """The stdio caller: agent ``agent_id`` (NotFound if unknown), optionally bound to
    one of its team's tasks (TaskNotFound otherwise)."""
    agent = registry.get_agent(agent_id)
    if task_id is not None:
        task = store.find_task(task_id)
        if task is None or task.team_id != agent.team_id:
            raise TaskNotFound(task_id)
    return agent_caller(agent, task_id=task_id)


# --- run credentials -------------------------------------------------------------


def mint_run_credential(
    agent_id: str, task_id: str, ticket: str, *, read_only: bool = False
) -> str:
    """A new key acting as ``agent_id`` for the run holding ``ticket`` on ``task_id``.
    The key is returned once; only its digest is stored. ``read_only``: a critic's
    key, valid while the builder's claim ``ticket`` holds, that may read the board
    but settle nothing."""
    key = RUN_KEY_PREFIX + secrets.token_urlsafe(32)

    def run() -> None:
        RunCredential.objects.create(
            key_sha256=_digest(key),
            agent_id=agent_id,
            task_id=task_id,
            ticket=ticket,
            read_only=read_only,
            created_at=timezone.now(),
        )

    storage.write(run)
    return key


def revoke_run_credential(key: str) -> None:
    storage.write(lambda: RunCredential.objects.filter(pk=_digest(key)).delete())


def prune_void_run_credentials() -> int:
    """Delete the run credentials whose claim no longer holds (a run killed before it
    could revoke its own); return how many. They authenticate nothing already: this
    only keeps the table to the runs that are live."""
    credentials = list(RunCredential.objects.all())
    tasks = Task.objects.in_bulk({c.task_id for c in credentials})
    void = [c.pk for c in credentials if not _claim_holds(tasks.get(c.task_id), c)]
    if void:
        storage.write(lambda: RunCredential.objects.filter(pk__in=void).delete())
    return len(void)


def _claim_holds(task: Task | None, credential: RunCredential) -> bool:
    if task is None or task.status != Status.IN_PROGRESS:
        return False
    # A critic reviews inside its builder's claim: the claim is another agent's.
    if task.assignee_agent_id != credential.agent_id and not credential.read_only:
        return False
    try:
        return store.Ticket.decode(credential.ticket) == store.Ticket.for_task(task)
    except ClawbooError:  # a ticket signed with a key since rotated out
        return False


def _run_caller(credential: RunCredential) -> Caller | None:
    """The run's caller, or None once the run's claim no longer holds."""
    if not _claim_holds(store.find_task(credential.task_id), credential):
        return None
    return Caller(
        name=credential.agent.id,
        teams=(credential.agent.team_id,),
        agent_id=credential.agent.id,
        task_id=credential.task_id,
        ticket=credential.ticket,
        run=True,
        read_only=credential.read_only,
        client=agent_client(credential.agent.id),
        kind=credential.principal_kind,
        user=_agent_user(credential.agent),
        auth=credential,
    )


# --- API tokens ------------------------------------------------------------------


def _token_authentication() -> TokenAuthentication:
    """The REST API's own token authentication (the first configured class that is
    one), so the MCP server accepts exactly the tokens the API does."""
    rest: Any = settings.REST_FRAMEWORK
    for path in rest.get("DEFAULT_AUTHENTICATION_CLASSES", ()):
        cls = import_string(path)
        if issubclass(cls, TokenAuthentication):
            return cls()
    return TokenAuthentication()


def _token_caller(key: str) -> Caller | None:
    try:
        user, token = _token_authentication().authenticate_credentials(key)
    except AuthenticationFailed:
        return None
    # A token minted for one agent (core.api.auth) acts as that agent only, and only
    # while its user may act as it: the agent's owner, or staff.
    bound = bound_agent(token)
    if bound is not None:
        agent = Agent.objects.filter(pk=bound).first()
        if agent is None or not (user.is_staff or agent.owner_id == user.pk):
            return None
        # The user authenticate_credentials read is bound to the agent's team already.
        return replace(agent_caller(agent, user=user, auth=token), client=client_of(user, token))
    principal = principal_of(user, token)
    teams = team_ids(user)
    staff = principal.kind == "person" and teams is None
    return Caller(
        name=principal.name if principal.kind == "machine" else user.get_username(),
        author=user.get_username(),
        teams=None if teams is None else tuple(teams),
        client=client_of(user, token),
        # A machine token acts for its agents through their own keys or the REST
        # API; over MCP it is the agent side and acts as no agent.
        kind=principal.kind,
        staff=principal.staff,
        machine_agents=bound_agents(token) or frozenset(),
        member_teams=tuple(member_team_ids(user)) if staff else (),
        withheld_verbs=roles.withheld_rows(user) if staff else frozenset(),
        user=user,
        auth=token,
    )


def caller_for_key(key: Any) -> Caller | None:
    """The caller a presented key names, or None (unknown, void or malformed)."""
    if not _plausible(key):
        return None
    credential = (
        RunCredential.objects.select_related("agent__owner").filter(pk=_digest(key)).first()
    )
    if credential is not None:
        return _run_caller(credential)
    return _token_caller(key)


def live_run_credential(key: str) -> RunCredential | None:
    """The run credential ``key`` names, with its agent and the agent's owner, while
    its run's claim holds; None otherwise (unknown, malformed, void)."""
    if not _plausible(key):
        return None
    found = RunCredential.objects.select_related("agent__owner").filter(pk=_digest(key)).first()
    return found if found is not None and _run_caller(found) is not None else None
