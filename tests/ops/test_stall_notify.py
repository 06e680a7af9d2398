"""A run that prints nothing for CLAWBOO_STALL_MS (issue 45): the team's webhook hears
one ``run_stalled`` notification naming the run, however long it then stays silent."""

from __future__ import annotations

import json

import pytest

from board import store
from core import registry
from executor.runner import Executor
from ops import notify

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_silent_run_sends_one_run_stalled_webhook(receiver, tmp_path, settings, monkeypatch):
    settings.CLAWBOO_STATE_DIR = tmp_path
    monkeypatch.setenv("CLAWBOO_STALL_MS", "300")
    notify.create_channel("default", "hook", "webhook", url=receiver.url)
    registry.create_agent(
        id="mute", display_name="Mute", team="default", runtime="command",
        settings={"argv": ["sleep", "1.5"]},
    )  # fmt: skip
    task = store.create_task(title="say nothing", file_mutating=False).task

    report = Executor("mute", heartbeat_s=0.2).work_once()

    assert report.task_id == task.id and report.outcome == "succeeded", report
    stalled = [json.loads(r["body"]) for r in receiver.received]
    stalled = [body for body in stalled if body["reason"] == "run_stalled"]
    assert len(stalled) == 1, receiver.received
    body = stalled[0]
    assert body["event"]["kind"] == "run_stalled" and task.id in body["summary"]
    assert body["run"]["execution_id"] == report.execution_id
    assert body["run"]["agent_id"] == "mute" and body["run"]["silent_s"] >= 0.3
    assert "said nothing" in body["summary"]
