"""What only a routine's fire writes -- its task ids ``rt-<routine>-<slot>`` and the
``metadata.routine_id`` / ``slot_at`` marks -- nobody writes through the API: an
agent that took a future slot's id failed that fire (TaskIdTaken), and one that
marked its own work with a routine's id spent that routine's cap budget."""

from __future__ import annotations

import pytest

from board import store
from board.models import Task

pytestmark = pytest.mark.django_db


def test_a_routine_fires_id_and_marks_are_refused_from_the_api_and_nothing_is_written(api):
    before = Task.objects.count()
    for body, field in (
        ({"title": "squat", "id": "rt-nightly-1893456000000"}, "id"),
        ({"title": "bill it", "metadata": {"routine_id": "nightly"}}, "metadata.routine_id"),
        ({"title": "bill it", "metadata": {"slot_at": 1}}, "metadata.slot_at"),
    ):
        refused = api.post("/api/board/tasks", body, format="json")
        assert refused.status_code == 400, refused.content[:300]
        assert refused.json()["field"] == field
    assert Task.objects.count() == before
    mine = store.create_task(title="mine").task
    marked = api.patch(
        f"/api/board/tasks/{mine.id}", {"metadata": {"routine_id": "nightly"}}, format="json"
    )
    assert marked.status_code == 400 and marked.json()["field"] == "metadata.routine_id"
    assert store.get_task(mine.id).metadata == mine.metadata


def test_a_fired_task_keeps_its_marks_through_an_edit(api):
    fired = store.create_task(
        id="rt-nightly-1", title="fired", metadata={"routine_id": "nightly", "slot_at": 1}
    ).task
    edited = api.patch(
        f"/api/board/tasks/{fired.id}",
        {"metadata": {"routine_id": "nightly", "slot_at": 1, "note": "looked at"}},
        format="json",
    )
    assert edited.status_code == 200, edited.content[:300]
    assert edited.json()["metadata"]["routine_id"] == "nightly"
