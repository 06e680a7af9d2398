"""``/api/teams`` and ``/api/agents``: the registry of record over REST."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import (
    agent_secrets,
    beats,
    chat,
    events,
    machines,
    registry,
    roles,
    server_commands,
)
from core.api.access import (
    acting_name,
    govern_agent,
    may_govern_agent,
    require_team,
    scoped,
    team_ids,
    visible_agent,
    visible_team,
)
from core.api.auth import bound_agents
from core.api.bodies import json_object, query_int
from core.api.idempotency import idempotent
from core.api.schema import with_errors
from core.errors import Forbidden, ValidationFailed
from core.live import frames_for
from core.models import Agent, MachineToken, ParticipantKind, Runtime, Team

_TEAM_FIELDS: dict[str, Any] = {
    "id": serializers.CharField(),
    "name": serializers.CharField(),
    "approval_required": serializers.BooleanField(
        required=False, help_text="every new task of the team waits for a person's approval"
    ),
    "reviewer_agent": serializers.CharField(
        allow_null=True, required=False, help_text="the team's critic (null: no critic)"
    ),
    "max_concurrent": serializers.IntegerField(
        allow_null=True,
        required=False,
        help_text="the most of the team's tasks in_progress at once (null: no team limit)",
    ),
}
TeamSerializer = inline_serializer("Team", _TEAM_FIELDS)
TeamListSerializer = inline_serializer("Team", _TEAM_FIELDS, many=True)
TeamPatchSerializer = inline_serializer(
    "TeamPatch",
    {
        "reviewer_agent": serializers.CharField(
            allow_null=True,
            required=False,
            help_text="an agent of this team that reviews its risky changes; null: no "
            "critic. Staff only.",
        ),
        "approval_required": serializers.BooleanField(
            required=False,
            help_text="every new task of the team waits for a person's approval. Staff only.",
        ),
        "max_concurrent": serializers.IntegerField(
            allow_null=True,
            required=False,
            min_value=1,
            help_text="the most of the team's tasks in_progress at once, across every "
            "process and host (null: no team limit). Staff only.",
        ),
        "name": serializers.CharField(required=False, help_text="Staff only."),
    },
)
_AGENT_FIELDS: dict[str, Any] = {
    "id": serializers.CharField(),
    "display_name": serializers.CharField(),
    "team": serializers.CharField(),
    "runtime": serializers.ChoiceField(choices=Runtime.choices),
    "participant_kind": serializers.ChoiceField(choices=ParticipantKind.choices),
    "settings": serializers.DictField(
        required=False,
        help_text="staff only (absent for anyone else); each secret-looking key's value "
        f"reads {agent_secrets.MASK!r}, and that placeholder written back keeps the secret",
    ),
    "owner": serializers.CharField(allow_null=True, help_text="username of its owner"),
    "labels": serializers.ListField(child=serializers.CharField()),
    "max_concurrent": serializers.IntegerField(help_text="tasks it holds in_progress at once"),
    "state": serializers.ChoiceField(choices=["active", "paused", "unhealthy"]),
    "state_reason": serializers.CharField(allow_blank=True),
    "paused_by": serializers.CharField(allow_null=True),
    "paused_at": serializers.DateTimeField(allow_null=True),
    "health": inline_serializer(
        "AgentHealth",
        {
            "ok": serializers.BooleanField(allow_null=True),
            "detail": serializers.CharField(allow_blank=True),
            "checked_at": serializers.DateTimeField(allow_null=True),
        },
        help_text="the last preflight where a worker runs it (ok null: never probed)",
    ),
    "runs_on": inline_serializer(
        "AgentRunsOn",
        {
            "host": serializers.CharField(),
            "seen_at": serializers.DateTimeField(allow_null=True),
            "live": serializers.BooleanField(),
        },
        allow_null=True,
        help_text="the remote host that runs it: bound to a live machine token, the "
        "server's own workers leave it to that host's `clawboo worker`; seen_at is that "
        "worker's last beat (null: none has connected), live whether it beat within "
        "CLAWBOO_HEALTH_BEAT_STALE_MS (false: nothing runs the agent's work now). null: "
        "the server's workers run it",
    ),
}
AgentSerializer = inline_serializer("Agent", _AGENT_FIELDS)
AgentListSerializer = inline_serializer(
    "AgentListed",
    {
        **_AGENT_FIELDS,
        "may_resume": serializers.BooleanField(
            help_text="whether you may resume it (and edit it): its owner or staff, the "
            "rule PATCH /api/agents/{id} holds to; the agent side never"
        ),
    },
    many=True,
)


def _agent_write_fields(create: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "display_name": serializers.CharField(required=create),
        "team": serializers.CharField(required=create),
        "runtime": serializers.ChoiceField(choices=Runtime.choices, required=create),
        "participant_kind": serializers.ChoiceField(
            choices=ParticipantKind.choices, required=False
        ),
        "settings": serializers.DictField(
            required=False,
            help_text="what the runtime runs; for every runtime but 'human' staff-only "
            "unless allowlisted (CLAWBOO_AGENT_ALLOWLIST)",
        ),
        "owner": serializers.CharField(
            required=False, help_text="username; staff only (default: the caller)"
        ),
        "labels": serializers.ListField(
            child=serializers.CharField(max_length=64),
            required=False,
            help_text="what a task's route may ask of it",
        ),
        "max_concurrent": serializers.IntegerField(
            required=False, min_value=1, help_text="tasks it holds in_progress at once (1)"
        ),
    }
    return {"id": serializers.CharField(), **fields} if create else fields


TeamCreateSerializer = inline_serializer(
    "TeamCreate", {"id": serializers.CharField(), "name": serializers.CharField(required=False)}
)
AgentCreateSerializer = inline_serializer("AgentCreate", _agent_write_fields(True))
AgentPatchSerializer = inline_serializer("AgentPatch", _agent_write_fields(False))


def team_body(team: Team) -> dict[str, Any]:
    return {
        "id": team.id,
        "name": team.name,
        "approval_required": team.approval_required,
        "reviewer_agent": team.reviewer_agent_id,
        "max_concurrent": team.max_concurrent,
        "created_at": team.created_at.isoformat(),
    }


def agent_body(
    agent: Agent, *, staff: bool, hosts: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An agent as the API shows it: ``settings`` to staff only, each secret in them
    masked (core.agent_secrets); everyone else sees its runtime, not its settings.
    ``hosts``: :func:`core.machines.hosts_running` of a list's agents (read here for
    one agent when not given)."""
    if hosts is None:
        hosts = machines.hosts_running([agent.id])
    host = hosts.get(agent.id)
    body = {
        "id": agent.id,
        "display_name": agent.display_name,
        "team": agent.team_id,
        "runtime": agent.runtime,
        "participant_kind": agent.participant_kind,
        "owner": agent.owner.get_username() if agent.owner is not None else None,
        "labels": list(agent.labels or []),
        "max_concurrent": agent.max_concurrent,
        "state": agent.dispatch_state,
        "state_reason": _state_reason(agent),
        "paused_by": agent.paused_by or None,
        "paused_at": agent.paused_at.isoformat() if agent.paused_at else None,
        "health": {
            "ok": agent.health_ok,
            "detail": agent.health_detail,
            "checked_at": agent.health_checked_at.isoformat() if agent.health_checked_at else None,
        },
        "runs_on": None
        if host is None
        else {
            "host": host["host"],
            "seen_at": host["seen_at"].isoformat() if host["seen_at"] else None,
            "live": host["live"],
        },
        "created_at": agent.created_at.isoformat(),
        "updated_at": agent.updated_at.isoformat(),
    }
    if staff:
        body["settings"] = agent_secrets.masked(agent.settings, agent.runtime)
    return body


