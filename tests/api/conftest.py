from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Sum
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board.models import ExecutionProcess, Task, TaskComment, TaskDep
from core import registry
from core.models import Agent, AgentToken, ChatMessage, Event, IdempotencyRecord, Team


def key_client(key: str) -> APIClient:
    """An API client that sends ``key`` (an agent's key, a machine token, a person's
    token, a run's credential) and JSON bodies."""
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    api.default_format = "json"
    return api


def make_client(username: str, *, teams: tuple[str, ...] = ("default",), staff: bool = False):
    """A person with their own token, a member of ``teams``. ``staff``: an operator,
    staff with every model permission (staff's powers beyond their own teams need
    the one the roles table names: core.roles.staff_power)."""
    user = get_user_model().objects.create_user(username=username, password="pw", is_staff=staff)
    if staff:
        from django.contrib.auth.models import Permission

        user.user_permissions.set(Permission.objects.all())
    for team in teams:
        registry.add_member(team, user)
    token = Token.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    client.user = user
    return client


@pytest.fixture
def api(db):
    return make_client("ada")


@pytest.fixture
def staff_api(db):
    return make_client("root", staff=True)


@pytest.fixture
def agent(api):
    """An agent the ``api`` client (user ada) owns, so it may act as it. These tests
    hold several tasks at once as it; the limit has tests of its own."""
    return registry.create_agent(
        id="ada-bot",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=api.user,
        max_concurrent=100,
    )


def fingerprint() -> dict[str, Any]:
    """Everything a refused request must leave untouched."""
    return {
        "tasks": Task.objects.count(),
        "deps": TaskDep.objects.count(),
        "comments": TaskComment.objects.count(),
        "executions": ExecutionProcess.objects.count(),
        "events": Event.objects.count(),
        "teams": Team.objects.count(),
        "agents": Agent.objects.count(),
        "idempotency": IdempotencyRecord.objects.count(),
        "revisions": Task.objects.aggregate(s=Sum("revision"))["s"],
        "sequences": list(Team.objects.order_by("pk").values_list("pk", "last_event_seq")),
        "agent_rows": list(
            Agent.objects.order_by("pk").values_list(
                "pk", "team_id", "runtime", "settings", "owner_id", "approved_fingerprint"
            )
        ),
        "agent_tokens": AgentToken.objects.count(),
        "chat": ChatMessage.objects.count(),
    }


@pytest.fixture
def unchanged():
    """Use as ``with unchanged(): <refused request>``."""
    from contextlib import contextmanager

    @contextmanager
    def check():
        before = fingerprint()
        yield
        assert fingerprint() == before

    return check
