"""claim_next's fixed statements: each dispatcher order, team scope and label."""

from __future__ import annotations

import pytest

from board import store
from core import registry

pytestmark = pytest.mark.django_db


def test_a_todo_task_someone_was_assigned_does_not_stop_the_queue(default_team):
    held = store.create_task(title="oldest, pre-assigned").task
    store.set_assignee(held.id, "ada")
    free = store.create_task(title="next").task

    result = store.claim_next("bob")

    assert result is not None and result.task.id == free.id
    assert store.claim_next("bob") is None  # the assigned one is not claimable


@pytest.mark.parametrize("dispatcher", ["topological", "fifo", "priority"])
def test_each_dispatcher_claims_in_its_own_order(default_team, dispatcher):
    low = store.create_task(title="old, low", priority=0).task
    high = store.create_task(title="new, high", priority=5).task

    first = store.claim_next("bob", dispatcher=dispatcher).task

    assert first.id == (high.id if dispatcher == "priority" else low.id)


def test_claim_next_keeps_to_the_teams_it_is_given(default_team):
    registry.ensure_team("blue")
    registry.ensure_team("green")
    store.create_task(title="default work")
    blue = store.create_task(title="blue work", team="blue").task
    green = store.create_task(title="green work", team="green").task

    assert store.claim_next("bob", team="blue").task.id == blue.id
    assert store.claim_next("bob", team=["blue"]) is None
    assert store.claim_next("bob", team=["blue", "green"]).task.id == green.id
    assert store.claim_next("bob", team=[]) is None


def test_claim_next_with_a_label_claims_only_labelled_tasks(default_team):
    store.create_task(title="plain")
    tagged = store.create_task(title="tagged", labels=["backend", "ß"]).task

    assert store.claim_next("bob", label="ß").task.id == tagged.id
    assert store.claim_next("bob", label="backend") is None
    assert store.claim_next("bob").task.title == "plain"


def test_a_label_asked_for_with_spaces_matches_as_it_is_stored(default_team):
    # Labels are stored trimmed; the filter is the checked (trimmed) label, not the raw one.
    tagged = store.create_task(title="tagged", labels=[" backend"]).task
    store.create_task(title="plain")

    assert tagged.labels == ["backend"]
    assert store.claim_next("bob", label="backend  ").task.id == tagged.id


def test_the_claimed_task_and_its_ticket_name_the_claim(default_team):
    task = store.create_task(title="t", labels=["x"], metadata={"k": [1, None]}).task

    result = store.claim_next("bob", runtime="codex", lease_ms=60_000)

    claimed = result.task
    assert claimed.id == task.id and claimed.status == "in_progress"
    assert (claimed.assignee_agent_id, claimed.assignee_runtime) == ("bob", "codex")
    assert claimed.labels == ["x"] and claimed.metadata == {"k": [1, None]}
    assert claimed.lease_duration_ms == 60_000 and claimed.lease_until > claimed.started_at
    assert store.Ticket.decode(result.ticket) == store.Ticket.for_task(claimed)
