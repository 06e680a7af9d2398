"""The OpenClaw Gateway client's agent runs against the fake gateway: the reply, and
a run the watchdog or a cancel ends is aborted in the gateway (a run outlives its
client's connection there) and reported as timed out or cancelled."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from executor import gateway
from executor.gateway import AgentRun, GatewayClient, GatewayConfig, abort_run, run_agent
from tests.routines.fake_gateway import FakeGateway


def agent_params(**extra: str) -> dict[str, str]:
    return {"message": "Say hi", "idempotencyKey": f"k-{uuid.uuid4().hex[:8]}", **extra}


def ended_in_the_gateway(gateway_fake: FakeGateway, run_id: str) -> dict:
    """What ``agent.wait`` says of the run, asked on a connection of its own."""
    with GatewayClient(GatewayConfig(gateway_fake.url, gateway_fake.token)) as client:
        return client.request("agent.wait", {"runId": run_id, "timeoutMs": 100})


def test_a_run_replies_with_the_agents_text_and_the_canonical_session(gateway_fake) -> None:
    params = agent_params(sessionKey="clawboo-task-T1")
    reply = run_agent(params, request_id="r1", watchdog_s=5)

    assert (reply.status, reply.summary) == ("ok", "done")
    assert reply.run_id == params["idempotencyKey"]
    assert reply.session_key == "agent:main:clawboo-task-t1"
    assert (reply.tokens_in, reply.tokens_out) == (120, 7)
    assert ended_in_the_gateway(gateway_fake, reply.run_id)["status"] == "ok"


def test_the_watchdog_aborts_the_run_in_the_gateway_and_reports_a_timeout(gateway_fake) -> None:
    gateway_fake.agent_delay_s = None  # the model hangs
    params = agent_params(sessionKey="clawboo-hang")
    reply = run_agent(params, request_id="r1", watchdog_s=0.5)

    assert reply.status == "timeout"
    assert "timed out after 0.5s; aborted in the gateway" in reply.error
    [abort] = [r for r in gateway_fake.requests if r["method"] == "chat.abort"]
    assert abort["params"] == {
        "sessionKey": "agent:main:clawboo-hang",
        "runId": params["idempotencyKey"],
    }
    assert gateway_fake.runs[params["idempotencyKey"]].status == "aborted"
    waited = ended_in_the_gateway(gateway_fake, params["idempotencyKey"])
    assert (waited["status"], waited["stopReason"]) == ("error", "rpc")


@pytest.mark.timing
def test_a_cancel_aborts_the_run_promptly(gateway_fake) -> None:
    gateway_fake.agent_delay_s = None
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    params = agent_params(sessionKey="clawboo-cancel")
    started = time.monotonic()
    reply = run_agent(params, request_id="r1", watchdog_s=60, cancel=cancel)

    assert time.monotonic() - started < 2
    assert reply.status == "cancelled" and "aborted in the gateway" in reply.error
    assert gateway_fake.runs[params["idempotencyKey"]].status == "aborted"


def test_a_run_sent_without_a_session_key_is_aborted_by_the_one_its_events_name(
    gateway_fake,
) -> None:
    gateway_fake.agent_delay_s = None
    params = agent_params()
    reply = run_agent(params, request_id="r1", watchdog_s=0.5)

    assert reply.status == "timeout" and "aborted in the gateway" in reply.error
    assert reply.session_key == f"agent:main:explicit:{params['idempotencyKey']}"
    assert gateway_fake.runs[params["idempotencyKey"]].status == "aborted"


def test_a_run_aborted_before_its_first_event_is_aborted_by_its_explicit_session(
    gateway_fake,
) -> None:
    gateway_fake.agent_delay_s, gateway_fake.agent_events = None, False
    params = agent_params()
    reply = run_agent(params, request_id="r1", watchdog_s=0.5)

    assert reply.status == "timeout" and "aborted in the gateway" in reply.error
    [abort] = [r for r in gateway_fake.requests if r["method"] == "chat.abort"]
    assert abort["params"]["sessionKey"] == f"explicit:{params['idempotencyKey']}"
    assert gateway_fake.runs[params["idempotencyKey"]].status == "aborted"


def test_a_run_whose_connection_is_gone_is_aborted_from_a_new_one(gateway_fake) -> None:
    """Another connection needs operator.admin, which the client asks for."""
    gateway_fake.agent_delay_s = None
    params = agent_params(sessionKey="clawboo-orphan")
    config = GatewayConfig(gateway_fake.url, gateway_fake.token)
    with GatewayClient(config) as client:
        client.send_json({"type": "req", "id": "r1", "method": "agent", "params": params})
        accepted = client.await_response("r1")
    run = AgentRun(run_id=params["idempotencyKey"], session_key=None, agent_id=None)
    run.note_accepted(accepted)
    assert gateway_fake.runs[run.run_id].status == "running"  # a run outlives its connection

    assert abort_run(None, config, run) == "aborted in the gateway"
    assert gateway_fake.runs[run.run_id].status == "aborted"
    assert abort_run(None, config, run) == "it had already ended in the gateway"


def test_a_refused_run_is_an_error_reply(gateway_fake) -> None:
    reply = run_agent(agent_params(agentId="claw"), request_id="r1", watchdog_s=5)
    assert reply.status == "error" and 'unknown agent id "claw"' in reply.error


def test_an_unconfigured_or_unreachable_gateway_is_an_error_reply(settings) -> None:
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = ""
    assert run_agent(agent_params(), request_id="r1", watchdog_s=1).error == (
        gateway.NOT_CONFIGURED
    )
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = "ws://127.0.0.1:9"
    reply = run_agent(agent_params(), request_id="r1", watchdog_s=1)
    assert reply.status == "error" and "unreachable" in reply.error
