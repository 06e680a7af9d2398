"""Deleting an agent while a claim of it races, on two threads (two connections):
the delete succeeds or answers its refusal, the claim is claimed or refused, never a
500, and never a task naming a deleted agent."""

from __future__ import annotations

import threading

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from board import store as board
from board.models import Task
from core import registry
from core.models import Agent
from ops.admin import RemovableAgentAdmin

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_claim_racing_the_agents_delete_page_leaves_one_outcome_and_no_500(monkeypatch):
    people = get_user_model().objects
    owner = people.create_user("owner", password="pw")
    registry.update_team("default", members=[owner])
    registry.create_agent(
        id="ada",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=owner,
    )
    task = board.create_task(title="free work", team="default").task
    key = Token.objects.create(user=owner).key
    operator = Client()
    operator.force_login(people.create_superuser("op", "op@example.com", "pw"))

    counted, claim_sent = threading.Event(), threading.Event()
    claim_answer: list[int] = []
    original = RemovableAgentAdmin.get_deleted_objects

    def count_then_let_the_claim_race(self, objs, request):
        answer = original(self, objs, request)
        if request.method == "POST":
            counted.set()
            # The claim commits here on PostgreSQL; on SQLite it waits for the page's
            # write lock, and runs against the committed delete.
            claim_sent.wait(0.5)
        return answer

    monkeypatch.setattr(RemovableAgentAdmin, "get_deleted_objects", count_then_let_the_claim_race)

    def claim() -> None:
        try:
            counted.wait(10)
            answer = Client().post(
                f"/api/board/tasks/{task.id}/claim",
                {"agent_id": "ada"},
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Token {key}",
            )
            claim_answer.append(answer.status_code)
        finally:
            claim_sent.set()
            connection.close()

    racer = threading.Thread(target=claim)
    racer.start()
    try:
        deleted = operator.post("/admin/clawboo/agent/ada/delete/", {"post": "yes"})
    finally:
        counted.set()
        racer.join(15)
    assert deleted.status_code == 302
    assert claim_answer and claim_answer[0] in (200, 401, 404)
    gone = not Agent.objects.filter(pk="ada").exists()
    held = Task.objects.get(pk=task.id).assignee_agent_id
    if gone:
        assert held is None and claim_answer[0] != 200
        assert LogEntry.objects.count() == 1
    else:
        assert held == "ada" and claim_answer[0] == 200
        assert not LogEntry.objects.exists()
