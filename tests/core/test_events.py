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
def test_a_listener_hears_a_claim_after_commit(default_team):
    registry.ensure_team("other")
    heard: list[Event] = []
    events.subscribe(heard.append)
    try:
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

    with pytest.raises(RuntimeError):
        events.append(default_team, "claimed", {})
    assert events.latest_seq(default_team) == 0


@pytest.mark.django_db
def test_a_change_frame_names_who_made_it_and_watch_never_pins_it_on_the_assignee(
    default_team,
):
    from clawboo.people import frame_line
    from core.live import frames_for

    task, _ = task_in("in_review", title="Add divide()")  # claimed by the agent "ada"
    store.add_comment(task.id, "looks good", "bob")
    store.transition(task.id, "blocked")  # nobody named: the event does not say who
    *_, commented, blocked = Event.objects.filter(task_id=task.id).order_by("seq")

    said = frames_for(commented)[0]
    assert (said["type"], said["actor"]) == ("task-change", "bob")
    assert " by bob: Add divide()" in str(frame_line(said))
    unnamed = frames_for(blocked)[0]
    assert unnamed["actor"] is None
    assert " by " not in str(frame_line(unnamed))
