"""Routing and limits in the claim statement itself (GOVERNANCE §1-2)."""

from __future__ import annotations

import pytest

from board import store
from core import registry
from core.errors import ValidationFailed
from core.models import Agent, Team

pytestmark = pytest.mark.django_db


def agent(agent_id: str, runtime: str = "command", *, team: str = "default", **extra) -> Agent:
    return registry.create_agent(
        id=agent_id, display_name=agent_id.title(), team=team, runtime=runtime, **extra
    )


def test_claim_next_passes_over_tasks_routed_elsewhere(default_team):
    agent("ada", labels=["gpu"], max_concurrent=10)
    agent("bob", "codex", max_concurrent=10)
    for_bob = store.create_task(title="bob's", route={"agent": "bob"}).task
    for_codex = store.create_task(title="codex's", route={"runtime": "codex"}).task
    for_gpu_ssd = store.create_task(title="gpu+ssd", route={"labels": ["gpu", "ssd"]}).task
    for_gpu = store.create_task(title="gpu", route={"labels": ["gpu"]}).task
    anyone = store.create_task(title="anyone").task

    took = [store.claim_next("ada").task.id for _ in range(2)]
    assert took == [for_gpu.id, anyone.id]
    assert store.claim_next("ada") is None

    assert store.claim_next("bob").task.id == for_bob.id
    assert store.claim_next("bob").task.id == for_codex.id
    assert store.claim_next("bob") is None
    assert store.get_task(for_gpu_ssd.id).status == "todo"


def test_claim_of_a_task_routed_elsewhere_is_not_routed_and_writes_nothing(default_team):
    agent("ada")
    agent("bob")
    task = store.create_task(title="bob's", route={"agent": "bob"}).task

    result = store.claim(task.id, "ada")

    assert result.outcome == "not_routed" and "bob" in result.detail
    fresh = store.get_task(task.id)
    assert (fresh.status, fresh.assignee_agent_id, fresh.revision) == ("todo", None, 1)
    assert store.claim(task.id, "bob").ok


def test_a_route_names_an_agent_of_the_tasks_team(default_team):
    registry.ensure_team("blue")
    agent("blue-bot", team="blue")
    with pytest.raises(ValidationFailed) as refused:
        store.create_task(title="t", route={"agent": "blue-bot"})
    assert refused.value.field == "route.agent"
    task = store.create_task(title="t").task
    with pytest.raises(ValidationFailed) as refused:
        store.update_task(task.id, {"route": {"agent": "blue-bot"}})
    assert refused.value.field == "route.agent"
    with pytest.raises(ValidationFailed) as refused:
        store.create_task(title="t", route={"runtime": "cobol"})
    assert refused.value.field == "route.runtime"


def test_an_edited_route_shows_in_the_body_and_steers_the_claim(default_team):
    agent("ada", labels=["docs"])
    task = store.create_task(title="t", route={"labels": ["gpu"]}).task
    assert task.as_dict()["route"] == {"agent": None, "runtime": None, "labels": ["gpu"]}
    assert store.claim(task.id, "ada").outcome == "not_routed"

    edited = store.update_task(task.id, {"route": {"labels": ["docs"]}})
    assert edited.as_dict()["route"]["labels"] == ["docs"]
    assert store.claim(task.id, "ada").ok
    cleared = store.create_task(title="u", route={}).task
    assert cleared.as_dict()["route"] is None


def test_an_agent_never_claims_another_teams_task(default_team):
    registry.ensure_team("blue")
    agent("ada")
    blue = store.create_task(title="blue work", team="blue").task

    assert store.claim(blue.id, "ada").outcome == "not_found"
    assert store.claim_next("ada", team=["blue", "default"]) is None
    assert store.claim_next("ada") is None
    assert store.get_task(blue.id).status == "todo"


