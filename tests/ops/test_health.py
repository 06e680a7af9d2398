"""``GET /healthz``: 200 when every part is ok, 503 naming the parts that are not."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time

import pytest
import time_machine
from django.utils import timezone

from core import beats
from core.models import Heartbeat
from ops import health
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


def beat_all(parts=("ticker", "workers", "qcluster")) -> None:
    for part in parts:
        beats.beat(part)


def test_it_answers_200_without_authentication_when_every_part_beats(client):
    beat_all()
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["status"] == "ok" and body["failing"] == []
    assert set(body["parts"]) == {"database", "channels", "ticker", "workers", "qcluster", "agents"}
    assert body["parts"]["channels"]["ok"] is True


def test_a_part_that_never_beat_is_named_failing(client):
    beat_all(("workers", "qcluster"))
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["ticker"]
    assert "no heartbeat" in response.json()["parts"]["ticker"]["detail"]


def test_a_stale_beat_turns_it_503(client, settings):
    settings.CLAWBOO_HEALTH_BEAT_STALE_MS = 60_000
    beat_all()
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=90), tick=False):
        body = client.get("/healthz").json()
    # The cluster beats from a minutely schedule: it gets three minutes.
    assert body["failing"] == ["ticker", "workers"]


def test_the_parts_required_are_a_setting(client, settings):
    settings.CLAWBOO_HEALTH_PARTS = ["workers"]
    beats.beat("workers")
    assert client.get("/healthz").status_code == 200


def test_a_clean_stop_withdraws_the_beat_at_once(client):
    beat_all()
    beater = beats.Beater("ticker")
    beater.maybe_beat()
    beats.forget("ticker")
    assert client.get("/healthz").json()["failing"] == ["ticker"]


def test_unapplied_migrations_fail_the_database_part(monkeypatch):
    monkeypatch.setattr(health, "_migrated", False)

    class Pending:
        def __init__(self, connection):
            self.loader = type("L", (), {"graph": type("G", (), {"leaf_nodes": lambda s: []})()})()

        def migration_plan(self, targets):
            return [("board", "9999_future")]

    monkeypatch.setattr(health, "MigrationExecutor", Pending)
    part = health.check_database()
    assert not part.ok and part.detail == "1 migration(s) not applied"


def test_a_channel_layer_that_does_not_answer_fails_the_channels_part(settings):
    from asgiref.sync import async_to_sync
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "tests.ops.test_health.DeafLayer"}}
    channel_layers.backends.clear()
    part = async_to_sync(health.check_channel_layer)()
    assert not part.ok and "no answer" in part.detail


class DeafLayer:
    """A channel layer that accepts messages and never delivers them."""

    def __init__(self, **kwargs):
        pass

    async def new_channel(self, prefix="specific"):
        return f"{prefix}.deaf!1"

    async def send(self, channel, message):
        return None

    async def receive(self, channel):
        import asyncio

        await asyncio.sleep(3600)


@pytest.mark.django_db(transaction=True)
def test_it_turns_503_when_the_ticker_process_stops(client, database_url, tmp_path, settings):
    """A real ``manage.py ticker`` beats; SIGTERM stops it and /healthz names it."""
    beats.beat("workers")
    beats.beat("qcluster")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "ticker"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while not Heartbeat.objects.filter(part="ticker").exists():
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the ticker never beat"
            time.sleep(0.05)
        assert client.get("/healthz").status_code == 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["ticker"]


def test_a_beat_that_cannot_be_written_never_stops_its_loop(monkeypatch):
    calls = []

    def down(part, **kwargs):
        calls.append(part)
        raise RuntimeError("database is down")

    monkeypatch.setattr(beats, "beat", down)
    beater = beats.Beater("ticker", interval_s=3600)
    beater.maybe_beat()
    beater.maybe_beat()  # within the interval: not asked again
    assert calls == ["ticker"]


def test_anonymous_healthz_names_no_agent_host_or_path_and_staff_see_them(client, settings):
    """Health is not a directory (GOVERNANCE §6)."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from core import machines, registry
    from core.models import Agent

    beat_all()
    registry.create_agent(id="secret-bot", display_name="S", team="default", runtime="command")
    binary = "/opt/hidden/bin/claude"
    # Bound to its host first: binding drops a verdict of the server's own probe.
    token, _ = machines.mint("build-host-7", ["secret-bot"])
    Agent.objects.filter(pk="secret-bot").update(
        health_ok=False, health_detail=f"{binary}: no such file"
    )
    beats.beat_remote(token.pk, token.host, 42, {"agents": ["secret-bot"], "running": []})

    anonymous = client.get("/healthz")
    text = anonymous.content.decode()
    for secret in ("secret-bot", "build-host-7", binary, "/opt/hidden"):
        assert secret not in text
    agents = anonymous.json()["parts"]["agents"]
    assert agents == {"ok": False, "detail": "1 unhealthy, 0 paused"}

    # A member's token or an agent's side sees no more than anyone.
    member = get_user_model().objects.create_user("mia")
    registry.add_member("default", member)
    as_member = client.get(
        "/healthz", HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=member).key}"
    )
    assert "secret-bot" not in as_member.content.decode()
    registry.create_agent(id="other-bot", display_name="O", team="default", runtime="command")
    _, machine_key = machines.mint("other-host", ["other-bot"])
    as_machine = client.get("/healthz", HTTP_AUTHORIZATION=f"Token {machine_key}")
    assert "build-host-7" not in as_machine.content.decode()

    staff = get_user_model().objects.create_user("root", is_staff=True)
    settings.CLAWBOO_METRICS_TOKEN = "scrape-me"
    for headers in (
        {"HTTP_AUTHORIZATION": f"Token {Token.objects.create(user=staff).key}"},
        {"HTTP_AUTHORIZATION": "Bearer scrape-me"},
    ):
        body = client.get("/healthz", **headers).json()
        assert body["parts"]["agents"]["unhealthy"][0]["id"] == "secret-bot"
        assert binary in body["parts"]["agents"]["unhealthy"][0]["detail"]
        assert [w["host"] for w in body["remote_workers"]] == ["build-host-7"]
    client.force_login(staff)
    assert "build-host-7" in client.get("/healthz").content.decode()
