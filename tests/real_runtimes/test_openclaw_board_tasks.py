"""Acceptance (issue 31): an ordinary board task routed to an ``openclaw`` agent is
worked by the executor over the real OpenClaw Gateway (2026.9.6) -- one succeeded
execution with the agent's reply as the task's output; a hung run is aborted inside
the gateway and recorded ``timed_out``."""

from __future__ import annotations

import time

import pytest

from board import store
from board.models import ExecutionProcess
from core import registry
from executor.runner import Executor
from tests.real_runtimes.gateway import READ_WRITE, GatewayClient, GatewayProcess
from tests.real_runtimes.hermetic import GATEWAY_TOKEN
from tests.real_runtimes.model_server import HANG_MARKER, ModelServer

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]


@pytest.fixture
def claw(settings, gateway: GatewayProcess) -> str:
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = gateway.url
    settings.CLAWBOO_OPENCLAW_TOKEN = GATEWAY_TOKEN
    registry.ensure_team("default")
    # No OpenClaw agent_id setting: the gateway's default agent (main) runs it.
    return registry.create_agent(
        id="claw", display_name="Claw", team="default", runtime="openclaw"
    ).id


def gateway_says_ended(gateway: GatewayProcess, run_id: str) -> tuple[dict, list[dict]]:
    """``agent.wait`` for the run, and its rows in the gateway's task list once they
    left queued/running (the gateway settles its ledger after agent.wait answers)."""
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


def test_an_ordinary_task_routed_to_an_openclaw_agent_is_worked_over_the_gateway(
    claw: str, gateway: GatewayProcess, gateway_model: ModelServer
) -> None:
    (gateway.workspace / "hello.txt").unlink(missing_ok=True)
    task = store.create_task(title="Write hello.txt", route={"agent": claw}).task

    report = Executor(claw).work_once()

    assert report.outcome == "succeeded", report.error
    done = store.get_task(task.id)
    assert done.status == "done"
    assert done.output["summary"] == "DONE: wrote the file."
    [execution] = ExecutionProcess.objects.filter(task_id=task.id)
    # A run that went well has no error class (blank).
    assert (execution.status, execution.runtime, execution.error_class) == (
        "succeeded",
        "openclaw",
        "",
    )
    assert (gateway.workspace / "hello.txt").read_text() == "hello from the fake model\n"


def test_a_hung_openclaw_task_run_is_aborted_in_the_gateway_and_timed_out(
    claw: str, gateway: GatewayProcess, gateway_model: ModelServer
) -> None:
    # The run's watchdog: the agent's timeout_s (a cold gateway takes seconds to
    # reach the model, so not much less).
    registry.update_agent(claw, {"settings": {"timeout_s": 20}})
    task = store.create_task(
        title="Write hello.txt", description=HANG_MARKER, route={"runtime": "openclaw"}
    ).task

    report = Executor(claw).work_once()

    assert report.outcome == "timed_out", report.error
    [execution] = ExecutionProcess.objects.filter(task_id=task.id)
    assert (execution.status, execution.error_class) == ("timed_out", "timeout")
    assert "aborted in the gateway" in execution.error
    assert store.get_task(task.id).status == "todo"  # the agent's failure: back in the queue
    assert "hang" in gateway_model.replies()
    # The run's id in the gateway is its idempotency key: this task, this execution.
    waited, rows = gateway_says_ended(gateway, f"clawboo:{task.id}:{execution.id}")
    # Ended by the abort (an adapter's run, like test_openclaw_routines' one, keeps no
    # row in the gateway's task list; agent.wait is the gateway's word on it).
    assert (waited["status"], waited["stopReason"]) == ("error", "rpc"), (waited, rows)
    assert all(row["status"] == "cancelled" for row in rows)
