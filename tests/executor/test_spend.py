"""Every run costed: reported, estimated from the price table, or unknown; a run's
ceiling stops it; a task's cost and its tree's add up every attempt."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from board import store
from board.models import CostStatus, ExecutionProcess, TaskComment
from core import registry
from core.models import Event
from executor.runner import Executor

STAND_IN = Path(__file__).with_name("stand_in_claude.py")


@pytest.fixture
def claude_binary(tmp_path: Path) -> Path:
    """An executable ``claude`` that is the stand-in (the adapter runs it like the CLI)."""
    path = tmp_path / "bin" / "claude"
    path.parent.mkdir()
    path.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def claude_agent(db, state_dir, claude_binary):
    def make(agent_id: str = "claude", *args: str, **settings):
        return registry.create_agent(
            id=agent_id,
            display_name=agent_id.title(),
            team="default",
            runtime="claude-code",
            settings={"binary": str(claude_binary), "extra_args": list(args), **settings},
        )

    return make


def processes_in(directory: Path) -> list[int]:
    """Live (non-zombie) processes whose working directory is ``directory`` or below."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == directory or directory in cwd.parents):
            found.append(int(entry.name))
    return found


def run_one(agent_id: str, **task) -> ExecutionProcess:
    created = store.create_task(title="spend", file_mutating=False, **task).task
    Executor(agent_id).work_once()
    (execution,) = store.list_executions(created.id)
    return execution


def test_a_run_that_prices_itself_records_a_reported_cost(claude_agent):
    claude_agent("claude", "--turns", "2", "--cost-usd", "0.03")
    execution = run_one("claude")
    assert execution.status == "succeeded"
    assert (execution.cost_cents, execution.cost_status) == (6, CostStatus.REPORTED)
    assert (execution.tokens_in, execution.tokens_out) == (2000, 20)


def test_tokens_without_a_price_are_estimated_from_the_price_table(claude_agent, settings):
    settings.CLAWBOO_MODEL_PRICES = {"m1": {"in": 300, "out": 1500}}
    claude_agent("claude", "--model", "m1", "--turns", "1", "--input-tokens", "100000")
    execution = run_one("claude")
    # 100000 × 300 / 1e6 + 10 × 1500 / 1e6 = 30.015¢
    assert (execution.cost_cents, execution.cost_status) == (30, CostStatus.ESTIMATED)


def test_a_model_the_table_does_not_price_leaves_the_cost_unknown(claude_agent):
    claude_agent("claude", "--model", "nobody-prices-me")
    execution = run_one("claude")
    assert (execution.cost_cents, execution.cost_status) == (0, CostStatus.UNKNOWN)
    assert execution.tokens_in == 1000


def test_a_command_run_costs_unknown(command_agent):
    command_agent("builder", "none")
    execution = run_one("builder")
    assert execution.status == "succeeded"
    assert (execution.cost_cents, execution.cost_status) == (0, CostStatus.UNKNOWN)


def test_a_run_that_reaches_its_ceiling_is_stopped(claude_agent, settings):
    # Each turn: 100000 input tokens of claude-opus-5-5 (4 $/M) = 40¢; runs forever.
    claude_agent("claude", "--turns", "0", "--input-tokens", "100000", "--every", "0.2")
    created = store.create_task(title="spend", file_mutating=False, max_run_cents=100).task
    report = Executor("claude").work_once()
    assert report.outcome == "cancelled"
    (execution,) = store.list_executions(created.id)
    assert execution.status == "cancelled" and execution.error_class == "budget"
    assert execution.cost_status == CostStatus.ESTIMATED
    # Stopped at the first report at or past the ceiling (3 turns, 120¢), give or
    # take a turn printed before the signal landed.
    assert 100 <= execution.cost_cents <= 100 + 40
    assert not processes_in(Path(settings.CLAWBOO_STATE_DIR) / "scratch" / created.id)
    task = store.get_task(created.id)
    # Blocked, not retried by itself (GOVERNANCE §3): a person raises the ceiling.
    assert task.status == "blocked" and "ceiling of 100¢" in task.error
    assert task.cost_cents == execution.cost_cents
    (comment,) = TaskComment.objects.filter(task_id=task.id)
    assert "ceiling of 100¢" in comment.body
    assert Event.objects.filter(task_id=task.id, kind="budget_stopped").count() == 1


def test_an_agents_default_ceiling_applies_when_the_task_names_none(claude_agent):
    claude_agent("claude", "--turns", "0", "--input-tokens", "100000", max_run_cents=50)
    execution = run_one("claude")
    assert execution.status == "cancelled" and execution.error_class == "budget"


