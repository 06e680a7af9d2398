"""Governance ends in a state a person sees, said once per cause, not a loop: the
local worker's own loop (``executor.workers.work_loop``) over an agent its breaker
pauses, and over a task a person denied. Each cause is one notification (the
store's) and one line of the worker's narration, however long the worker runs on."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from board import store
from board.models import ExecutionProcess
from core import registry, wakeups
from core.models import Event
from executor.runner import WorkReport
from executor.workers import work_loop
from ops import notify
from ops.models import NotificationDelivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def run_worker_for(agent_id: str, seconds: float) -> list[WorkReport]:
    """The local worker's loop for ``agent_id``, polling fast, for ``seconds``: what
    it narrated (its report callback, as ``manage.py work`` prints it)."""
    said: list[WorkReport] = []
    stop = threading.Event()
    loop = threading.Thread(
        target=work_loop, args=([agent_id], stop), kwargs={"poll_s": 0.05, "report": said.append}
    )
    loop.start()
    time.sleep(seconds)
    stop.set()
    wakeups.wake_all()
    loop.join(30)
    assert not loop.is_alive()
    return said


def test_a_breaker_pause_stops_the_local_worker_with_one_notification_and_one_line(
    default_team, settings
):
    settings.CLAWBOO_BREAKER_FAILURES = 3
    settings.CLAWBOO_HEALTH_PROBE_MS = 50
    notify.create_channel("default", "hook", "webhook", url="http://127.0.0.1:9/hook")
    registry.create_agent(
        id="broken",
        display_name="Broken",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    )
    ids = [store.create_task(title=f"t{n}", file_mutating=False).task.id for n in range(5)]

    said = run_worker_for("broken", 6.0)

    assert registry.get_agent("broken").state == "paused"
    assert ExecutionProcess.objects.count() == 3  # nothing run after the pause
    assert [r.outcome for r in said] == ["failed"] * 3 + ["refused"], [
        (r.outcome, r.error) for r in said
    ]
    assert "agent is paused" in (said[-1].error or "")
    # Where a person sees it: the agent paused, its tasks back in todo, one notification.
    assert {store.get_task(i).status for i in ids} == {"todo"}
    assert list(NotificationDelivery.objects.values_list("reason", flat=True)) == ["agent_paused"]


def test_a_denied_task_is_never_run_nor_announced_again_by_the_local_worker(default_team, settings):
    settings.CLAWBOO_HEALTH_PROBE_MS = 50
    registry.create_agent(
        id="ada",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
    task = store.create_task(title="risky", labels=["risk"], file_mutating=False).task
    store.decide_approval(task.id, "deny", by="op", reason="not now")

    said = run_worker_for("ada", 2.0)

    assert said == [] and ExecutionProcess.objects.count() == 0
    after = store.get_task(task.id)
    assert (after.status, after.approval_state) == ("todo", "denied")
    kinds = list(Event.objects.filter(task_id=task.id).values_list("kind", flat=True))
    assert kinds.count("approval_decided") == 1
