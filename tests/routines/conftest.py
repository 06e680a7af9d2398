"""Routine fixtures: agents of each integration class (the team and the clock are
``tests.fixtures.routines``)."""

from __future__ import annotations

import pytest

from core import registry
from core.models import Agent


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