def test_the_cost_is_written_while_the_run_goes(claude_agent):
    claude_agent("claude", "--turns", "0", "--input-tokens", "100000", "--every", "0.2")
    created = store.create_task(title="spend", file_mutating=False, max_run_cents=200).task
    Executor("claude").work_once()
    kinds = list(Event.objects.filter(task_id=created.id, kind="cost_changed"))
    # One live figure per priced turn, before the run was stopped.
    assert len(kinds) >= 3
    figures = [e.payload["task"]["cost"]["cents"] for e in kinds]
    assert figures == sorted(figures) and figures[0] > 0
    assert os.getpid()  # the worker itself survived the stop


def test_a_run_whose_team_cap_is_spent_stops_at_its_next_usage_report(claude_agent):
    from board.store import spend

    team_cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    budget = spend.create_budget("default", {**team_cap, "limit_cents": 50})
    claude_agent("claude", "--turns", "0", "--input-tokens", "100000", "--every", "0.2")
    created = store.create_task(title="spend", file_mutating=False).task
    report = Executor("claude").work_once()
    assert report.outcome == "cancelled"
    (execution,) = store.list_executions(created.id)
    assert execution.status == "cancelled" and execution.error_class == "budget"
    # 40¢ a turn: paused at the second report (80¢), stopped there.
    assert 80 <= execution.cost_cents <= 120
    assert spend.get_budget(budget.pk).as_dict(store.now())["status"] == "paused"
    (comment,) = TaskComment.objects.filter(task_id=created.id)
    assert "50¢ day budget" in comment.body
    # Nothing more is claimed until a person resumes the budget.
    assert Executor("claude").work_once().outcome == "refused"


def test_a_run_priced_under_half_a_cent_keeps_its_millicents(claude_agent):
    claude_agent("claude", "--turns", "1", "--cost-usd", "0.003")
    execution = run_one("claude")
    assert execution.status == "succeeded"
    assert (execution.cost_cents, execution.cost_millicents) == (0, 300)
    assert execution.cost_status == CostStatus.REPORTED


@pytest.mark.parametrize("why", ["claim lost", "the executor failed"])
def test_a_run_closed_without_its_result_keeps_the_spend_it_streamed(db, why):
    """A run whose claim was lost, or whose executor failed around it, ends with no
    result: what it reported was spent, so its execution, its task and the cap
    budget over it keep that figure (a budget paused by it is not paused over spend
    that then vanishes)."""
    from board.store import spend
    from executor import settle

    budget = spend.create_budget(
        "default",
        {"scope": "team", "scope_id": "default", "window": "day", "limit_cents": 10,
         "mode": "cap"},
    )  # fmt: skip
    task = store.create_task(title="spend", file_mutating=False).task
    claimed = store.claim(task.id, "w1")
    run = store.open_execution(task.id, claimed.ticket, runtime="command")
    recorded = spend.record_usage(run.id, spend.Usage(cost_millicents=10_020))
    assert recorded is not None and [b.pk for b in recorded.paused] == [budget.pk]

    settle.close(settle.Run(task.id, claimed.ticket, "w1", run.id), "cancelled", None, error=why)

    row = ExecutionProcess.objects.get(pk=run.id)
    assert (row.status, row.cost_cents, row.cost_millicents) == ("cancelled", 10, 10_020)
    assert store.get_task(task.id).cost_millicents == 10_020
    after = spend.get_budget(budget.pk)
    assert (after.spent_cents, after.spent_millicents) == (10, 10_020)
    assert after.paused_until is not None


def test_a_critics_run_counts_against_the_reviewers_and_the_teams_budgets(
    claude_agent, command_agent
):
    from board.store import spend

    def budget(scope: str, scope_id: str) -> dict:
        body = {"scope": scope, "scope_id": scope_id, "window": "day", "mode": "cap"}
        return spend.create_budget("default", {**body, "limit_cents": 10})

    reviewer_cap, team_cap = budget("agent", "critic"), budget("team", "default")
    # A critic that costs 12¢ a review and finds nothing (its answer is not findings:
    # one non-blocking finding); the builder writes what the verify command wants.
    claude_agent("critic", "--turns", "1", "--cost-usd", "0.12")
    registry.set_reviewer_agent("default", "critic")
    command_agent("builder")
    task = store.create_task(
        title="Add feature", labels=["risk"], metadata={"verify_cmd": "grep -qx ok feature.txt"}
    ).task
    store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
    assert Executor("builder").work_once().verdict == "pass"
    review = ExecutionProcess.objects.get(task_id=task.id, agent_id="critic")
    assert (review.cost_cents, review.cost_status) == (12, CostStatus.REPORTED)
    task = store.get_task(task.id)
    assert (task.cost_cents, task.tree_cost_cents) == (12, 12)
    # The review's spend is the reviewer's and its team's, as any run's is: both caps
    # are spent, and their 100 % notices went out.
    for cap in (reviewer_cap, team_cap):
        body = spend.get_budget(cap.pk).as_dict(store.now())
        assert (body["spent_cents"], body["status"]) == (12, "paused")
    assert Event.objects.filter(kind="budget_exhausted").count() == 2


