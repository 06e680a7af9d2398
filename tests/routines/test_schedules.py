from __future__ import annotations

import datetime as dt
import socket

import pytest

from board import store as board_store
from executor import gateway
from executor.gateway import GatewayRejected, GatewayUnavailable
from routines import store
from routines.errors import (
    ObserveOnlyError,
    ScheduleNotFound,
    TeamTaskDomainViolationError,
)
from routines.models import Routine, RoutineFire
from routines.schedules import (
    ClawbooRoutineScheduleSource,
    OpenClawGatewayCronScheduleSource,
    ScheduleMultiplexer,
    SourceRead,
)
from routines.ticker import Ticker
from tests.routines.fake_gateway import FakeGateway

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake():
    server = FakeGateway()
    yield server
    server.close()


def source_for(fake: FakeGateway, timeout_s: float = 2.0) -> OpenClawGatewayCronScheduleSource:
    return OpenClawGatewayCronScheduleSource(
        gateway.GatewayConfig(fake.url, fake.token), timeout_s=timeout_s
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_gateway_cron_list_add_update_run_remove(fake):
    mux = ScheduleMultiplexer([ClawbooRoutineScheduleSource(), source_for(fake)])
    row = mux.create(
        "openclaw-gateway-cron",
        {
            "name": "heartbeat",
            "schedule": {"kind": "cron", "expr": "*/10 * * * *"},
            "sessionTarget": "main",
            "wakeMode": "now",
            "payload": {"text": "hi"},
        },
    )
    assert row.id == "openclaw-gateway-cron:job1" and row.domain == "runtime-own-life"
    assert row.spec == "*/10 * * * *"
    assert mux.update(row.id, {"action": "pause"}).enabled is False
    assert mux.run(row.id) == {"ran": True}
    view = mux.read()
    assert [s["status"] for s in view["sources"]] == ["ok", "ok"]
    assert [r["id"] for r in view["schedules"]] == [row.id]
    mux.delete(row.id)
    assert mux.read()["schedules"] == []
    with pytest.raises(GatewayRejected):
        mux.delete(row.id)
    connect = fake.requests[0]
    assert connect["method"] == "connect"
    params = connect["params"]
    assert params["role"] == "operator"
    assert (params["minProtocol"], params["maxProtocol"]) == (3, 4)
    assert "operator.admin" in params["scopes"]


def test_a_gateway_still_starting_is_retried_until_it_answers(fake):
    fake.starting_connects = 3
    with gateway.GatewayClient(gateway.GatewayConfig(fake.url, fake.token), timeout_s=5) as client:
        assert client.hello["protocol"] == 4
    assert [r["method"] for r in fake.requests] == ["connect"] * 4


@pytest.mark.timing
def test_a_gateway_that_keeps_starting_past_the_deadline_is_refused(fake):
    fake.starting_connects = 1000
    with pytest.raises(GatewayRejected) as info:
        gateway.GatewayClient(gateway.GatewayConfig(fake.url, fake.token), timeout_s=0.5).connect()
    assert info.value.extra["retryable"] is True


def test_team_task_creates_are_refused_at_both_walls(fake):
    source = source_for(fake)
    mux = ScheduleMultiplexer([ClawbooRoutineScheduleSource(), source])
    body = {"domain": "team-task", "name": "x"}
    with pytest.raises(TeamTaskDomainViolationError) as info:
        mux.create("openclaw-gateway-cron", body)
    assert info.value.code == "domain_violation"
    with pytest.raises(TeamTaskDomainViolationError):
        source.create({"task_template": {"title": "t"}})
    assert not [r for r in fake.requests if r["method"] == "cron.add"]


def test_a_down_gateway_degrades_and_writes_answer_503(agent, clock):
    down = OpenClawGatewayCronScheduleSource(
        gateway.GatewayConfig(f"ws://127.0.0.1:{free_port()}", "t"), timeout_s=1
    )
    store.create_routine(agent_id=agent.id, team=agent.team_id, cron_spec="0 * * * *")
    view = ScheduleMultiplexer([ClawbooRoutineScheduleSource(), down]).read()
    assert view["sources"][1]["status"] == "degraded" and view["sources"][1]["error"]
    assert [r["domain"] for r in view["schedules"]] == ["team-task"]
    with pytest.raises(GatewayUnavailable) as info:
        down.run("job1")
    assert info.value.code == "gateway_unavailable"


def test_an_unconfigured_gateway_reports_not_configured(settings):
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = ""
    read = OpenClawGatewayCronScheduleSource().read()
    assert (read.status, read.error) == ("degraded", "not configured")


def test_a_slow_gateway_read_times_out_and_serves_the_stale_cache(fake):
    source = source_for(fake, timeout_s=5)
    fake.jobs["job9"] = {
        "id": "job9",
        "name": "n",
        "enabled": True,
        "schedule": {"kind": "every", "everyMs": 60000},
        "state": {},
    }
    assert source.read().status == "ok"
    fake.silent_methods.add("cron.list")
    source.timeout_s = 0.3
    stale = source.read()
    assert stale.status == "degraded" and "in time" in stale.error
    assert [r.id for r in stale.rows] == ["openclaw-gateway-cron:job9"]


def test_a_source_that_raises_cannot_take_the_view_down():
    class Broken:
        name, domain, manageability = "broken", "team-task", "observe-only"

        def read(self) -> SourceRead:
            raise RuntimeError("boom")

    mux = ScheduleMultiplexer([Broken()])
    assert mux.read()["sources"][0]["status"] == "degraded"
    with pytest.raises(ObserveOnlyError):
        mux.create("broken", {})
    with pytest.raises(ScheduleNotFound):
        mux.update("nosuch:1", {})
    with pytest.raises(ScheduleNotFound):
        mux.update("garbage", {})


def test_routines_are_managed_through_the_multiplexer(agent, clock):
    mux = ScheduleMultiplexer([ClawbooRoutineScheduleSource()])
    row = mux.create(
        "clawboo-routine",
        {"agent_id": agent.id, "team": agent.team_id, "cron_spec": "0 * * * *"},
    )
    assert (row.domain, row.manageability) == ("team-task", "managed")
    assert mux.update(row.id, {"action": "pause"}).status == "paused"
    assert mux.update(row.id, {"action": "resume"}).status == "idle"
    assert mux.run(row.id)["status"] == "queued"


@pytest.mark.django_db(transaction=True)
def test_connected_dispatch_runs_over_the_gateway(fake, openclaw_agent, clock, settings):
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
    settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
    routine = store.create_routine(
        agent_id=openclaw_agent.id,
        team="ops",
        cron_spec="0 * * * *",
        task_template={"kind": "chat"},
    )
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    fired = RoutineFire.objects.get(routine_id=routine.id)
    assert fired.outcome == "completed"
    task = board_store.get_task(fired.task_id)
    assert task.status == "done" and task.output["summary"] == "done"
    agent_req = [r for r in fake.requests if r["method"] == "agent"][0]
    assert agent_req["params"]["sessionKey"] == f"clawboo-routine-{routine.id}"
    # No OpenClaw agent configured: the gateway's default agent, never the Clawboo id.
    assert "agentId" not in agent_req["params"]
    assert Routine.objects.get(pk=routine.id).status == "idle"


@pytest.mark.django_db(transaction=True)
def test_a_fire_names_the_agents_configured_openclaw_agent(team, clock, settings, fake):
    from core import registry

    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
    settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
    registry.create_agent(
        id="claw2",
        display_name="Claw",
        team=team,
        runtime="openclaw",
        settings={"agent_id": "main"},
    )
    routine = store.create_routine(agent_id="claw2", team=team, cron_spec="0 * * * *")
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    assert RoutineFire.objects.get(routine_id=routine.id).outcome == "completed"
    [agent_req] = [r for r in fake.requests if r["method"] == "agent"]
    assert agent_req["params"]["agentId"] == "main"


@pytest.mark.django_db(transaction=True)
def test_the_openclaw_watchdog_aborts_the_run_and_records_a_timeout(
    fake, openclaw_agent, clock, settings
):
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
    settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
    settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = 300
    fake.agent_delay_s = None  # hangs until aborted
    routine = store.create_routine(agent_id=openclaw_agent.id, team="ops", cron_spec="0 * * * *")
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    row = Routine.objects.get(pk=routine.id)
    assert row.status == "error"
    assert row.last_error.startswith("openclaw run timed out after 0.3s; aborted in the gateway")
    assert "watchdog 300 ms" in row.last_error
    fired = RoutineFire.objects.get(routine_id=routine.id)
    assert (fired.outcome, fired.error) == ("error", row.last_error)
    assert board_store.get_task(fired.task_id).status == "todo"  # released, not leaked
    [run] = fake.runs.values()
    assert run.status == "aborted"  # ended in the gateway, not left running there


def test_the_openclaw_runtime_adapter_runs_an_agent_through_the_gateway(fake, settings, tmp_path):
    """A board task run by an ``openclaw`` agent goes through the same gateway client."""
    from executor.runtimes import RunRequest, adapter_for

    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
    settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
    request = RunRequest(
        task_id="t1",
        title="Summarise",
        prompt="Summarise the day",
        cwd=tmp_path,
        timeout_s=5,
        settings={"agent_id": "main"},
    )
    result = adapter_for("openclaw").run(request)
    # The reply is in result.payloads; "completed" is the gateway's word, not the agent's.
    assert result.outcome == "succeeded" and result.summary == "done"
    assert (result.tokens_in, result.tokens_out) == (120, 7)
    fake.agent_delay_s = 3.0
    slow = adapter_for("openclaw").run(
        RunRequest(task_id="t2", title="Slow", prompt="x", cwd=tmp_path, timeout_s=0.5)
    )
    assert slow.outcome == "timed_out"
    assert "timed out after 0.5s; aborted in the gateway" in slow.error
    assert [r.status for r in fake.runs.values()] == ["ok", "aborted"]


def test_the_openclaw_runtime_adapter_aborts_a_cancelled_run(fake, settings, tmp_path):
    import threading

    from executor.runtimes import RunRequest, adapter_for

    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
    settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
    fake.agent_delay_s = None
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    result = adapter_for("openclaw").run(
        RunRequest(task_id="t3", title="Hang", prompt="x", cwd=tmp_path, timeout_s=60),
        cancel=cancel,
    )
    assert result.outcome == "cancelled"
    [run] = fake.runs.values()
    assert run.status == "aborted"
