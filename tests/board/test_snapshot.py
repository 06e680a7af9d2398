"""The task body is declared once (board.snapshot): API answers and task-change
events show the same shape, and the claim's event shows the claimed task."""

from __future__ import annotations

import pytest

from board import snapshot, store
from board.models import Task
from core import events
from core.models import Event, Team

pytestmark = pytest.mark.django_db


def body_from_python(task_id: str) -> dict:
    return store.get_task(task_id).as_dict(depends_on=store.depends_on_ids(task_id))


def test_the_body_names_every_key_of_the_declared_shape(default_team):
    task = store.create_task(title="t").task
    assert list(task.as_dict()) == [key for key, _column, _kind in snapshot.FIELDS]


def test_a_claim_writes_its_event_with_the_claimed_task_as_the_api_shows_it(default_team):
    task = store.create_task(title="work", labels=["b", "a"], metadata={"k": "v"}).task
    before = events.latest_seq(default_team)
    result = store.claim(task.id, "ada", "command")
    assert result.ok
    event = Event.objects.get(team_id=default_team, seq=before + 1)
    assert event.kind == "claimed" and event.task_id == task.id and event.prev_status == "todo"
    expected = body_from_python(task.id)
    assert event.payload == {
        "task": expected,
        "prev_status": "todo",
        "revision": expected["revision"],
    }
    assert expected["status"] == "in_progress" and expected["assignee_agent_id"] == "ada"
    assert Team.objects.get(pk=default_team).last_event_seq == before + 1


def test_claim_next_events_keep_the_team_sequence_gap_free(default_team):
    for i in range(5):
        store.create_task(title=f"t{i}")
    store.add_comment(store.create_task(title="other").task.id, "note", "ada")
    start = events.latest_seq(default_team)
    for _ in range(5):
        assert store.claim_next("ada") is not None
    seqs = list(
        Event.objects.filter(team_id=default_team, seq__gt=start).values_list("seq", flat=True)
    )
    assert seqs == list(range(start + 1, start + 6))


def test_the_task_a_claim_returns_equals_the_orms_after_the_claim(default_team):
    parent = store.create_task(title="parent").task
    store.complete(parent.id, {"ok": True}, ticket=store.claim(parent.id, "ada").ticket)
    task = store.create_task(
        title="claim me",
        labels=["x"],
        metadata={"k": [1, None]},
        input={"a": 1},
        depends_on=[parent.id],
        max_attempts=3,
    ).task
    claimed = store.claim_next("bob", runtime="codex").task
    assert claimed is not None and claimed.id == task.id
    orm = Task.objects.get(pk=task.id)
    for field in Task._meta.concrete_fields:
        assert getattr(claimed, field.attname) == getattr(orm, field.attname), field.attname
    assert claimed._state.adding is False and claimed._state.db == orm._state.db
    assert claimed.pk == orm.pk and claimed == orm
    claimed.title = "renamed"
    claimed.save(update_fields=["title"])  # a usable instance, as the ORM's is
    assert Task.objects.get(pk=task.id).title == "renamed"
