"""Acceptance, through the project's own code paths: connected routine fires and an
``openclaw`` adapter run against the real OpenClaw Gateway (2026.9.6) -- a fire that
completes with the agent's reply captured, and a watchdog timeout that aborts the run
inside the gateway (``agent.wait`` and the gateway's task list say it ended) and is
recorded as timed out."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest

from board import store as board_store
from core import registry
from routines import store
from routines.models import Routine, RoutineFire
from routines.ticker import Ticker
from tests.real_runtimes.gateway import READ_WRITE, GatewayClient, GatewayProcess
from tests.real_runtimes.hermetic import GATEWAY_TOKEN
from tests.real_runtimes.model_server import HANG_MARKER, ModelServer

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

WATCHDOG_MS = 10_000  # a cold gateway takes seconds to reach the model


@pytest.fixture
def connected(settings, gateway: GatewayProcess) -> GatewayProcess:
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = gateway.url
    settings.CLAWBOO_OPENCLAW_TOKEN = GATEWAY_TOKEN
    return gateway


@pytest.fixture
def claw(team: str) -> str:
    # No OpenClaw agent_id setting: the gateway's default agent (main) runs it.
    return registry.create_agent(id="claw", display_name="Claw", team=team, runtime="openclaw").id


def fire_routine(claw: str, clock, template: dict) -> RoutineFire:
    routine = store.create_routine(
        agent_id=claw, team="ops", cron_spec="0 * * * *", task_template=template
    )
    clock.shift(dt.timedelta(hours=1))
    Ticker().tick()
    return RoutineFire.objects.get(routine_id=routine.id)


def gateway_says_ended(gateway: GatewayProcess, run_id: str) -> tuple[dict, list[dict]]:
    """``agent.wait`` for the run and its rows in the gateway's task list.

    The gateway settles its task ledger after ``agent.wait`` has answered (the abort
    is recorded when the run's loop unwinds), so the list is read until the run's rows
    have left ``queued``/``running`` or ten seconds have passed."""
    with GatewayClient(gateway.url, scopes=READ_WRITE) as client:
        waited = client.request("agent.wait", {"runId": run_id, "timeoutMs": 5000})
        deadline = time.monotonic() + 10
        while True:
            listed = client.request("tasks.list", {})["tasks"]
            rows = [t for t in listed if t.get("runId") == run_id]
            settled = all(t.get("status") not in ("queued", "running") for t in rows)
            if settled or time.monotonic() > deadline:
                return waited, rows
            time.sleep(0.2)


def test_a_connected_routine_fire_completes_with_the_agents_reply(
    connected: GatewayProcess,
    gateway_model: ModelServer,
    claw: str,
    clock,
) -> None:
    (connected.workspace / "hello.txt").unlink(missing_ok=True)
    fired = fire_routine(claw, clock, {"kind": "chat", "title": "Write hello.txt"})

    assert (fired.outcome, fired.error) == ("completed", None)
    task = board_store.get_task(fired.task_id)
    assert task.status == "done"
    assert task.output["summary"] == "DONE: wrote the file."
    assert task.output["run_id"] == f"clawboo-{fired.routine_id}-{fired.slot_at}"
    routine = Routine.objects.get(pk=fired.routine_id)
    assert (routine.status, routine.last_error) == ("idle", None)
    assert (connected.workspace / "hello.txt").read_text() == "hello from the fake model\n"
    assert gateway_model.replies()[-2:] == ["tool_call:write", "text"]


def test_the_watchdog_aborts_a_hung_fire_in_the_gateway_and_records_a_timeout(
    settings,
    connected: GatewayProcess,
    gateway_model: ModelServer,
    claw: str,
    clock,
) -> None:
    settings.CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS = WATCHDOG_MS
    fired = fire_routine(
        claw, clock, {"kind": "chat", "title": "Write hello.txt", "description": HANG_MARKER}
    )

    routine = Routine.objects.get(pk=fired.routine_id)
    assert routine.status == "error" and routine.next_run_at is None
    assert routine.last_error.startswith(
        "openclaw run timed out after 10s; aborted in the gateway"
    ), routine.last_error
    assert (fired.outcome, fired.error) == ("error", routine.last_error)
    assert board_store.get_task(fired.task_id).status == "todo"  # released, not leaked
    assert "hang" in gateway_model.replies()  # it really was the model that hung
    waited, tasks = gateway_says_ended(connected, f"clawboo-{routine.id}-{fired.slot_at}")
    assert (waited["status"], waited["stopReason"]) == ("error", "rpc")
    assert [t["status"] for t in tasks] == ["cancelled"]


def test_an_adapter_run_past_its_timeout_is_aborted_in_the_gateway_and_timed_out(
    connected: GatewayProcess, gateway_model: ModelServer, tmp_path
) -> None:
    from executor.runtimes import RunRequest, adapter_for

    task_id = f"t-{uuid.uuid4().hex[:6]}"
    result = adapter_for("openclaw").run(
        RunRequest(
            task_id=task_id,
            title="Hang",
            prompt=f"{HANG_MARKER} Write hello.txt",
            cwd=tmp_path,
            timeout_s=6,
            attempt_id="a1",
        )
    )
    assert result.outcome == "timed_out", result.error
    assert "aborted in the gateway" in result.error
    waited, tasks = gateway_says_ended(connected, f"clawboo:{task_id}:a1")
    assert (waited["status"], waited["stopReason"]) == ("error", "rpc"), (waited, tasks)
