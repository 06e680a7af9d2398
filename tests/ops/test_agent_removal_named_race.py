"""A write that names an agent (a task's route, a routine) racing that agent's
delete, on two threads (two connections): either the write finds the agent gone and
is refused as naming an unknown agent, or the delete counts it and is refused; never
a task or routine naming a deleted agent."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db.models import Q

from board import store as board
from board.models import Task
from core import registry
from core.errors import ClawbooError, ValidationFailed
from core.models import Agent
from ops import agent_removal
from routines import store as routines
from routines.models import Routine

pytestmark = pytest.mark.django_db(transaction=True)


def an_agent(agent_id: str) -> None:
    registry.create_agent(
        id=agent_id,
        display_name=agent_id.title(),
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )


def route_on_create() -> Any:
    return board.create_task(title="for ada", route={"agent": "ada"})


def route_on_edit() -> Any:
    task = board.create_task(id="edited", title="for anyone").task
    return lambda: board.update_task(task.id, {"route": {"agent": "ada"}})


def routine_on_create() -> Any:
    return lambda: routines.create_routine(agent_id="ada", team="default", cron_spec="0 9 * * *")


def routine_on_edit() -> Any:
    routine = routines.create_routine(agent_id="bob", team="default", cron_spec="0 9 * * *")
    return lambda: routines.update_routine(routine.id, {"agent_id": "ada"})


def filer_on_create() -> Any:
    # As the REST and MCP doors file it, having found the agent in the registry.
    return board.create_task(title="by ada", created_by_agent_id="ada", registered=True)


def assignee_on_edit() -> Any:
    task = board.create_task(id="handed", title="for anyone").task
    return lambda: board.update_task(task.id, {"assignee_agent_id": "ada"}, registered=True)


# Each: set up (before the race), then the write that names "ada".
WRITES: dict[str, Callable[[], Callable[[], Any]]] = {
    "a task's route, on create": lambda: route_on_create,
    "a task's route, on edit": route_on_edit,
    "a task's filer, on create": lambda: filer_on_create,
    "a task's assignee, on edit": assignee_on_edit,
    "a routine's agent, on create": routine_on_create,
    "a routine's agent, on edit": routine_on_edit,
}


def names_ada() -> bool:
    named = Q(route_agent_id="ada") | Q(created_by_agent_id="ada") | Q(assignee_agent_id="ada")
    return Task.objects.filter(named).exists() or Routine.objects.filter(agent_id="ada").exists()


@pytest.mark.parametrize("write", list(WRITES))
def test_a_write_naming_an_agent_while_its_delete_counts_never_names_a_deleted_agent(
    monkeypatch, write
):
    an_agent("ada")
    an_agent("bob")
    naming = WRITES[write]()

    counted, written = threading.Event(), threading.Event()
    outcome: list[Any] = []
    original = agent_removal.named_by

    def count_then_let_the_write_race(agent_id: str) -> Any:
        found = original(agent_id)
        if agent_id == "ada":
            counted.set()
            # The delete holds the agent's row here. A write that does not wait for it
            # commits now, after the count (PostgreSQL); one that does waits until the
            # delete commits, and finds no agent.
            written.wait(1.0)
        return found

    monkeypatch.setattr(agent_removal, "named_by", count_then_let_the_write_race)

    def name_ada() -> None:
        from django.db import connection

        try:
            counted.wait(10)
            try:
                naming()
                outcome.append("written")
            except ClawbooError as exc:
                outcome.append(exc)
        finally:
            written.set()
            connection.close()

    racer = threading.Thread(target=name_ada)
    racer.start()
    deleted: Any = None
    try:
        agent_removal.delete_agent("ada")
    except agent_removal.AgentStillNamed as exc:
        deleted = exc
    finally:
        counted.set()
        racer.join(15)
    assert outcome, "the write did not finish"
    gone = not Agent.objects.filter(pk="ada").exists()
    if gone:
        assert deleted is None
        assert isinstance(outcome[0], ValidationFailed), outcome
        assert not names_ada()
    else:
        assert isinstance(deleted, agent_removal.AgentStillNamed)
        assert outcome == ["written"] and names_ada()


@pytest.mark.parametrize("write", list(WRITES))
def test_a_delete_while_a_write_holds_the_agent_counts_that_write(monkeypatch, write):
    """The other order: the write locked the agent first, so the delete waits for it,
    counts what it wrote and is refused (still named)."""
    an_agent("ada")
    an_agent("bob")
    naming = WRITES[write]()

    locked, never = threading.Event(), threading.Event()
    original = registry.lock_agent

    def lock_then_let_the_delete_race(agent_id: str) -> Any:
        agent = original(agent_id)
        if agent_id == "ada":
            locked.set()
            # The delete, sent now, waits on this row (PostgreSQL) or the database's
            # write lock (SQLite) until this write commits.
            never.wait(0.5)
        return agent

    monkeypatch.setattr(registry, "lock_agent", lock_then_let_the_delete_race)
    refused: list[Any] = []

    def delete_ada() -> None:
        from django.db import connection

        try:
            locked.wait(10)
            try:
                agent_removal.delete_agent("ada")
                refused.append(None)
            except ClawbooError as exc:
                refused.append(exc)
        finally:
            connection.close()

    racer = threading.Thread(target=delete_ada)
    racer.start()
    try:
        naming()
    finally:
        locked.set()
        racer.join(15)
    assert refused and isinstance(refused[0], agent_removal.AgentStillNamed), refused
    assert Agent.objects.filter(pk="ada").exists() and names_ada()
