"""``/api/teams`` and ``/api/agents``: the registry of record over REST."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clawboo import registry
from clawboo.api.access import can_see_team, require_team, team_ids
from clawboo.api.bodies import json_object
from clawboo.api.idempotency import idempotent
from clawboo.api.schema import with_errors
from clawboo.errors import NotFound
from clawboo.models import Agent, Runtime, Team

TeamSerializer = inline_serializer(
    "Team", {"id": serializers.CharField(), "name": serializers.CharField()}
)
AgentSerializer = inline_serializer(
    "Agent",
    {
        "id": serializers.CharField(),
        "display_name": serializers.CharField(),
        "team": serializers.CharField(),
        "runtime": serializers.ChoiceField(choices=Runtime.choices),
        "participant_kind": serializers.ChoiceField(choices=["agent", "human"]),
        "settings": serializers.DictField(),
    },
)


def team_body(team: Team) -> dict[str, Any]:
    return {"id": team.id, "name": team.name, "created_at": team.created_at.isoformat()}


def agent_body(agent: Agent) -> dict[str, Any]:
    return {
        "id": agent.id,
        "display_name": agent.display_name,
        "team": agent.team_id,
        "runtime": agent.runtime,
        "participant_kind": agent.participant_kind,
        "settings": agent.settings,
        "created_at": agent.created_at.isoformat(),
        "updated_at": agent.updated_at.isoformat(),
    }


class TeamsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="teams_list", responses=with_errors({200: TeamSerializer}))
    def get(self, request: Request) -> Response:
        teams = Team.objects.all()
        visible = team_ids(request.user)
        if visible is not None:
            teams = teams.filter(pk__in=visible)
        return Response([team_body(t) for t in teams.order_by("id")])

    @extend_schema(
        operation_id="teams_create",
        request=TeamSerializer,
        responses=with_errors({201: TeamSerializer}, "validation_error", "conflict"),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(request, ("id", "name"), required=("id",))
        team = registry.create_team(body["id"], body.get("name"), creator=request.user)
        return Response(team_body(team), status=201)


class AgentsView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="agents_list", responses=with_errors({200: AgentSerializer}))
    def get(self, request: Request) -> Response:
        agents = Agent.objects.all()
        visible = team_ids(request.user)
        if visible is not None:
            agents = agents.filter(team_id__in=visible)
        return Response([agent_body(a) for a in agents.order_by("id")])

    @extend_schema(
        operation_id="agents_create",
        request=AgentSerializer,
        responses=with_errors({201: AgentSerializer}, "validation_error", "forbidden", "conflict"),
    )
    @idempotent
    def post(self, request: Request) -> Response:
        body = json_object(
            request,
            ("id", "display_name", "team", "runtime", "participant_kind", "settings"),
            required=("id", "display_name", "team", "runtime"),
        )
        require_team(request.user, body["team"])
        return Response(agent_body(registry.create_agent(**body)), status=201)


class AgentDetailView(APIView):
    permission_classes = [IsAuthenticated]

    def _agent(self, request: Request, agent_id: str) -> Agent:
        agent = Agent.objects.filter(pk=agent_id).first()
        if agent is None or not can_see_team(request.user, agent.team_id):
            raise NotFound(f"agent {agent_id!r} does not exist")
        return agent

    @extend_schema(
        operation_id="agents_retrieve", responses=with_errors({200: AgentSerializer}, "not_found")
    )
    def get(self, request: Request, agent_id: str) -> Response:
        return Response(agent_body(self._agent(request, agent_id)))

    @extend_schema(
        operation_id="agents_update",
        request=AgentSerializer,
        responses=with_errors({200: AgentSerializer}, "not_found", "validation_error", "forbidden"),
    )
    def patch(self, request: Request, agent_id: str) -> Response:
        self._agent(request, agent_id)
        body = json_object(
            request, ("display_name", "team", "runtime", "participant_kind", "settings")
        )
        if "team" in body:
            require_team(request.user, body["team"])
        return Response(agent_body(registry.update_agent(agent_id, body)))