def _state_reason(agent: Agent) -> str:
    if agent.dispatch_state == "unhealthy":
        return agent.health_detail
    return agent.state_reason


class TeamsView(APIView):
    @extend_schema(operation_id="teams_list", responses=with_errors({200: TeamListSerializer}))
    def get(self, request: Request) -> Response:
        teams = scoped(request.user, Team.objects.order_by("id"), "pk")
        return Response([team_body(t) for t in teams])

    @extend_schema(
        operation_id="teams_create",
        request=TeamCreateSerializer,
        responses=with_errors({201: TeamSerializer}, "validation_error", "conflict"),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, TeamCreateSerializer)
        team = registry.create_team(body["id"], body.get("name"), creator=request.user)
        return Response(team_body(team), status=201)


class TeamDetailView(APIView):
    """One team; staff change its settings (a member reads them: writes 403)."""

    @extend_schema(
        operation_id="teams_retrieve", responses=with_errors({200: TeamSerializer}, "not_found")
    )
    def get(self, request: Request, team_id: str) -> Response:
        return Response(team_body(visible_team(request.user, team_id)))

    @extend_schema(
        operation_id="teams_update",
        request=TeamPatchSerializer,
        responses=with_errors({200: TeamSerializer}, "not_found", "validation_error", "forbidden"),
    )
    def patch(self, request: Request, team_id: str) -> Response:
        visible_team(request.user, team_id)
        body = json_object(request, TeamPatchSerializer)
        # The critic runs on the server with its own runtime, and the approval rule
        # is the team's policy: an operator's decision.
        if not server_commands.is_operator(request.user):
            roles.refuse_withheld(request.user, f"team {team_id!r}'s settings")
            raise Forbidden("only staff change a team's settings", field="reviewer_agent")
        # One write: every field is checked first, so a refusal writes nothing.
        unset = registry.UNSET
        team = registry.update_team(
            team_id,
            name=body.get("name"),
            approval_required=body.get("approval_required"),
            max_concurrent=body["max_concurrent"] if "max_concurrent" in body else unset,
            reviewer_agent=body["reviewer_agent"] if "reviewer_agent" in body else unset,
        )
        return Response(team_body(team))


