"""The task body is declared once (board.snapshot) and produced two ways: in Python
for API answers, in SQL for the claim's event. Both must give the same JSON."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import connection
from django.utils import timezone

from board import snapshot, store
from board.models import Task
from core import events
from core.models import Event, Team
from tests.board.states import task_in

pytestmark = pytest.mark.django_db


def body_from_sql(task_id: str) -> dict:
    sql = f"SELECT {snapshot.body_sql(connection.vendor, 't')} FROM tasks t WHERE t.id = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [task_id])
        value = cursor.fetchone()[0]
    return json.loads(value) if isinstance(value, str) else value


def body_from_python(task_id: str) -> dict:
    return store.get_task(task_id).as_dict(depends_on=store.depends_on_ids(task_id))


def tasks_in_every_shape() -> list[str]:
    plain = store.create_task(title="plain").task
    rich = store.create_task(
        title='Ünïcode — "quotes" and \\ backslash ✓',
        description="line one\nline two\ttab",
        labels=["zeta", "alpha", "ß"],
        metadata={"n": 3, "nested": {"list": [1, 2.5, None, True]}, "s": "x"},
        input={"files": ["a.py"], "deep": {"k": False}},
        priority=7,
        max_attempts=4,
        depends_on=[plain.id],
    ).task
    store.create_task(title="child of two", depends_on=[rich.id, plain.id])
    claimed, _ticket = task_in("in_progress")
    failed, ticket = task_in("in_progress")
    store.set_verdict(failed.id, "fail", "3 tests red")
    overridden, ticket2 = task_in("in_progress")
    store.set_verdict(overridden.id, "fail", "lint red")
    store.complete(
        overridden.id, {"ok": 1}, ticket=ticket2, human_override={"by": "g", "reason": "ok"}
    )
    # Whole-second stamps: isoformat() drops the fraction, and so must the SQL.
    whole = store.create_task(title="whole seconds").task
    Task.objects.filter(pk=whole.id).update(
        created_at=timezone.now().replace(microsecond=0),
        updated_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
    )
    return [t.id for t in Task.objects.all()]


def test_the_sql_body_equals_the_python_body_for_tasks_in_every_shape(default_team):
    ids = tasks_in_every_shape()
    assert len(ids) == 7
    for task_id in ids:
        assert body_from_sql(task_id) == body_from_python(task_id), task_id


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
    assert result.task._snapshot == expected  # what the API answers with
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


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements")
def test_a_prepared_claim_survives_a_column_added_by_a_later_migration(default_team):
    for i in range(8):
        store.create_task(title=f"t{i}")
    for _ in range(6):  # past prepare_threshold: the claim is now a prepared statement
        assert store.claim_next("ada") is not None
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks
        cursor.execute("ALTER TABLE tasks ADD COLUMN added_later integer")
    assert store.claim_next("ada") is not None


def test_a_task_rebuilt_from_its_body_equals_the_orms_for_tasks_in_every_shape(default_team):
    ids = tasks_in_every_shape()
    attnames = {field.attname for field in Task._meta.concrete_fields}
    for task_id in ids:
        orm = store.get_task(task_id)
        values = snapshot.fields_from_body(body_from_sql(task_id))
        assert set(values) | set(snapshot.BEYOND_BODY) == attnames
        for name, value in values.items():
            assert value == getattr(orm, name), (task_id, name)


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


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(2026, 11, 30, 22, 1, 2, 345678, tzinfo=dt.UTC),
        dt.datetime(2026, 11, 30, 22, 1, 2, tzinfo=dt.UTC),  # a zero fraction
        dt.datetime(2026, 11, 30, 23, 1, 2, 5, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        dt.datetime(2026, 11, 30, 22, 1, 2),  # naive
        None,
    ],
    ids=["utc", "utc-whole-second", "other-zone", "naive", "none"],
)
def test_the_claim_s_stamps_are_stored_as_django_stores_them(value, settings):
    # db_time's shortcut for UTC stamps on SQLite must give Django's own answer.
    from board.store._base import db_time

    settings.USE_TZ = value is None or value.tzinfo is not None
    assert db_time(value, connection) == connection.ops.adapt_datetimefield_value(value)
