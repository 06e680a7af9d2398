"""Twelve OS processes claim one task over HTTP through the real ASGI server:
exactly one 200, eleven 409 ``conflict``."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from core import registry

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = """
import json, os, sys, time, urllib.request, urllib.error
base, key, task, agent, barrier = sys.argv[1:6]
open(f"{barrier}.{agent}", "w").close()  # parked at the barrier
while not os.path.exists(barrier):
    time.sleep(0.005)
request = urllib.request.Request(
    f"{base}/api/board/tasks/{task}/claim", data=json.dumps({"agent_id": agent}).encode(),
    headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    method="POST")
try:
    with urllib.request.urlopen(request, timeout=60) as response:
        print(json.dumps({"status": response.status, "body": json.loads(response.read())}))
except urllib.error.HTTPError as err:
    print(json.dumps({"status": err.code, "body": json.loads(err.read())}))
"""


def test_twelve_processes_claiming_over_http_get_one_200(daphne, tmp_path):
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    key = Token.objects.create(user=user).key
    for i in range(12):
        registry.create_agent(
            id=f"bot-{i}", display_name=f"Bot {i}", team="default", runtime="human", owner=user
        )
    task = store.create_task(title="Only one of you").task
    base = daphne({"CLAWBOO_HTTP_RATE_LIMIT": "0"})
    barrier = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, base, key, task.id, f"bot-{i}", str(barrier)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(12)
    ]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go.*"))) < 12:  # every client parked at the barrier
        assert time.monotonic() < deadline, "clients did not start"
        time.sleep(0.01)
    barrier.touch()
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    statuses = sorted(r["status"] for r in results)
    assert statuses == [200] + [409] * 11
    assert all(r["body"]["error"] == "conflict" for r in results if r["status"] == 409)
    winner = next(r for r in results if r["status"] == 200)
    task = store.get_task(task.id)
    assert task.assignee_agent_id == winner["body"]["task"]["assignee_agent_id"]
    assert task.attempts == 1
