"""Routine fixtures: a team, agents of each integration class, and a clock to drive."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from core import registry
from core.models import Agent

START = dt.datetime(2030, 1, 7, 8, 0, tzinfo=dt.UTC)


@pytest.fixture
def clock():
    """A frozen wall clock the test moves explicitly (no sleeps)."""
    with time_machine.travel(START, tick=False) as traveller:
        yield traveller


@pytest.fixture
def team(db: None) -> str:
    registry.ensure_team("ops", "Ops")
    return "ops"


@pytest.fixture
def agent(team: str) -> Agent:
    # A command agent that succeeds at once: a one-shot fire runs the executor for real.
    # Fires hold several tasks at once; the limit has tests of its own.
    return registry.create_agent(
        id="ada",
        display_name="Ada",
        team=team,
        runtime="command",
        settings={"argv": ["true"]},
        max_concurrent=100,
    )


@pytest.fixture
def openclaw_agent(team: str) -> Agent:
    return registry.create_agent(
        id="claw", display_name="Claw", team=team, runtime="openclaw", max_concurrent=100
    )


@pytest.fixture
def human_agent(team: str) -> Agent:
    return registry.create_agent(
        id="hal",
        display_name="Hal",
        team=team,
        runtime="human",
        participant_kind="human",
        max_concurrent=100,
    )
