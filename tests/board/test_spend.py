"""Spend rolled up: a task's own cost and its tree's, and budgets over scopes (team,
agent, routine, task tree) that notify at 80 % and 100 % once per window and pause
the claim when a cap is spent."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from board import store
from board.errors import BudgetPaused
from board.models import ExecutionProcess
from board.store import spend
from core.models import Event

pytestmark = pytest.mark.django_db


def run_costing(
    task_id: str, cents: int, agent: str = "ada", tokens: int = 100
) -> ExecutionProcess:
    """Claim ``task_id``, open a run, close it with ``cents`` reported, release it."""
    claimed = store.claim(task_id, agent, "command")
    assert claimed.ok, claimed.outcome
    run = store.open_execution(task_id, claimed.ticket)
    closed = store.close_execution(run.id, "failed", tokens_in=tokens, cost_cents=cents)
    store.release(task_id, ticket=claimed.ticket)
    return closed


def budget(scope_id: str = "default", **fields) -> int:
    body = {"scope": "team", "scope_id": scope_id, "window": "day", "limit_cents": 100}
    return spend.create_budget("default", {**body, **fields}).pk


def test_the_tree_cost_of_a_parent_is_its_own_and_its_childrens_runs(default_team):
    root = store.create_task(title="root").task
    child = store.create_task(title="child", parent_task_id=root.id).task
    grandchild = store.create_task(title="grandchild", parent_task_id=child.id).task
    run_costing(root.id, 5)
    run_costing(child.id, 7)
    run_costing(child.id, 11)  # a retry counts too
    run_costing(grandchild.id, 13)
    runs = {t: sum(e.cost_cents for e in store.list_executions(t)) for t in (root.id, child.id)}
    root_body = store.get_task(root.id).as_dict()["cost"]
    assert root_body["cents"] == runs[root.id] == 5
    assert root_body["tree_cents"] == 5 + 7 + 11 + 13
    assert root_body["tree_tokens"] == 400
    child_body = store.get_task(child.id).as_dict()["cost"]
    assert (child_body["cents"], child_body["tree_cents"]) == (18, 31)


def test_usage_streamed_then_a_lower_final_price_replaces_the_estimate(default_team):
    task = store.create_task(title="t").task
    claimed = store.claim(task.id, "ada", "command")
    run = store.open_execution(task.id, claimed.ticket)
    spend.record_usage(run.id, spend.Usage(tokens_in=10, cost_cents=9, cost_status="estimated"))
    assert store.get_task(task.id).cost_cents == 9
    store.close_execution(run.id, "succeeded", tokens_in=12, cost_cents=6)
    fresh = store.get_task(task.id)
    assert (fresh.cost_cents, fresh.tree_cost_cents, fresh.cost_tokens) == (6, 6, 12)
    assert ExecutionProcess.objects.get(pk=run.id).cost_status == "reported"


def test_crossings_notify_once_per_window_and_a_cap_pauses_the_claim(default_team):
    pk = budget(mode="cap")
    tasks = [store.create_task(title=f"t{i}").task for i in range(6)]
    run_costing(tasks[0].id, 50)
    assert Event.objects.filter(kind="budget_warning").count() == 0
    run_costing(tasks[1].id, 35)  # 85 %
    run_costing(tasks[2].id, 5)  # still over 80 %: no second warning
    assert Event.objects.filter(kind="budget_warning").count() == 1
    body = spend.get_budget(pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (90, "soft_capped")
    run_costing(tasks[3].id, 20)  # 110 %: exhausted, paused
    assert Event.objects.filter(kind="budget_exhausted").count() == 1
    body = spend.get_budget(pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (110, "paused")
    with pytest.raises(BudgetPaused):
        store.claim(tasks[4].id, "ada", "command").raise_for_outcome(tasks[4].id)
    refused = store.claim_next("ada", team="default")
    assert refused is not None and refused.outcome == "budget_paused"
    with pytest.raises(BudgetPaused):
        refused.raise_for_outcome("")
    assert store.get_task(tasks[4].id).status == "todo"
    # A new day is a new window: spent from nothing, no pause, crossings re-armed.
    with time_machine.travel(store.now() + dt.timedelta(days=1), tick=False):
        assert spend.get_budget(pk).as_dict(store.now())["status"] == "active"
        assert store.claim(tasks[4].id, "ada", "command").ok


def test_a_warn_budget_never_pauses(default_team):
    pk = budget(mode="warn")
    tasks = [store.create_task(title=f"t{i}").task for i in range(2)]
    run_costing(tasks[0].id, 150)
    assert spend.get_budget(pk).as_dict(store.now())["status"] == "soft_capped"
    assert store.claim(tasks[1].id, "ada", "command").ok


def test_a_paused_budget_resumed_with_grace_lets_exactly_the_grace_through(default_team):
    pk = budget(mode="cap")
    tasks = [store.create_task(title=f"t{i}").task for i in range(8)]
    run_costing(tasks[0].id, 100)
    assert spend.get_budget(pk).as_dict(store.now())["status"] == "paused"
    spend.resume_budget(pk, grace_cents=30)
    run_costing(tasks[1].id, 10)
    run_costing(tasks[2].id, 10)
    assert spend.get_budget(pk).as_dict(store.now())["status"] == "soft_capped"
    run_costing(tasks[3].id, 10)  # 130: the grace is spent
    assert spend.get_budget(pk).as_dict(store.now())["status"] == "paused"
    assert not store.claim(tasks[4].id, "ada", "command").ok
    assert spend.get_budget(pk).spent_cents == 130
    # The limit's crossing, then the grace's end: the person who resumed it is told.
    grace = [
        e.payload["budget"]["grace_spent"] for e in Event.objects.filter(kind="budget_exhausted")
    ]
    assert grace == [False, True]


def test_a_cap_paused_again_when_its_grace_is_spent_notifies_exhausted_again(default_team):
    pk = budget(mode="cap")
    tasks = [store.create_task(title=f"t{i}").task for i in range(4)]
    run_costing(tasks[0].id, 100)
    spend.resume_budget(pk, grace_cents=20)
    run_costing(tasks[1].id, 10)  # 110: within the grace, nothing new to tell
    assert Event.objects.filter(kind="budget_exhausted").count() == 1
    run_costing(tasks[2].id, 15)  # 125: the grace is spent, paused again
    again = Event.objects.filter(kind="budget_exhausted").order_by("seq").last()
    assert Event.objects.filter(kind="budget_exhausted").count() == 2
    body = again.payload["budget"]
    assert (body["spent_cents"], body["pause_at_cents"], body["grace_spent"]) == (125, 120, True)
    assert body["status"] == "paused"
    # The claim's refusal says it is the grace that ran out, not the limit.
    refused = store.claim(tasks[3].id, "ada", "command")
    with pytest.raises(BudgetPaused, match="spent the grace it was resumed with"):
        refused.raise_for_outcome(tasks[3].id)
    # The warning stays once per window.
    assert Event.objects.filter(kind="budget_warning").count() == 1


def test_resuming_a_cap_not_yet_spent_never_lowers_what_it_may_spend(default_team):
    pk = budget(mode="cap")
    tasks = [store.create_task(title=f"t{i}").task for i in range(3)]
    run_costing(tasks[0].id, 10)
    spend.resume_budget(pk)  # a person presses resume on a cap at 10 %
    run_costing(tasks[1].id, 10)
    after = spend.get_budget(pk).as_dict(store.now())
    assert (after["spent_cents"], after["status"], after["pause_at_cents"]) == (20, "active", 100)
    spend.resume_budget(pk, grace_cents=5)  # grace is on top of the limit
    assert spend.get_budget(pk).pause_at_cents == 105
    assert store.claim(tasks[2].id, "ada", "command").ok


def test_a_paused_task_tree_is_passed_over_by_claim_next(default_team):
    root = store.create_task(title="root").task
    child = store.create_task(title="child", parent_task_id=root.id).task
    budget(scope="task_tree", scope_id=root.id, mode="cap", limit_cents=10)
    run_costing(child.id, 10)
    other = store.create_task(title="other").task
    claimed = store.claim_next("ada", team="default")
    assert claimed is not None and claimed.task.id == other.id
    # Every task left is the paused tree's: 409 budget_paused (GOVERNANCE §3), not 204.
    held = store.claim_next("ada", team="default")
    assert held is not None and held.outcome == "budget_paused"
    assert held.refusal is not None and held.refusal.extra["scope"] == "task_tree"
    result = store.claim(child.id, "ada", "command")
    assert result.outcome == "budget_paused"


def test_an_agent_budget_stops_only_that_agent(default_team):
    budget(scope="agent", scope_id="ada", mode="cap", limit_cents=10)
    tasks = [store.create_task(title=f"t{i}").task for i in range(3)]
    run_costing(tasks[0].id, 10, agent="ada")
    assert store.claim(tasks[1].id, "ada", "command").outcome == "budget_paused"
    assert store.claim(tasks[1].id, "bob", "command").ok


def test_a_budget_made_over_spent_work_starts_from_what_it_covers(default_team):
    task = store.create_task(title="t").task
    run_costing(task.id, 40)
    pk = budget(limit_cents=50)
    body = spend.get_budget(pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (40, "soft_capped")
    assert Event.objects.filter(kind="budget_warning").count() == 1


@pytest.mark.parametrize(
    "field,value",
    [("scope", "planet"), ("window", "week"), ("mode", "stop"), ("limit_cents", 0)],
)
def test_a_bad_budget_is_refused_naming_the_field(default_team, field, value):
    from core.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as refused:
        budget(**{field: value})
    assert refused.value.field == field


# --- the reserve: runs in flight hold their headroom ----------------------------------


def test_a_cap_admits_a_claim_only_while_the_runs_in_flight_leave_room(default_team):
    budget(mode="cap", limit_cents=100)
    tasks = [store.create_task(title=f"t{i}", max_run_cents=40).task for i in range(5)]
    held = [store.claim(t.id, f"a{i}", "command") for i, t in enumerate(tasks[:3])]
    assert all(c.ok for c in held)  # 0 + 40 + 40 < 100: the third may pass it by 20
    refused = store.claim(tasks[3].id, "a3", "command")  # 0 + 120 >= 100
    assert refused.outcome == "budget_paused"
    assert "runs in flight" in refused.detail and "waits" in refused.detail
    assert store.claim_next("a3", team="default").outcome == "budget_paused"
    assert store.get_task(tasks[3].id).status == "todo"
    # What a run spent leaves its headroom: 30 spent + 10 + 40 + 40 is still full.
    run = store.open_execution(tasks[0].id, held[0].ticket)
    spend.record_usage(run.id, spend.Usage(cost_cents=30, cost_status="estimated"))
    assert store.claim(tasks[3].id, "a3", "command").outcome == "budget_paused"
    # A run that ends gives its headroom back: 30 spent + 80 held, still full;
    # a second ends: 30 + 25 spent + 40 held = 95 < 100, room for one more.
    store.close_execution(run.id, "succeeded", cost_cents=30)
    store.release(tasks[0].id, ticket=held[0].ticket)
    assert store.claim(tasks[3].id, "a3", "command").outcome == "budget_paused"
    second = store.open_execution(tasks[1].id, held[1].ticket)
    store.close_execution(second.id, "succeeded", cost_cents=25)
    store.release(tasks[1].id, ticket=held[1].ticket)
    assert store.claim(tasks[3].id, "a3", "command").ok


def test_under_a_cap_a_run_with_no_ceiling_goes_alone(default_team):
    budget(mode="cap", limit_cents=100)
    bounded = store.create_task(title="bounded", max_run_cents=10).task
    unbounded = store.create_task(title="unbounded").task
    first = store.claim(bounded.id, "ada", "command")
    assert first.ok
    refused = store.claim(unbounded.id, "bob", "command")
    assert refused.outcome == "budget_paused" and "no ceiling" in refused.detail
    # Claim-next passes over it; with nothing else to take, it says what it waits for.
    waits = store.claim_next("bob", team="default")
    assert waits is not None and waits.outcome == "budget_paused"
    assert "no ceiling" in waits.detail
    store.release(bounded.id, ticket=first.ticket)
    alone = store.claim(unbounded.id, "bob", "command")
    assert alone.ok
    # While it runs, nothing else under the cap starts.
    assert store.claim(bounded.id, "ada", "command").outcome == "budget_paused"
    store.release(unbounded.id, ticket=alone.ticket)
    assert store.claim(bounded.id, "ada", "command").ok


def test_an_agents_default_ceiling_counts_for_its_claims(default_team):
    from core import registry

    registry.create_agent(
        id="capped",
        display_name="capped",
        team="default",
        runtime="command",
        settings={"max_run_cents": 60},
        max_concurrent=5,
    )
    budget(mode="cap", limit_cents=100)
    tasks = [store.create_task(title=f"t{i}").task for i in range(3)]
    assert store.claim(tasks[0].id, "capped", "command").ok  # ceiling 60
    # Another run with a ceiling (the agent's) is admitted: 60 < 100 ...
    claimed = store.claim_next("capped", team="default")
    assert claimed is not None and claimed.ok
    # ... and then 120 >= 100 holds the team.
    refused = store.claim_next("capped", team="default")
    assert refused is not None and refused.outcome == "budget_paused"


def test_a_persons_claim_holds_nothing(default_team):
    from core import registry

    registry.create_agent(id="ada-h", display_name="Ada", team="default", runtime="human")
    budget(mode="cap", limit_cents=100)
    tasks = [store.create_task(title=f"t{i}").task for i in range(2)]
    assert store.claim(tasks[0].id, "ada-h", "human").ok
    assert store.claim(tasks[1].id, "bot", "command").ok  # no ceiling, but nothing in flight
