"""Bad input to the data layer raises a typed error and writes nothing (issue 2)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from django.db.models import Sum

from board import store
from board.errors import TaskNotFound
from board.models import ExecutionProcess, Task, TaskComment, TaskDep
from core.errors import ClawbooError, ValidationFailed
from core.models import Event, Team

pytestmark = pytest.mark.django_db


def snapshot() -> tuple[Any, ...]:
    """Everything a stray write would move: row counts, revisions, event sequence."""
    return (
        Task.objects.count(),
        TaskDep.objects.count(),
        TaskComment.objects.count(),
        ExecutionProcess.objects.count(),
        Event.objects.count(),
        Task.objects.aggregate(total=Sum("revision"))["total"],
        list(Team.objects.order_by("pk").values_list("pk", "last_event_seq")),
        list(Task.objects.order_by("pk").values_list("pk", "status", "assignee_agent_id")),
    )


@pytest.fixture
def board(default_team: str) -> dict[str, str]:
    todo = store.create_task(title="todo", id="todo-1").task
    held = store.create_task(title="held", id="held-1").task
    ticket = store.claim(held.id, "ada").ticket
    assert ticket is not None
    return {"todo": todo.id, "held": held.id, "ticket": ticket}


CASES: dict[str, tuple[type[ClawbooError], Callable[[dict[str, str]], Any]]] = {
    "unknown status": (ValidationFailed, lambda b: store.transition(b["todo"], "doing")),
    "create as done": (ValidationFailed, lambda b: store.create_task(title="x", status="done")),
    "list unknown status": (ValidationFailed, lambda b: list(store.list_tasks(status="nope"))),
    "missing title": (ValidationFailed, lambda b: store.create_task(title=None)),
    "blank title": (ValidationFailed, lambda b: store.create_task(title="   ")),
    "title too long": (ValidationFailed, lambda b: store.create_task(title="x" * 501)),
    "bad client id": (ValidationFailed, lambda b: store.create_task(title="x", id="../etc")),
    "unknown team": (ValidationFailed, lambda b: store.create_task(title="x", team="ghosts")),
    "unknown parent": (
        ValidationFailed,
        lambda b: store.create_task(title="x", parent_task_id="nope"),
    ),
    "unknown dependency": (
        ValidationFailed,
        lambda b: store.create_task(title="x", depends_on=[b["todo"], "nope"]),
    ),
    "priority not int": (ValidationFailed, lambda b: store.create_task(title="x", priority="9")),
    "labels not list": (ValidationFailed, lambda b: store.create_task(title="x", labels="a")),
    "unknown task id on transition": (TaskNotFound, lambda b: store.transition("nope", "done")),
    "unknown task id on complete": (TaskNotFound, lambda b: store.complete("nope")),
    "unknown task id on link": (TaskNotFound, lambda b: store.link("nope", b["todo"])),
    "unknown dependency on link": (TaskNotFound, lambda b: store.link(b["todo"], "nope")),
    "unknown task id on comment": (TaskNotFound, lambda b: store.add_comment("nope", "hi", "ada")),
    "negative lease": (ValidationFailed, lambda b: store.claim(b["todo"], "bob", lease_ms=-5)),
    "lease under a second": (ValidationFailed, lambda b: store.claim_next("bob", lease_ms=999)),
    "lease over 74 days": (
        ValidationFailed,
        lambda b: store.claim(b["todo"], "bob", lease_ms=75 * 86_400_000),
    ),
    "non-finite lease": (
        ValidationFailed,
        lambda b: store.claim(b["todo"], "bob", lease_ms=math.inf),
    ),
    "nan lease": (ValidationFailed, lambda b: store.claim(b["todo"], "bob", lease_ms=math.nan)),
    "negative renewal": (
        ValidationFailed,
        lambda b: store.renew_lease(b["held"], b["ticket"], lease_ms=-1),
    ),
    "bad agent id": (ValidationFailed, lambda b: store.claim(b["todo"], "")),
    "unknown dispatcher": (ValidationFailed, lambda b: store.claim_next("bob", dispatcher="lifo")),
    "forged ticket": (ValidationFailed, lambda b: store.complete(b["held"], ticket="forged")),
    "if_allowed not a bool": (
        ValidationFailed,
        lambda b: store.complete(b["held"], if_allowed="yes"),
    ),
    "fail without error": (ValidationFailed, lambda b: store.fail(b["held"], "")),
    "unknown verdict": (ValidationFailed, lambda b: store.set_verdict(b["held"], "meh")),
    "override without reason": (
        ValidationFailed,
        lambda b: store.transition(b["held"], "done", human_override={"by": "ops"}),
    ),
    "empty comment": (ValidationFailed, lambda b: store.add_comment(b["todo"], "", "ada")),
    "unknown execution outcome": (
        ValidationFailed,
        lambda b: store.close_execution(1, "exploded"),
    ),
    "negative tokens": (
        ValidationFailed,
        lambda b: store.close_execution(1, "succeeded", tokens_in=-1),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_raises_a_typed_error_and_writes_nothing(board, case):
    error, call = CASES[case]
    before = snapshot()
    with pytest.raises(error):
        call(board)
    assert snapshot() == before


def test_an_unknown_task_on_claim_is_not_found_data_not_a_write(board):
    before = snapshot()
    assert store.claim("nope", "bob").outcome == "not_found"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("label", "hidden"),
    [("gpu\u200b", "U+200B"), ("\u200b", "U+200B"), ("a\u202eb", "U+202E"), ("x\u2028y", "U+2028")],
)
def test_a_label_with_an_invisible_character_is_refused_naming_it(board, label, hidden):
    """A label of one zero-width space was an empty pill on the board, and a route's
    "gpu\u200b" (shown as "gpu") never matched an agent's "gpu". Tasks' labels, routes'
    and agents' follow one rule; an emoji's joiner is no such character."""
    from core import registry

    before = snapshot()
    for attempt in (
        lambda: store.create_task(title="t", labels=[label]),
        lambda: store.create_task(title="t", route={"labels": [label]}),
    ):
        with pytest.raises(ValidationFailed) as refused:
            attempt()
        assert f"holds an invisible character ({hidden})" in refused.value.detail
    with pytest.raises(ValidationFailed) as refused:
        registry.check_agent_labels([label])
    assert refused.value.field == "labels" and hidden in refused.value.detail
    assert snapshot() == before
    coder = "\U0001f469\u200d\U0001f4bb"  # woman technologist: joined by U+200D
    assert store.create_task(title="t", labels=[coder]).task.labels == [coder]
    assert registry.check_agent_labels([coder]) == [coder]