class AgentsView(APIView):
    @extend_schema(
        operation_id="agents_list",
        parameters=[OpenApiParameter("team", str, description="only this team's agents")],
        responses=with_errors({200: AgentListSerializer}),
    )
    def get(self, request: Request) -> Response:
        agents = scoped(request.user, Agent.objects.select_related("owner").order_by("id"))
        # A team the caller cannot see lists nothing, like one that does not exist.
        team = request.query_params.get("team")
        if team:
            agents = agents.filter(team_id=team)
        staff = server_commands.is_operator(request.user)
        listed = list(agents)
        hosts = machines.hosts_running(a.id for a in listed)
        return Response(
            [
                {
                    **agent_body(a, staff=staff, hosts=hosts),
                    "may_resume": may_govern_agent(request, a),
                }
                for a in listed
            ]
        )

    @extend_schema(
        operation_id="agents_create",
        request=AgentCreateSerializer,
        responses=with_errors({201: AgentSerializer}, "validation_error", "forbidden", "conflict"),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, AgentCreateSerializer)
        require_team(request.user, body["team"])
        operator = server_commands.is_operator(request.user)
        owner = _owner(request, body.pop("owner", None)) or request.user
        agent = registry.create_agent(
            **body,
            owner=owner,
            operator=operator,
            approved_by=request.user if operator else None,
        )
        return Response(agent_body(agent, staff=operator), status=201)


