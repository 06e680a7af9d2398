"""The team chat says who did what, and when: a person's create and moves are theirs,
an agent's claim is the agent's, and an unattributed settle names nobody."""

from __future__ import annotations

import datetime as dt

import pytest

from board import store

pytestmark = pytest.mark.django_db


def chat(api) -> list[dict]:
    response = api.get("/api/teams/default/chat?limit=20")
    assert response.status_code == 200
    return list(reversed(response.json()))  # oldest first


def test_a_persons_create_and_moves_are_narrated_as_theirs(api):
    task = api.post("/api/board/tasks", {"title": "Fix login"}, format="json").json()
    for to in ("backlog", "cancelled"):
        moved = api.post(f"/api/board/tasks/{task['id']}/transition", {"to": to}, format="json")
        assert moved.status_code == 200
    lines = chat(api)
    assert [line["body"] for line in lines] == [
        "ada created 'Fix login'",
        "ada moved 'Fix login' to backlog",
        "ada cancelled 'Fix login'",
    ]
    assert {line["actor"] for line in lines} == {"ada"}
    for line in lines:
        at = dt.datetime.fromisoformat(line["created_at"])
        assert abs((dt.datetime.now(dt.UTC) - at).total_seconds()) < 60


def test_an_agents_claim_is_the_agents_and_an_unattributed_settle_names_nobody(api, agent):
    task = store.create_task(title="Ship it").task
    assert store.claim(task.id, agent.id).ok
    store.complete(task.id)
    lines = chat(api)
    assert [(line["actor"], line["body"]) for line in lines] == [
        (None, "Created 'Ship it'"),
        (agent.id, f"{agent.id} claimed 'Ship it'"),
        (None, "Completed 'Ship it'"),
    ]


def test_a_persons_approval_of_work_in_review_reads_approved_not_completed(api, agent):
    task = store.create_task(title="Ship it", file_mutating=False).task
    assert store.claim(task.id, agent.id).ok
    store.await_review(task.id)
    store.approve(task.id, by="ada")
    assert chat(api)[-1]["body"] == "ada approved 'Ship it'"  # was "ada completed 'Ship it'"


def test_a_person_chatting_is_the_lines_actor(api):
    posted = api.post("/api/teams/default/chat", {"body": "hello"}, format="json")
    assert posted.status_code == 201
    assert chat(api)[-1]["actor"] == "ada"
