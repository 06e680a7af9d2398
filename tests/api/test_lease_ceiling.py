"""A claim's lease is bounded by ``CLAWBOO_LEASE_MAX_MS`` (default seed 001's ~74 days;
an operator lowers it): a holder that is gone loses its claim within it. Without the
setting one heartbeat could buy ~74 days whatever the operator wanted, keeping a task
from every other agent (and from the lapse sweep) long after its holder left.
A ``lease_ms`` past the ceiling is ``400 validation_error`` on ``lease_ms``, not
clamped (the contract refuses a value it will not honour), and writes nothing."""

from __future__ import annotations

import datetime as dt

import pytest

from board import store
from board.models import Task
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db

DAYS_74 = 74 * 24 * 60 * 60 * 1000


@pytest.fixture(autouse=True)
def an_hour_at_most(settings):
    """An operator who wants a stranded claim back within the hour."""
    settings.CLAWBOO_LEASE_MAX_MS = 3_600_000


def claimed(api) -> tuple[str, str]:
    task = api.post("/api/board/tasks", {"title": "held"}, format="json").json()
    answer = api.post(
        f"/api/board/tasks/{task['id']}/claim", {"agent_id": "ada-bot"}, format="json"
    )
    assert answer.status_code == 200, answer.content[:300]
    return task["id"], answer.json()["ticket"]


def refused_past_the_ceiling(answer) -> None:
    assert answer.status_code == 400, answer.content[:300]
    body = answer.json()
    assert (body["error"], body["field"]) == ("validation_error", "lease_ms")
    assert "CLAWBOO_LEASE_MAX_MS" in body["detail"]


def test_a_heartbeat_asking_for_a_lease_past_the_ceiling_is_refused(api, agent):
    task_id, ticket = claimed(api)
    before = fingerprint()
    answer = api.post(
        f"/api/board/tasks/{task_id}/heartbeat",
        {"ticket": ticket, "lease_ms": DAYS_74},
        format="json",
    )
    refused_past_the_ceiling(answer)
    assert fingerprint() == before


def test_a_heartbeat_gets_at_most_the_ceiling(api, agent):
    task_id, ticket = claimed(api)
    answer = api.post(
        f"/api/board/tasks/{task_id}/heartbeat",
        {"ticket": ticket, "lease_ms": 3_600_000},
        format="json",
    )
    assert answer.status_code == 200, answer.content[:300]
    until = dt.datetime.fromisoformat(answer.json()["lease_until"])
    assert until <= dt.datetime.now(dt.UTC) + dt.timedelta(hours=1, seconds=5)


def test_a_claim_asking_for_a_lease_past_the_ceiling_is_refused(api, agent):
    task = api.post("/api/board/tasks", {"title": "free"}, format="json").json()
    before = fingerprint()
    for path in (f"/api/board/tasks/{task['id']}/claim", "/api/board/claim-next"):
        answer = api.post(path, {"agent_id": "ada-bot", "lease_ms": 3_600_001}, format="json")
        refused_past_the_ceiling(answer)
    assert fingerprint() == before


def test_the_default_ceiling_is_seed_001s_so_a_lease_may_cover_a_whole_job(api, agent, settings):
    from clawboo import settings as project

    settings.CLAWBOO_LEASE_MAX_MS = project.CLAWBOO_LEASE_MAX_MS
    assert project.CLAWBOO_LEASE_MAX_MS == DAYS_74
    task_id, ticket = claimed(api)
    answer = api.post(
        f"/api/board/tasks/{task_id}/heartbeat",
        {"ticket": ticket, "lease_ms": 8 * 3_600_000},
        format="json",
    )
    assert answer.status_code == 200, answer.content[:300]


def test_the_ceiling_is_the_operators_setting(api, agent, settings):
    settings.CLAWBOO_LEASE_MAX_MS = 10_000
    task_id, ticket = claimed(api)
    over = api.post(
        f"/api/board/tasks/{task_id}/heartbeat",
        {"ticket": ticket, "lease_ms": 10_001},
        format="json",
    )
    refused_past_the_ceiling(over)
    # A span committed under a higher ceiling (before an upgrade) is held to today's.
    Task.objects.filter(pk=task_id).update(lease_duration_ms=DAYS_74)
    renewed = store.renew_lease(task_id, ticket).raise_if_declined()
    assert renewed.lease_duration_ms == 10_000
    assert renewed.lease_until is not None
    assert renewed.lease_until <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=11)