class AgentDetailView(APIView):
    @extend_schema(
        operation_id="agents_retrieve", responses=with_errors({200: AgentSerializer}, "not_found")
    )
    def get(self, request: Request, agent_id: str) -> Response:
        staff = server_commands.is_operator(request.user)
        # A machine token runs its agents: it reads their settings (secrets masked;
        # the worker host brings its own credentials).
        machine = bound_agents(request.auth)
        runs_it = machine is not None and agent_id in machine
        return Response(agent_body(visible_agent(request.user, agent_id), staff=staff or runs_it))

    @extend_schema(
        operation_id="agents_update",
        request=AgentPatchSerializer,
        responses=with_errors({200: AgentSerializer}, "not_found", "validation_error", "forbidden"),
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        govern_agent(request, agent_id)
        body = json_object(request, AgentPatchSerializer)
        if "team" in body:
            require_team(request.user, body["team"])
        if "owner" in body:
            body["owner"] = _owner(request, body["owner"])
        operator = server_commands.is_operator(request.user)
        agent = registry.update_agent(
            agent_id, body, operator=operator, approved_by=request.user if operator else None
        )
        return Response(agent_body(agent, staff=operator))


def _owner(request: Request, username: Any) -> Any:
    """The user named as an agent's owner: staff only (anyone else owns what they make)."""
    if username is None:
        return None
    if not server_commands.is_operator(request.user):
        if username == request.user.get_username():
            return request.user
        roles.refuse_withheld(request.user, "an agent for another user")
        raise Forbidden("only staff may register an agent for another user", field="owner")
    if not isinstance(username, str):
        raise ValidationFailed("owner", "must be a username")
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValidationFailed("owner", f"no user {username!r}")
    return user


_CHAT_FIELDS: dict[str, Any] = {
    "type": serializers.CharField(),
    "seq": serializers.IntegerField(),
    "team": serializers.CharField(),
    "body": serializers.CharField(),
    "author": serializers.CharField(),
    "task_id": serializers.CharField(allow_null=True),
}
ChatSerializer = inline_serializer("ChatLine", _CHAT_FIELDS)
ChatPostSerializer = inline_serializer("ChatPost", {"body": serializers.CharField()})
ChatListSerializer = inline_serializer("ChatLine", _CHAT_FIELDS, many=True)


def chat_body(message: Any) -> dict[str, Any]:
    return {
        "type": "chat",
        "seq": message.event_seq,
        "team": message.team_id,
        "body": message.body,
        "author": message.author,
        "task_id": message.task_id,
        "created_at": message.created_at.isoformat(),
    }


class TeamChatView(APIView):
    """The team's chat room: narration of board changes and people's messages.
    Posting here never changes the board."""

    @extend_schema(
        operation_id="teams_chat_list",
        parameters=[
            OpenApiParameter("limit", int, description="the newest lines (100, at most 500)")
        ],
        responses=with_errors({200: ChatListSerializer}, "not_found"),
    )
    def get(self, request: Request, team_id: str) -> Response:
        visible_team(request.user, team_id)
        limit = query_int(request.query_params.get("limit"), "limit", default=100, high=500)
        return Response(chat.recent(team_id, limit))

    @extend_schema(
        operation_id="teams_chat_create",
        request=ChatPostSerializer,
        responses=with_errors({201: ChatSerializer}, "not_found", "validation_error"),
    )
    def post(self, request: Request, team_id: str) -> Response:
        visible_team(request.user, team_id)
        body = json_object(request, ChatPostSerializer)
        message = chat.post(team_id, body["body"], author=acting_name(request))
        return Response(chat_body(message), status=201)


class TeamEventsView(APIView):
    """The durable event log: ``?since=N`` replays what a websocket would have sent."""

    @extend_schema(
        operation_id="teams_events_list",
        parameters=[
            OpenApiParameter(
                "since", int, description="replay the events after this sequence number"
            )
        ],
        responses=with_errors(
            {
                200: inline_serializer(
                    "Events",
                    {
                        "seq": serializers.IntegerField(),
                        "events": serializers.ListField(),
                        "reload": serializers.BooleanField(
                            help_text="events after `since` are no longer kept: reload the board"
                        ),
                    },
                )
            },
            "not_found",
            "validation_error",
        ),
    )
    def get(self, request: Request, team_id: str) -> Response:
        visible_team(request.user, team_id)
        since = query_int(request.query_params.get("since"), "since", default=-1, high=2**62)
        head = events.latest_seq(team_id)
        if since >= 0 and events.replay_gap(team_id, since) is not None:
            return Response({"seq": head, "events": [], "reload": True})
        frames = (
            [] if since < 0 else [f for e in events.since(team_id, since) for f in frames_for(e)]
        )
        return Response({"seq": head, "events": frames, "reload": False})


class WhoAmIView(APIView):
    """Who the credentials belong to and which teams they see: a cheap authenticated
    call for agents checking their token (and the API bench's baseline)."""

    @extend_schema(
        operation_id="whoami",
        responses=with_errors(
            {
                200: inline_serializer(
                    "WhoAmI",
                    {
                        "username": serializers.CharField(),
                        "staff": serializers.BooleanField(),
                        "teams": serializers.ListField(
                            child=serializers.CharField(), allow_null=True
                        ),
                        # A machine token: the agents it may run (a remote worker's
                        # default set).
                        "agents": serializers.ListField(
                            child=serializers.CharField(), required=False
                        ),
                        # Which side the key is (GOVERNANCE §6): a person's own key, or
                        # an agent's, a machine's or a reviewer's, which approve,
                        # decide and resume nothing.
                        "principal": serializers.ChoiceField(
                            choices=["person", "agent", "machine", "reviewer"]
                        ),
                        # An agent's key or a run's credential: the agent it acts as.
                        "agent": serializers.CharField(required=False),
                    },
                )
            }
        ),
    )
    def get(self, request: Request) -> Response:
        body: dict[str, Any] = {
            "username": request.user.get_username(),
            # Through an agent's key or a run's credential: the agent's powers, not
            # its staff owner's.
            "staff": bool(request.user.is_staff) and roles.agent_team(request.user) is None,
            "teams": team_ids(request.user),
        }
        principal = roles.principal_of(request.user, request.auth)
        body["principal"] = principal.kind
        if principal.kind in ("agent", "reviewer"):
            body["agent"] = principal.name
        machine = bound_agents(request.auth)
        if machine is not None:
            body["agents"] = sorted(machine)
        return Response(body)


WorkerBeatBody = inline_serializer(
    "WorkerBeat",
    {
        "pid": serializers.IntegerField(min_value=0),
        "agents": serializers.ListField(child=serializers.CharField(), required=False),
        "running": serializers.ListField(child=serializers.CharField(), required=False),
    },
)
_ID_LIST = 200  # a worker runs a handful of agents and tasks; bound what one beat stores


class WorkerBeatView(APIView):
    """``POST /api/workers/beat``: a remote worker (``clawboo worker``) is alive.

    Machine tokens only; the host is the one staff minted the token for. Seen in
    ``/healthz`` and the admin's heartbeats."""

    @extend_schema(
        operation_id="workers_beat",
        request=WorkerBeatBody,
        responses=with_errors({204: None}, "validation_error", "forbidden"),
    )
    def post(self, request: Request) -> Response:
        token = request.auth
        if not isinstance(token, MachineToken):
            raise Forbidden("only a machine token beats as a remote worker")
        body = json_object(request, WorkerBeatBody)
        detail = {}
        for field in ("agents", "running"):
            values = body.get(field) or []
            if len(values) > _ID_LIST or any(len(v) > 128 for v in values):
                raise ValidationFailed(field, f"at most {_ID_LIST} ids of 128 characters")
            detail[field] = list(values)
        # What a host says it runs is shown to staff (/healthz, the admin's beats): only
        # its own agents, never another host's or team's (GOVERNANCE §6).
        bound = bound_agents(token) or frozenset()
        strangers = [a for a in detail["agents"] if a not in bound]
        if strangers:
            raise Forbidden(
                f"this machine token may not run agent {strangers[0]!r}", field="agents"
            )
        # Its running tasks likewise: only those one of its agents holds. Another's id
        # is dropped, not refused -- a task settled or taken back between two beats is
        # still in an honest worker's list for one beat, and must not fail the beat.
        detail["running"] = _held_by(bound, detail["running"])
        beats.beat_remote(token.pk, token.host, body["pid"], detail)
        return Response(status=204)


def _held_by(agents: frozenset[str], task_ids: list[str]) -> list[str]:
    """The ids of ``task_ids`` that name a task in progress held by one of ``agents``,
    in the order given, once each. The board's Task is read through Django's app
    registry: core imports no app above it (tests/test_layers.py)."""
    if not task_ids or not agents:
        return []
    task = apps.get_model("board", "Task")
    held = set(
        task.objects.filter(
            pk__in=task_ids, assignee_agent_id__in=agents, status="in_progress"
        ).values_list("pk", flat=True)
    )
    return [one for one in dict.fromkeys(task_ids) if one in held]