def test_a_reviewer_whose_cap_is_spent_reviews_nothing_more(claude_agent, command_agent):
    from board.store import spend

    cap = {"scope": "agent", "scope_id": "critic", "window": "day", "mode": "cap"}
    spend.create_budget("default", {**cap, "limit_cents": 10})
    claude_agent("critic", "--turns", "1", "--cost-usd", "0.12")
    registry.set_reviewer_agent("default", "critic")
    command_agent("builder")

    def risky_change() -> str:
        task = store.create_task(
            title="Add feature", labels=["risk"], metadata={"verify_cmd": "test -s feature.txt"}
        ).task
        store.decide_approval(task.id, "approve", by="ada")  # risk waits for a person
        assert Executor("builder").work_once().verdict == "pass"
        return task.id

    first, second = risky_change(), risky_change()
    # The first review spent the cap (12¢ of 10¢); none runs after it, every change
    # after says so instead of spending on past the cap, one review each.
    reviews = ExecutionProcess.objects.filter(agent_id="critic")
    assert [x.task_id for x in reviews] == [first]
    verification = store.get_task(second).as_dict()["verification"]
    assert verification["reviewer"] is None
    [finding] = verification["findings"]
    assert finding["title"] == "no critic: a cap budget over the review is spent"
    assert "'critic' 10¢ day budget (cap) is paused" in finding["body"]


def test_a_cap_resumed_without_grace_over_its_limit_stops_at_its_limit_not_a_grace(
    default_team,
):
    # Resumed with no grace while past its limit, the cap's allowance is the spend it
    # was resumed at; its next stop is the limit again, and says so -- it said "spent
    # the grace it was resumed with" of a grace nobody gave.
    from board.store import spend
    from executor import spending

    cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    budget = spend.create_budget("default", {**cap, "limit_cents": 50})
    task = store.create_task(title="spends past the limit", file_mutating=False).task
    claimed = store.claim(task.id, "ada", "command")
    run = store.open_execution(task.id, claimed.ticket)
    stop = spending.record(run.id, spend.Usage(cost_cents=60, cost_status="estimated"), None)
    assert stop is not None
    store.close_execution(run.id, "cancelled", error_class="budget", cost_cents=60)
    assert spending.settle_stop(task.id, claimed.ticket, stop)
    spend.resume_budget(budget.pk)  # no grace: until its next spend
    claimed = store.claim(task.id, "ada", "command")
    run = store.open_execution(task.id, claimed.ticket)
    stop = spending.record(run.id, spend.Usage(cost_cents=5, cost_status="estimated"), None)
    assert stop is not None and spend.get_budget(budget.pk).spent_cents == 65
    assert stop.why == "stopped: the team 'default' reached its 50¢ day budget (cap)"
    assert not spend.get_budget(budget.pk).grace_ran_out()


def test_a_run_stopped_when_a_persons_grace_runs_out_says_so(default_team):
    from board.store import spend
    from executor import spending

    cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    budget = spend.create_budget("default", {**cap, "limit_cents": 50})
    first = store.create_task(title="spends the limit", file_mutating=False).task
    claimed = store.claim(first.id, "ada", "command")
    run = store.open_execution(first.id, claimed.ticket)
    stop = spending.record(run.id, spend.Usage(cost_cents=50, cost_status="estimated"), None)
    assert stop is not None and "reached its 50¢ day budget (cap)" in stop.why
    store.close_execution(run.id, "cancelled", error_class="budget", cost_cents=50)
    assert spending.settle_stop(first.id, claimed.ticket, stop)
    spend.resume_budget(budget.pk, grace_cents=20)  # a person gives 20¢ more
    claimed = store.claim(first.id, "ada", "command")
    run = store.open_execution(first.id, claimed.ticket)
    within = spend.Usage(cost_cents=10, cost_status="estimated")
    assert spending.record(run.id, within, None) is None
    stop = spending.record(run.id, spend.Usage(cost_cents=25, cost_status="estimated"), None)
    assert stop is not None and spend.get_budget(budget.pk).spent_cents == 75
    assert stop.why == (
        "stopped: the team 'default' spent the grace it was resumed with "
        "(70¢ of its 50¢ day budget (cap))"
    )
    store.close_execution(run.id, "cancelled", error_class="budget", cost_cents=25)
    assert spending.settle_stop(first.id, claimed.ticket, stop)
    comment = TaskComment.objects.filter(task_id=first.id).order_by("id").last()
    assert comment is not None and "spent the grace it was resumed with" in comment.body
    assert store.get_task(first.id).status == "todo"
