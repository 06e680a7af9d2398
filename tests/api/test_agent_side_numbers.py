"""GOVERNANCE §3, §6: the numbers the agent side writes hold it to its limits.

A run's usage arrives as running totals. A report with lower totals than were
recorded took the difference back off the run's task, its tree and every budget over
it: a run (or an agent with its run's ticket) could give its scope back spend it
had used, mid-run, and go on past a cap. A running report now never lowers what was
recorded. The run's close still replaces a streamed estimate with its runtime's own
final price (lower or not), as documented; a remote worker's close never lowers a
price its run's own reports gave (it too took spend back, after the fact)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from board import store
from board.models import Budget, ExecutionProcess
from board.store import spend
from core import machines, registry

pytestmark = pytest.mark.django_db


@pytest.fixture
def remote(db, tmp_path, settings) -> dict[str, object]:
    """A machine token's agent holds a task (ceiling 100¢) under a 200¢ team cap, its
    run open."""
    settings.CLAWBOO_STATE_DIR = tmp_path
    registry.create_agent(
        id="a-bot", display_name="a", team="default", runtime="claude-code", max_concurrent=2
    )
    budget = spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "total",
            "limit_cents": 200,
            "mode": "cap",
        },
    )
    _, key = machines.mint("gpu-1", ["a-bot"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    task = store.create_task(title="remote", file_mutating=False, max_run_cents=100).task
    ticket = client.post("/api/board/claim-next", {"agent_id": "a-bot"}, format="json").json()[
        "ticket"
    ]
    run = client.post(
        f"/api/board/tasks/{task.id}/executions", {"ticket": ticket}, format="json"
    ).json()["id"]
    return {
        "client": client,
        "task": task.id,
        "ticket": ticket,
        "base": f"/api/board/tasks/{task.id}/executions/{run}",
        "run": run,
        "budget": budget.id,
    }


def spent(remote: dict[str, object]) -> tuple[int, int, int]:
    task = store.get_task(str(remote["task"]))
    return (
        task.cost_cents,
        ExecutionProcess.objects.get(pk=remote["run"]).cost_cents,
        Budget.objects.get(pk=remote["budget"]).spent_cents,
    )


def report(remote: dict[str, object], **usage: object) -> dict[str, object]:
    client = remote["client"]
    assert isinstance(client, APIClient)
    answer = client.post(
        f"{remote['base']}/usage", {"ticket": remote["ticket"], **usage}, format="json"
    )
    assert answer.status_code == 200, answer.content[:300]
    return answer.json()


def test_a_running_usage_report_never_lowers_the_spend_recorded(remote):
    report(remote, tokens_in=1000, cost_cents=90)
    assert spent(remote) == (90, 90, 90)
    report(remote, tokens_in=1, cost_cents=1)
    assert spent(remote) == (90, 90, 90)
    row = ExecutionProcess.objects.get(pk=remote["run"])
    assert (row.tokens_in, row.cost_status) == (1000, "reported")
    # Growing again counts from what was recorded, once.
    report(remote, tokens_in=1200, cost_cents=95)
    assert spent(remote) == (95, 95, 95)


def test_a_lower_running_report_still_stops_the_run_at_the_spend_recorded(remote):
    report(remote, cost_cents=99)
    assert report(remote, cost_cents=2)["stop"] is False
    assert report(remote, cost_cents=100)["stop"] is True
    assert spent(remote) == (100, 100, 100)


def close(remote: dict[str, object], **body: object) -> None:
    client = remote["client"]
    assert isinstance(client, APIClient)
    closed = client.post(
        f"{remote['base']}/close", {"ticket": remote["ticket"], **body}, format="json"
    )
    assert closed.status_code == 200, closed.content[:300]


def test_the_close_still_replaces_the_streamed_estimate_with_a_lower_final_price(remote):
    # 900k input tokens of the fake model at 100¢ a million: an estimate of 90¢.
    report(remote, tokens_in=900_000, model="fake-model")
    assert spent(remote) == (90, 90, 90)
    row = ExecutionProcess.objects.get(pk=remote["run"])
    assert row.cost_status == "estimated"
    close(remote, outcome="succeeded", tokens_in=900_000, cost_cents=6)
    assert spent(remote) == (6, 6, 6)
    assert ExecutionProcess.objects.get(pk=remote["run"]).cost_status == "reported"


def test_a_remote_close_never_lowers_a_price_the_run_reported(remote):
    """The run reported its own price, 90¢, and the budgets counted it; a close of 6¢
    took 84¢ back off the task, its tree and the team's cap (a machine token, or an
    agent holding its run's ticket, gave its scope back spend after the fact)."""
    report(remote, tokens_in=1000, cost_cents=90)
    close(remote, outcome="succeeded", tokens_in=900, cost_cents=6)
    assert spent(remote) == (90, 90, 90)
    row = ExecutionProcess.objects.get(pk=remote["run"])
    assert (row.status, row.tokens_in, row.cost_status) == ("succeeded", 1000, "reported")


