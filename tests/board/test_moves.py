"""No move leaves a task in_progress without a live claim, and every road back to
todo makes it claimable: a walk over every move a person can make (API, admin,
board page), from every status, two moves deep."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from board import store
from board.errors import ClaimRequired
from core import registry
from core.errors import ClawbooError
from tests.board.states import task_in

STATUSES = ["backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"]


# What a person can ask for, by name: none carries a claim ticket (that is an agent's).
def _to(status: str) -> Callable[[str], Any]:
    return lambda tid: store.transition(tid, status)


OVERRIDE = {"by": "op", "reason": "ok"}
HUMAN_MOVES: dict[str, Callable[[str], Any]] = {
    **{f"transition:{to}": _to(to) for to in STATUSES},
    "transition:in_progress+agent": lambda tid: store.transition(
        tid, "in_progress", agent_id="bob"
    ),
    "block": lambda tid: store.block(tid, "parked"),
    "unblock": lambda tid: store.unblock(tid),
    "cancel": lambda tid: store.cancel(tid),
    "complete": lambda tid: store.complete(tid, human_override=OVERRIDE),
    "fail": lambda tid: store.fail(tid, "broke"),
    "release": lambda tid: store.release(tid),
    "resume_from_review": lambda tid: store.resume_from_review(tid, "again"),
    "resume_from_review+agent": lambda tid: store.resume_from_review(tid, "again", agent_id="bob"),
    "request_changes": lambda tid: store.request_changes(tid, "again", by="op"),
    "request_changes+agent": lambda tid: store.request_changes(
        tid, "again", by="op", agent_id="bob"
    ),
    "approve": lambda tid: store.approve(tid, by="op", human_override={"by": "op", "reason": "ok"}),
}


def _holds(task_id: str, how: str) -> None:
    task = store.get_task(task_id)
    if task.status == "in_progress":
        assert task.assignee_agent_id, f"{how}: in_progress with nobody assigned"
        assert task.lease_until is not None and task.lease_until > store.now(), (
            f"{how}: in_progress without a live lease"
        )
    if task.status == "todo":
        assert (task.assignee_agent_id, task.assignee_runtime, task.verdict) == (
            None,
            None,
            None,
        ), f"{how}: back in todo but not claimable"


@pytest.mark.django_db
@pytest.mark.parametrize("start", STATUSES)
def test_no_human_move_leaves_in_progress_without_a_claim(default_team, start):
    # Each walk holds many tasks in progress at once: no limit in the way.
    registry.create_agent(
        id="ada", display_name="Ada", team="default", runtime="command", max_concurrent=1000
    )
    registry.create_agent(
        id="bob", display_name="Bob", team="default", runtime="human", max_concurrent=1000
    )
    moved_into_progress = 0
    for first, do_first in HUMAN_MOVES.items():
        task, _ticket = task_in(start, title=f"{start} {first}")
        if start in ("in_progress", "in_review", "blocked"):
            store.set_verdict(task.id, "fail", "red")  # todo must clear it
        try:
            do_first(task.id)
        except ClaimRequired:
            assert first in ("transition:in_progress", "resume_from_review")
            assert store.get_task(task.id).status == start  # refused, nothing written
            continue
        except ClawbooError:
            continue
        _holds(task.id, f"{start} -{first}->")
        moved_into_progress += store.get_task(task.id).status == "in_progress"
        for second, do_second in HUMAN_MOVES.items():
            before = store.get_task(task.id)
            try:
                do_second(task.id)
            except ClawbooError:
                continue
            _holds(task.id, f"{start} -{first}-> {before.status} -{second}->")
            # Put it back where the first move left it, for the next second move.
            task, _ticket = task_in(start, title=f"{start} {first} again")
            try:
                do_first(task.id)
            except ClawbooError:
                break
    if start in ("todo", "in_review", "blocked"):
        assert moved_into_progress, "the walk never reached in_progress"


@pytest.mark.django_db
def test_a_hard_fail_returns_and_narrates_the_cancelled_dependents_after_itself(default_team):
    from core.chat import narration_for
    from core.models import Event

    blocker = store.create_task(title="Blocker").task
    child = store.create_task(title="Child", depends_on=[blocker.id]).task
    grandchild = store.create_task(title="Grandchild", depends_on=[child.id]).task
    assert store.claim(blocker.id, "ada").ok
    outcome = store.fail(blocker.id, "exploded")
    assert outcome.task.status == "blocked"
    assert outcome.cancelled == (child.id, grandchild.id)
    assert outcome.as_dict()["cancelled"] == [child.id, grandchild.id]
    events = list(Event.objects.filter(team_id="default").order_by("seq"))
    kinds = [(e.kind, e.task_id) for e in events][-3:]
    assert kinds == [("errored", blocker.id), ("cancelled", child.id), ("cancelled", grandchild.id)]
    lines = [narration_for(e) for e in events[-3:]]
    assert lines[0].startswith("'Blocker' failed")
    assert lines[1] == f"Cancelled 'Child': dependency {blocker.id!r} failed"


@pytest.mark.django_db
@pytest.mark.parametrize("to", ["backlog", "todo"])
def test_a_blocked_task_moved_back_loses_its_old_error(default_team, to):
    task = store.create_task(title="Parked").task
    assert store.claim(task.id, "ada").ok
    store.fail(task.id, "exploded")
    assert store.get_task(task.id).error == "exploded"
    store.transition(task.id, to)
    moved = store.get_task(task.id)
    assert (moved.status, moved.error) == (to, None)
