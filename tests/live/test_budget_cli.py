"""``clawboo budget list|resume`` against a live daphne: a paused cap could be resumed
only in the browser or with curl. Staff with the budget permission resume it, with
grace or without; a member, an agent's key and a machine token are refused in one
line (the governed never resume the budget that stopped them, GOVERNANCE §6); an
unknown id and another team's id answer alike; a bad grace is a usage error."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from board import store
from board.models import Budget
from board.store import spend
from core import machines, registry
from tests.live.test_newuser8_cli import key_of
from tests.live.test_people_cli import Cli

pytestmark = pytest.mark.django_db(transaction=True)

CAP = {"scope": "team", "scope_id": "default", "window": "month", "mode": "cap"}


def spend_on(agent_id: str, cents: int) -> None:
    task = store.create_task(title="Costly").task
    claimed = store.claim(task.id, agent_id, "command")
    run = store.open_execution(task.id, claimed.ticket)
    store.close_execution(run.id, "failed", cost_cents=cents)
    store.release(task.id, ticket=claimed.ticket)


def one_line_refusal(done, status: int, start: str) -> str:
    assert done.returncode == status, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.startswith(start), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_a_paused_budget_is_listed_and_resumed_from_the_terminal_by_whom_it_admits(
    daphne, tmp_path
):
    users = get_user_model().objects
    # Staff holding the budget permission (and no other): whom the resume admits.
    op = users.create_user("op", is_staff=True)
    op.user_permissions.add(Permission.objects.get(codename="change_budget"))
    max_ = users.create_user("max")
    for user in (op, max_):
        registry.add_member("default", user)
    registry.create_team("other", "Other")
    registry.create_agent(
        id="coder", display_name="Coder", team="default", runtime="command", owner=op,
        settings={"argv": ["true"]},
    )  # fmt: skip
    budget = spend.create_budget("default", {**CAP, "limit_cents": 10})
    theirs = spend.create_budget("other", {**CAP, "scope_id": "other", "limit_cents": 10})
    spend_on("coder", 12)
    _, machine_key = machines.mint("build-1", ["coder"], created_by=op)
    base = daphne()
    staff, member = Cli(tmp_path / "op"), Cli(tmp_path / "max")
    agent, machine = Cli(tmp_path / "agent"), Cli(tmp_path / "machine")
    staff.ok("login", "--server", base, "--token", key_of("op"))
    member.ok("login", "--server", base, "--token", key_of("max"))
    agent.ok("login", "--server", base, "--token", key_of("op", "--agent", "coder"))
    machine.env.update(CLAWBOO_SERVER=base, CLAWBOO_TOKEN=machine_key)

    head, row = member.ok("budget", "list").splitlines()[:2]
    assert head.split() == ["ID", "TEAM", "SCOPE", "WINDOW", "LIMIT", "SPENT", "STATE", "RESUMES"]
    assert row.split() == [
        str(budget.pk), "default", "team", "default", "month", "10¢", "(cap)", "12¢", "paused",
        "staff,", "not", "you",
    ]  # fmt: skip
    assert staff.ok("budget", "list", "--team", "default").splitlines()[1].endswith("paused  you")
    # Another team's budget is not listed to a member, nor is its team.
    assert str(theirs.pk) not in {
        line.split()[0] for line in member.ok("budget", "list").splitlines()
    }
    one_line_refusal(
        member("budget", "list", "--team", "other"),
        1,
        "clawboo: 404 not_found: team 'other' does not exist",
    )

    # The refused: nothing changes.
    before = Budget.objects.values_list("pause_at_cents", "grace_cents", "updated_at").get(
        pk=budget.pk
    )
    one_line_refusal(
        member("budget", "resume", str(budget.pk), "--grace", "5"),
        1,
        "clawboo: 403 forbidden: a budget is resumed by staff with the permission to change"
        " budgets: ask one, or wait for its next window",
    )
    said = one_line_refusal(
        agent("budget", "resume", str(budget.pk)), 1, "clawboo: 403 person_required: "
    )
    assert "agent" in said
    one_line_refusal(
        machine("budget", "resume", str(budget.pk)), 1, "clawboo: 403 person_required: "
    )
    missing = one_line_refusal(member("budget", "resume", "99999"), 1, "clawboo: 404 not_found: ")
    hidden = one_line_refusal(
        member("budget", "resume", str(theirs.pk)), 1, "clawboo: 404 not_found: "
    )
    # Worded alike but for the id (quoted: a bare replace of a pk of 4 would reach "404").
    assert hidden.replace(f"'{theirs.pk}'", "'N'") == missing.replace("'99999'", "'N'")
    for bad in ("0", "-5", "five", "2.5"):
        refused = one_line_refusal(
            staff("budget", "resume", str(budget.pk), "--grace", bad),
            2,
            "clawboo: --grace is a whole number of cents, 1 or more, not ",
        )
        assert repr(bad) in refused
    assert (
        Budget.objects.values_list("pause_at_cents", "grace_cents", "updated_at").get(pk=budget.pk)
        == before
    )

    said = staff.ok("budget", "resume", str(budget.pk), "--grace", "5")
    assert said == (
        f"resumed budget {budget.pk} (team default) with 5¢ grace: spent 12¢ of 10¢ this month;"
        " it pauses again at 17¢\n"
    )
    row = staff.ok("budget", "list").splitlines()[1]
    assert row.endswith("soft_capped, pauses at 17¢  you"), row
    budget.refresh_from_db()
    assert (budget.pause_at_cents, budget.grace_cents) == (17, 5)
    said = staff.ok("budget", "resume", str(budget.pk))
    assert said == (
        f"resumed budget {budget.pk} (team default): spent 12¢ of 10¢ this month;"
        " it pauses again at its next spend (--grace CENTS lets it spend more)\n"
    )


def test_resuming_a_cap_not_yet_spent_says_it_pauses_at_its_limit(monkeypatch, capsys):
    # "it pauses again at its next spend" is true only of a cap resumed at or past it.
    import argparse

    from clawboo import people

    answer = {
        "id": 7, "scope": "agent", "scope_id": "coder", "window": "day", "limit_cents": 10,
        "spent_cents": 4, "pause_at_cents": 10, "status": "active",
    }  # fmt: skip
    sent = []

    class Server:
        def call(self, method, path, body=None):
            sent.append((method, path, body))
            return answer

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(id="7", grace=None, json=False)
    assert people.cmd_budget_resume(args) == 0
    assert capsys.readouterr().out == (
        "resumed budget 7 (agent coder): spent 4¢ of 10¢ today; it pauses again at 10¢\n"
    )
    assert sent == [("POST", "/api/budgets/7/resume", {})]
    with pytest.raises(people.Failure) as refused:
        people.cmd_budget_resume(argparse.Namespace(id="7", grace="1e3", json=False))
    assert refused.value.status == 2 and len(sent) == 1
