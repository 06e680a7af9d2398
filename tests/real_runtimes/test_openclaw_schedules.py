"""Acceptance, through the project's own code paths: ``/api/schedules`` against the
real OpenClaw Gateway (2026.9.6) -- its cron listed with status ``ok``, and a
runtime-own-life schedule created, paused, resumed, run now and deleted."""

from __future__ import annotations

import uuid

import pytest

from tests.api.conftest import make_client
from tests.real_runtimes.gateway import ALL_SCOPES, GatewayClient, GatewayProcess
from tests.real_runtimes.hermetic import GATEWAY_TOKEN

pytestmark = [pytest.mark.real_runtimes, pytest.mark.django_db, pytest.mark.timeout(240)]

SOURCE = "openclaw-gateway-cron"


@pytest.fixture
def api(db, settings, gateway: GatewayProcess):
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = gateway.url
    settings.CLAWBOO_OPENCLAW_TOKEN = GATEWAY_TOKEN
    return make_client("ada", staff=True)


def gateway_source(view: dict) -> dict:
    return next(s for s in view["sources"] if s["name"] == SOURCE)


def test_the_gateways_cron_is_listed_with_status_ok(api) -> None:
    response = api.get("/api/schedules")

    assert response.status_code == 200
    view = response.json()
    assert gateway_source(view)["status"] == "ok", gateway_source(view)
    rows = [r for r in view["schedules"] if r["id"].startswith(f"{SOURCE}:")]
    assert rows and all(r["domain"] == "runtime-own-life" for r in rows)


def test_a_runtime_own_life_schedule_is_created_paused_resumed_run_and_deleted(
    api, gateway: GatewayProcess
) -> None:
    name = f"clawboo-{uuid.uuid4().hex[:8]}"
    created = api.post(
        "/api/schedules",
        {
            "source": SOURCE,
            "name": name,
            "schedule": {"kind": "every", "everyMs": 3_600_000},
            "sessionTarget": "isolated",
            "wakeMode": "now",
            "payload": {"kind": "agentTurn", "message": "Say hi."},
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    sid = created.json()["id"]
    native = sid.split(":", 1)[1]
    with GatewayClient(gateway.url, scopes=ALL_SCOPES) as client:
        [job] = [
            j
            for j in client.request("cron.list", {"includeDisabled": True})["jobs"]
            if j["id"] == native
        ]
    assert job["name"] == name
    assert job["delivery"] == {"mode": "none"}  # no channel: announce would fail closed

    paused = api.patch(f"/api/schedules/{sid}", {"action": "pause"}, format="json")
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    resumed = api.patch(f"/api/schedules/{sid}", {"action": "resume"}, format="json")
    assert resumed.status_code == 200 and resumed.json()["enabled"] is True
    ran = api.post(f"/api/schedules/{sid}/run")
    assert ran.status_code in (200, 202), ran.json()
    assert api.delete(f"/api/schedules/{sid}").status_code == 204
    listed = api.get("/api/schedules").json()["schedules"]
    assert sid not in [r["id"] for r in listed]


def test_an_openclaw_agent_run_through_the_adapter_reports_the_agents_reply(
    settings, gateway: GatewayProcess, tmp_path
) -> None:
    from executor.runtimes import RunRequest, adapter_for
    from executor.runtimes.base import UsageSoFar

    streamed: list[UsageSoFar] = []
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = gateway.url
    settings.CLAWBOO_OPENCLAW_TOKEN = GATEWAY_TOKEN
    (gateway.workspace / "hello.txt").unlink(missing_ok=True)
    result = adapter_for("openclaw").run(
        RunRequest(
            task_id=f"t-{uuid.uuid4().hex[:6]}",
            title="Write hello.txt",
            prompt="Write hello.txt",
            cwd=tmp_path,
            timeout_s=120,
            on_usage=streamed.append,
        )
    )
    assert result.outcome == "succeeded", result.error
    assert result.summary == "DONE: wrote the file."
    assert result.tokens_in and result.tokens_out
    # The gateway streamed the run's output tokens while it went (what the per-run
    # ceiling is fed), one running total a model turn, ending at the final figure.
    outputs = [u.tokens_out for u in streamed]
    assert len(outputs) >= 2 and outputs == sorted(outputs)
    assert outputs[-1] == result.tokens_out
    assert {u.model for u in streamed} == {result.model}
    assert (gateway.workspace / "hello.txt").read_text() == "hello from the fake model\n"