def test_a_remote_close_with_fewer_tokens_and_no_price_never_lowers_the_estimate(remote):
    """No price of the runtime's to replace the estimate with: lower tokens (or none at
    all, a close that reports nothing) took the estimate's spend back."""
    report(remote, tokens_in=900_000, model="fake-model")
    close(remote, outcome="succeeded", tokens_in=1, model="fake-model")
    assert spent(remote) == (90, 90, 90)
    row = ExecutionProcess.objects.get(pk=remote["run"])
    assert (row.tokens_in, row.cost_status) == (900_000, "estimated")


def test_a_remote_close_reporting_nothing_keeps_what_the_run_reported(remote):
    report(remote, tokens_in=900_000, model="fake-model")
    close(remote, outcome="failed", error="boom")
    assert spent(remote) == (90, 90, 90)


def test_a_remote_close_of_a_run_cancelled_for_spend_never_lowers_its_price(remote):
    report(remote, cost_cents=100)
    close(remote, outcome="cancelled", cost_cents=1)
    assert spent(remote) == (100, 100, 100)
    task = store.get_task(str(remote["task"]))
    # Closed at its ceiling as reported: blocked, never retried by itself.
    assert task.status == "blocked"


def test_a_remote_close_above_what_was_recorded_counts_the_difference(remote):
    report(remote, cost_cents=40)
    close(remote, outcome="failed", cost_cents=55)
    assert spent(remote) == (55, 55, 55)


def test_a_cost_no_run_can_have_is_refused_and_the_teams_accounting_goes_on(remote):
    """One report of 2**53 cents was taken; the team budget's sum overflowed at the next
    run's report, and every usage report and close of the team then failed (500)."""
    before = spent(remote)
    for field, value in (
        ("cost_cents", 2**53),
        ("cost_millicents", 2**62),
        ("tokens_in", 2**53),
        ("cache_read", 2**41),
    ):
        client = remote["client"]
        assert isinstance(client, APIClient)
        refused = client.post(
            f"{remote['base']}/usage", {"ticket": remote["ticket"], field: value}, format="json"
        )
        assert refused.status_code == 400, (field, refused.content[:300])
        assert refused.json()["field"] == field
    assert spent(remote) == before
    # The most one run may cost, in two runs of the team: both counted.
    task = store.create_task(title="second", file_mutating=False, max_run_cents=50).task
    second = store.claim(task.id, "a-bot", "claude-code")
    assert second.ok, second.outcome
    run = store.open_execution(task.id, second.ticket)
    report(remote, cost_cents=spend.RUN_CENTS_MAX)
    client = remote["client"]
    assert isinstance(client, APIClient)
    answer = client.post(
        f"/api/board/tasks/{task.id}/executions/{run.id}/usage",
        {"ticket": second.ticket, "cost_cents": spend.RUN_CENTS_MAX},
        format="json",
    )
    assert answer.status_code == 200, answer.content[:300]
    assert Budget.objects.get(pk=remote["budget"]).spent_cents == 2 * spend.RUN_CENTS_MAX


def test_a_runtimes_own_stream_past_one_runs_most_is_recorded_as_the_most():
    """A local run's usage is its runtime's output -- the agent's own. Past what one run
    may have, it is recorded as the most (its ceiling and budgets then stop it) rather
    than failing the run's bookkeeping; the API refuses the same figures (above)."""
    from executor import pricing
    from executor.runtimes.base import UsageSoFar

    usage = pricing.usage_of(UsageSoFar(tokens_in=2**60, cost_cents=2**60))
    assert usage.check() is not None
    assert (usage.tokens_in, usage.cost_cents) == (spend.RUN_TOKENS_MAX, spend.RUN_CENTS_MAX)


def test_a_remote_run_closed_cancelled_with_no_limit_reached_is_a_failure_the_breaker_counts(
    remote, settings
):
    """The breaker counts no cancelled run, and a remote worker (a machine token, or an
    agent with its run's ticket) said "cancelled" of a run that no limit stopped: an
    agent failing every run that way was never paused (GOVERNANCE §2, §6), and blocked
    the queue task by task instead."""
    settings.CLAWBOO_BREAKER_FAILURES = 1
    report(remote, cost_cents=10)  # far from the 100¢ ceiling and the 200¢ cap
    close(remote, outcome="cancelled", error="boom")
    row = ExecutionProcess.objects.get(pk=remote["run"])
    assert row.status == "failed" and row.error_class not in ("cancelled", "budget")
    assert registry.get_agent("a-bot").state == "paused"
