"""Notifications when a decision waits for a person (issue 34): work filed that needs
approval, or sent back to it by an edit, sends one signed webhook; deciding sends none."""

from __future__ import annotations

import json

import pytest

from board import store
from ops import notify

pytestmark = pytest.mark.django_db(transaction=True)


def test_delegated_work_waiting_for_approval_sends_one_webhook(receiver):
    notify.create_channel("default", "hook", "webhook", url=receiver.url)
    task = store.create_task(title="Rotate the keys", created_by_agent_id="planner").task

    assert len(receiver.received) == 1
    body = json.loads(receiver.received[0]["body"])
    assert body["reason"] == "approval"
    assert body["task"]["id"] == task.id
    assert body["task"]["approval"]["state"] == "required"
    assert "waits for your approval" in body["summary"]

    store.decide_approval(task.id, "approve", by="ada")
    assert len(receiver.received) == 1  # a decision is not a decision waiting

    store.update_task(task.id, {"title": "Rotate every key"})
    assert len(receiver.received) == 2  # sent back to a person by the edit
    assert json.loads(receiver.received[1]["body"])["reason"] == "approval"


def test_work_a_person_files_plainly_notifies_nobody(receiver):
    notify.create_channel("default", "hook", "webhook", url=receiver.url)
    store.create_task(title="Plain")
    assert receiver.received == []
