"""``/metrics``: Prometheus text for staff or the metrics token; the series move
with board activity."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from prometheus_client.parser import text_string_to_metric_families

from board import store
from core import beats, registry

pytestmark = pytest.mark.django_db


def samples(response) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found, name, **labels):
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_user("op", password="pw", is_staff=True)
    client.force_login(user)
    return client


def test_it_refuses_anonymous_and_non_staff_callers(client):
    response = client.get("/metrics")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"
    user = get_user_model().objects.create_user("ada", password="pw")
    client.force_login(user)
    assert client.get("/metrics").status_code == 401


def test_the_metrics_token_opens_it(client, settings):
    settings.CLAWBOO_METRICS_TOKEN = "s3cret"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")


def test_board_series_move_with_board_activity(staff):
    registry.create_agent(id="ada", display_name="Ada", team="default", runtime="command")
    before = samples(staff.get("/metrics"))
    assert value(before, "clawboo_tasks", team="default", status="todo") == 0
    first = store.create_task(title="one", file_mutating=False).task
    store.create_task(title="two", file_mutating=False)
    blocked = store.create_task(title="three", file_mutating=False, depends_on=[first.id]).task

    found = samples(staff.get("/metrics"))
    assert value(found, "clawboo_tasks", team="default", status="todo") == 3
    assert value(found, "clawboo_ready_tasks", team="default") == 2
    assert value(found, "clawboo_claims_total", team="default") == 0

    claimed = store.claim(first.id, "ada", runtime="command")
    execution = store.open_execution(first.id, claimed.ticket, runtime="command")
    store.close_execution(execution.id, "succeeded", tokens_in=120, tokens_out=30, cost_cents=7)
    store.complete(first.id, ticket=claimed.ticket)
    assert store.claim(first.id, "ada").outcome == "conflict"

    found = samples(staff.get("/metrics"))
    assert value(found, "clawboo_claims_total", team="default") == 1
    assert value(found, "clawboo_tasks", team="default", status="done") == 1
    # The dependent became ready when its blocker was done.
    assert value(found, "clawboo_ready_tasks", team="default") == 2
    assert store.get_task(blocked.id).unmet_deps == 0
    assert value(found, "clawboo_executions_total", runtime="command", outcome="succeeded") == 1
    assert value(found, "clawboo_execution_tokens_total", runtime="command", direction="in") == 120
    assert value(found, "clawboo_execution_cost_cents_total", runtime="command") == 7
    assert (
        value(
            found,
            "clawboo_execution_duration_seconds_count",
            runtime="command",
            outcome="succeeded",
        )
        == 1
    )


def test_a_lapsed_lease_counts_as_a_lapse_and_an_abandonment(staff):
    import datetime as dt

    import time_machine
    from django.utils import timezone

    registry.create_agent(id="ada", display_name="Ada", team="default", runtime="command")
    task = store.create_task(title="one", file_mutating=False).task
    claimed = store.claim(task.id, "ada", lease_ms=1000)
    store.open_execution(task.id, claimed.ticket, runtime="command")
    with time_machine.travel(timezone.now() + dt.timedelta(minutes=5), tick=False):
        store.claim(task.id, "ada")  # the lapsed lease is released first, then re-claimed
    found = samples(staff.get("/metrics"))
    assert value(found, "clawboo_lease_lapses_total") == 1
    assert value(found, "clawboo_abandonments_total", team="default") == 1
    assert value(found, "clawboo_claims_total", team="default") == 2


def test_request_latency_and_claim_conflicts_are_counted_per_route(staff):
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.get(username="op")
    registry.add_member("default", user)
    registry.create_agent(
        id="ada", display_name="Ada", team="default", runtime="command", owner=user
    )
    key = Token.objects.create(user=user).key
    task = store.create_task(title="one", file_mutating=False).task
    auth = {"HTTP_AUTHORIZATION": f"Token {key}"}
    before = samples(staff.get("/metrics"))
    body = {"agent_id": "ada"}
    ok = staff.post(
        f"/api/board/tasks/{task.id}/claim", body, content_type="application/json", **auth
    )
    assert ok.status_code == 200, ok.content
    lost = staff.post(
        f"/api/board/tasks/{task.id}/claim", body, content_type="application/json", **auth
    )
    assert lost.status_code == 409
    found = samples(staff.get("/metrics"))
    route = "api/board/tasks/<str:task_id>/claim"
    assert (
        value(found, "clawboo_claim_conflicts_total")
        == value(before, "clawboo_claim_conflicts_total") + 1
    )
    count = "clawboo_http_request_duration_seconds_count"
    assert (
        value(found, count, method="POST", route=route, status="409")
        == value(before, count, method="POST", route=route, status="409") + 1
    )


def test_routine_fires_and_heartbeats_are_exposed(staff):
    beats.beat("ticker")
    found = samples(staff.get("/metrics"))
    assert ("clawboo_heartbeat_age_seconds", (("part", "ticker"),)) in found
    families = {
        f.name for f in text_string_to_metric_families(staff.get("/metrics").content.decode())
    }
    assert {
        "clawboo_routine_fires",
        "clawboo_routine_fire_lateness_seconds",
        "clawboo_websocket_clients",
        "clawboo_stale_sweep_releases",
    } <= families


@pytest.mark.django_db(transaction=True)
def test_open_websockets_are_counted_by_team(client):
    from asgiref.sync import async_to_sync
    from channels.testing import WebsocketCommunicator
    from rest_framework.authtoken.models import Token

    from clawboo.asgi import application
    from ops.metrics import SocketCollector

    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    key = Token.objects.create(user=user).key

    def clients() -> float:
        (family,) = SocketCollector().collect()
        return sum(s.value for s in family.samples if s.labels == {"team": "default"})

    async def scenario() -> tuple[float, float]:
        ws = WebsocketCommunicator(
            application,
            f"/ws/board/?team=default&token={key}",
            headers=[(b"origin", b"http://localhost")],
        )
        connected, _ = await ws.connect()
        assert connected
        await ws.receive_json_from(timeout=5)  # hello: counted by now
        while_open = clients()
        await ws.disconnect()
        return while_open, clients()

    assert async_to_sync(scenario)() == (1, 0)


@pytest.mark.django_db(transaction=True)
def test_a_routine_fire_is_counted_with_its_lateness(client):
    import datetime as dt

    import time_machine

    from routines import store as routine_store
    from routines.ticker import Ticker

    staff_user = get_user_model().objects.create_user("op", password="pw", is_staff=True)
    registry.create_agent(
        id="ada", display_name="Ada", team="default", runtime="command", settings={"argv": ["true"]}
    )
    start = dt.datetime(2030, 1, 7, 8, 0, tzinfo=dt.UTC)
    with time_machine.travel(start, tick=False) as clock:
        routine_store.create_routine(agent_id="ada", team="default", cron_spec="0 * * * *")
        clock.shift(dt.timedelta(hours=1, seconds=2))  # the ticker wakes 2 s after the slot
        assert Ticker().tick().claimed
        client.force_login(staff_user)
        found = samples(client.get("/metrics"))
    assert value(found, "clawboo_routine_fires_total", outcome="dispatched") == 1
    count = "clawboo_routine_fire_lateness_seconds_count"
    assert value(found, count, outcome="dispatched") == 1
    lateness = value(found, "clawboo_routine_fire_lateness_seconds_sum", outcome="dispatched")
    assert 1.5 < lateness < 2.5
    assert (
        value(found, "clawboo_routine_fire_lateness_seconds_bucket", le="1.0", outcome="dispatched")
        == 0
    )
    assert (
        value(found, "clawboo_routine_fire_lateness_seconds_bucket", le="5.0", outcome="dispatched")
        == 1
    )


def test_invented_methods_and_paths_add_no_series(staff, client):
    import secrets

    def series() -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        return {key for key in samples(staff.get("/metrics")) if key[0].startswith("clawboo_http")}

    paths = ["/api/board/tasks", "/nowhere"]
    for path in paths:  # the one `other` series each path kind may have
        client.generic("BREW", path)
        client.generic("BREW", f"{path}/{secrets.token_hex(4)}")
    series()  # reading /metrics adds its own series: once, before the count
    before = series()
    for n in range(60):
        method = "X" + secrets.token_hex(4).upper()
        path = paths[n % 2] + ("" if n % 3 else f"/{secrets.token_hex(4)}")
        client.generic(method, path)
    after = series()
    assert after == before
    other = [labels for name, labels in after if ("method", "other") in labels]
    assert other  # the invented methods were counted, under one label
