"""Which agents ``work --all`` runs on this server."""

from __future__ import annotations

import pytest

from core import machines, registry
from executor.management.commands.work import runnable_agents

pytestmark = pytest.mark.django_db


def _command_agent(agent_id: str) -> None:
    # ``true`` is on the default allowlist, so no operator approval is needed.
    registry.create_agent(
        id=agent_id, display_name=agent_id, team="default", runtime="command",
        settings={"argv": ["true"]},
    )  # fmt: skip


def test_an_agent_bound_to_a_live_machine_token_is_left_to_its_host_until_revoked(
    default_team,
):
    _command_agent("here")
    _command_agent("there")
    registry.create_agent(id="person", display_name="P", team="default", runtime="human")
    assert runnable_agents() == ["here", "there"]

    token, _key = machines.mint("gpu-1", ["there"])
    assert runnable_agents() == ["here"]

    assert machines.revoke(token.id)
    assert runnable_agents() == ["here", "there"]