def test_an_agent_holds_at_most_its_max_concurrent(default_team):
    agent("ada", max_concurrent=2)
    tasks = [store.create_task(title=f"t{i}").task for i in range(4)]

    assert store.claim_next("ada").ok and store.claim_next("ada").ok
    assert store.claim_next("ada") is None  # claim-next passes
    refused = store.claim(tasks[3].id, "ada")
    assert refused.outcome == "limit_reached" and "max_concurrent (2)" in refused.detail

    held = store.get_task(tasks[0].id)
    store.complete(held.id, {"ok": True}, ticket=store.ticket_of(held))
    assert store.claim(tasks[3].id, "ada").ok


def test_the_default_limit_is_one_task(default_team):
    ada = agent("ada")
    assert ada.max_concurrent == 1
    store.create_task(title="a")
    store.create_task(title="b")
    assert store.claim_next("ada").ok
    assert store.claim_next("ada") is None


def test_a_team_limit_counts_all_its_agents(default_team):
    Team.objects.filter(pk="default").update(max_concurrent=2)
    for name in ("ada", "bob", "cy"):
        agent(name)
    tasks = [store.create_task(title=f"t{i}").task for i in range(3)]

    assert store.claim_next("ada").ok and store.claim_next("bob").ok
    assert store.claim_next("cy") is None
    assert store.claim(tasks[2].id, "cy").outcome == "limit_reached"


def test_a_paused_or_unhealthy_agent_claims_nothing(default_team):
    agent("ada")
    task = store.create_task(title="t").task
    Agent.objects.filter(pk="ada").update(state="paused", state_reason="by hand")
    paused = store.claim(task.id, "ada")
    assert paused.outcome == "agent_paused" and "by hand" in paused.detail
    assert store.claim_next("ada").outcome == "agent_paused"

    Agent.objects.filter(pk="ada").update(state="active", health_ok=False, health_detail="gone")
    assert store.claim(task.id, "ada").outcome == "agent_paused"
    assert store.get_task(task.id).status == "todo"


def test_refusals_come_in_the_order_governance_fixes(default_team):
    agent("ada", max_concurrent=1)
    agent("bob")
    store.create_task(title="held")
    assert store.claim_next("ada").ok  # ada is now at her limit
    routed = store.create_task(title="bob's", route={"agent": "bob"}).task
    free = store.create_task(title="free").task

    assert store.claim("nope", "ada").outcome == "not_found"
    assert store.claim(routed.id, "ada").outcome == "not_routed"  # before limit_reached
    assert store.claim(free.id, "ada").outcome == "limit_reached"  # before conflict
    Agent.objects.filter(pk="ada").update(state="paused")
    assert store.claim(routed.id, "ada").outcome == "agent_paused"  # before not_routed
    assert store.claim("nope", "ada").outcome == "not_found"  # before agent_paused


def test_a_refused_claim_says_why_the_task_is_not_claimable(default_team):
    """A claim of a blocked task said "someone else holds it, or it is not ready": a
    person looked for a holder there was none of. It says which: held by whom, in which
    status, or waiting on which dependencies."""
    agent("ada")
    agent("bob")
    first = store.create_task(title="first").task
    second = store.create_task(title="second", depends_on=[first.id]).task
    waiting = store.claim(second.id, "ada")
    assert waiting.outcome == "conflict"
    assert waiting.detail == (
        f"task {second.id!r} waits on its dependencies: {first.id} not done yet"
    )
    assert store.claim(first.id, "ada").ok
    held = store.claim(first.id, "bob")
    assert held.outcome == "conflict"
    assert (
        held.detail == f"task {first.id!r} is held by ada (in_progress): never retry, claim another"
    )
    parked = store.create_task(title="parked", status="backlog").task
    assert store.claim(parked.id, "bob").detail == (
        f"task {parked.id!r} is backlog: only a todo task is claimed (move it to todo first)"
    )
    # No way to todo from review (approve it or send it back): no such advice.
    store.transition(first.id, "in_review")
    assert store.claim(first.id, "bob").detail == (
        f"task {first.id!r} is in_review: only a todo task is claimed"
    )
