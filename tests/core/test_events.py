"""The per-team event log (issue 3): written in the mutation's transaction, with a
monotonic per-team sequence, delivered only after commit; and comments."""

from __future__ import annotations

import pytest

from board import store
from board.errors import VerificationRequired
from core import events, registry, storage
from core.models import Event
from tests.board.states import task_in


def kinds(task_id: str) -> list[str]:
    return list(
        Event.objects.filter(task_id=task_id).order_by("seq").values_list("kind", flat=True)
    )


@pytest.mark.django_db
def test_each_mutation_records_its_event_with_the_next_team_seq(default_team):
    task = store.create_task(title="t").task
    got = store.claim(task.id, "ada")
    store.add_label(task.id, "urgent")
    store.complete(task.id, ticket=got.ticket)
    assert kinds(task.id) == ["added", "claimed", "label_changed", "completed"]
    rows = list(Event.objects.filter(team_id="default").order_by("seq"))
    assert [e.seq for e in rows] == list(range(1, len(rows) + 1))
    completed = rows[-1]
    assert completed.prev_status == "in_progress"
    assert completed.payload["task"]["status"] == "done"
    assert completed.payload["revision"] == store.get_task(task.id).revision
    assert [e.seq for e in events.since("default", 2)] == [3, 4]


@pytest.mark.django_db
def test_sequences_are_per_team(default_team):
    registry.ensure_team("other")
    store.create_task(title="a")
    store.create_task(title="b", team="other")
    store.create_task(title="c", team="other")
    assert events.latest_seq("default") == 1
    assert events.latest_seq("other") == 2


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_write_leaves_no_event_and_delivers_nothing(default_team):
    delivered: list[Event] = []
    events.subscribe(delivered.append)
    try:
        task = store.create_task(title="t").task
        # Delivered after commit (the chat narration of it is an event of its own).
        assert [e.kind for e in delivered if e.kind != "chat"] == ["added"]

        def blocked_then_broken() -> None:
            store.transition(task.id, "blocked")
            raise RuntimeError("something after the write failed")

        with pytest.raises(RuntimeError):
            storage.write(blocked_then_broken)
        held, _ = task_in("in_progress")
        store.set_verdict(held.id, "fail")
        with pytest.raises(VerificationRequired):
            store.complete(held.id)
    finally:
        events.unsubscribe(delivered.append)
    assert store.get_task(task.id).status == "todo"
    assert [k for k in kinds(task.id) if k != "chat"] == ["added"]
    assert "completed" not in kinds(held.id)
    assert "blocked" not in [e.kind for e in delivered]
    seqs = list(Event.objects.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # no gap from the rolled-back write


@pytest.mark.django_db
def test_comments_keep_their_author_and_order_and_emit_an_event(default_team):
    task = store.create_task(title="t").task
    store.add_comment(task.id, "first", "ada")
    store.add_comment(task.id, "second", "bob")
    assert [(c.author, c.body) for c in store.list_comments(task.id)] == [
        ("ada", "first"),
        ("bob", "second"),
    ]
    assert kinds(task.id).count("commented") == 2


@pytest.mark.django_db(transaction=True)
def test_a_listener_hears_a_claim_after_commit_only_for_teams_it_wants(default_team):
    registry.ensure_team("other")
    heard: list[Event] = []
    events.subscribe(heard.append, wants=lambda team: team == "other")
    try:
        store.create_task(title="here")
        store.claim_next("ada", team="default")
        assert heard == []  # nobody wants "default": no Event is even built
        task = store.create_task(title="there", team="other").task
        got = store.claim_next("ada", team="other")
        assert [e.kind for e in heard] == ["added", "claimed"]
        claimed = heard[-1]
        assert claimed.seq == events.latest_seq("other")
        assert claimed.payload["task"] == got.task.as_dict(depends_on=[])
        assert claimed.payload["task"]["id"] == task.id
    finally:
        events.unsubscribe(heard.append)


@pytest.mark.django_db(transaction=True)
def test_an_event_outside_a_write_transaction_is_refused(default_team):
    from django.utils import timezone

    with pytest.raises(RuntimeError):
        events.append_texts(
            [events.TextEvent(default_team, "claimed", None, None, "{}", timezone.now())]
        )
    assert events.latest_seq(default_team) == 0


def _queued_behind_the_team_sequence(team: str, write) -> None:
    """``write`` (in a thread of its own) waits while this thread holds the team's
    PostgreSQL sequence queue, and completes once it is released."""
    import threading

    from django.db import connection, connections, transaction

    done: list[object] = []

    def run() -> None:
        try:
            done.append(write())
        finally:
            connections.close_all()  # this thread's own connection

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(events._SEQ_QUEUE.format(team="%s"), [team])
        racer = threading.Thread(target=run)
        racer.start()
        racer.join(0.5)
        assert racer.is_alive()  # queued behind this transaction
    racer.join(10)
    assert done


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("write", ["claim", "create"])
def test_postgres_writers_queue_for_their_team_sequence_on_one_lock(default_team, write):
    """Every taker of the team's sequence row queues on the team's advisory lock
    first — the claim (whose waiters the queue wakes one at a time, not as a herd)
    and every other write — so the two locks are always taken in one order."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the sequence queue is PostgreSQL's")
    task = store.create_task(title="t").task
    before = events.latest_seq(default_team)
    if write == "claim":
        _queued_behind_the_team_sequence(default_team, lambda: store.claim(task.id, "ada"))
        written = Event.objects.get(task_id=task.id, kind="claimed")
    else:
        made = []
        _queued_behind_the_team_sequence(
            default_team, lambda: made.append(store.create_task(title="u").task)
        )
        written = Event.objects.get(task_id=made[0].id, kind="added")
    assert written.seq == before + 1


@pytest.mark.django_db(transaction=True)
def test_a_batch_of_text_events_takes_each_team_s_next_numbers_in_order(default_team):
    # The claim combiner's batch: one sequence bump per team, the rows in order.
    from django.db import connection
    from django.utils import timezone

    from board.store._base import db_time

    registry.ensure_team("other")
    store.create_task(title="a")  # the default team's event 1
    stored = db_time(timezone.now(), connection)
    teams = ["default", "other", "default", "other", "other"]
    rows = [
        events.TextEvent(team, "claimed", None, "todo", f'{{"n": {n}}}', stored)
        for n, team in enumerate(teams)
    ]
    seqs = storage.driver_write(events.append_texts, rows)
    assert seqs == [2, 1, 3, 2, 3]
    assert events.latest_seq("default") == 3 and events.latest_seq("other") == 3
    written = Event.objects.filter(kind="claimed").values_list("team_id", "seq", "payload")
    assert sorted((team, seq, payload["n"]) for team, seq, payload in written) == [
        ("default", 2, 0),
        ("default", 3, 2),
        ("other", 1, 1),
        ("other", 2, 3),
        ("other", 3, 4),
    ]


@pytest.mark.django_db(transaction=True)
def test_text_events_of_an_unknown_team_write_nothing(default_team):
    from django.db import connection
    from django.utils import timezone

    from board.store._base import db_time

    row = events.TextEvent("nope", "claimed", None, None, "{}", db_time(timezone.now(), connection))
    with pytest.raises(LookupError):
        storage.driver_write(events.append_texts, [row])
    assert not Event.objects.filter(kind="claimed").exists()
