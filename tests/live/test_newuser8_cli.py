"""``clawboo`` for people, as a new user met it (newuser8), against a live daphne: a
key of an agent logged in "as ada", like ada's own, and every approval then answered
403; a breaker's pause could be read and lifted only in the browser or with curl."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from core import registry
from tests.live.test_people_cli import Cli

pytestmark = pytest.mark.django_db(transaction=True)


def key_of(username: str, *extra: str) -> str:
    out = io.StringIO()
    call_command("create_agent_token", username, *extra, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_login_with_an_agents_key_says_it_is_the_agents_not_the_persons(daphne, tmp_path):
    agent_key = key_of("ada", "--team", "default", "--agent", "ada-bot")
    own_key = key_of("ada")
    base = daphne()
    cli = Cli(tmp_path / "ada")

    # A key the server does not know: not "log in again with `clawboo login`".
    wrong = cli("login", "--server", base, "--token", "not-a-key")
    assert (wrong.returncode, wrong.stderr) == (
        1,
        f"clawboo: 401 unauthenticated: {base} refused the key given"
        " (mistyped, revoked, or minted by another server)\n",
    )

    done = cli("login", "--server", base, "--token", agent_key)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"logged in to {base} as ada through agent ada-bot's key (")
    assert done.stderr.startswith("clawboo: note: this key is the agent side")
    assert "`clawboo create_agent_token USERNAME`" in done.stderr
    assert cli.ok("whoami").startswith("ada through agent ada-bot's key on default\n")
    assert '"principal": "agent"' in cli.ok("whoami", "--json")

    done = cli("login", "--server", base, "--token", own_key)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"logged in to {base} as ada (key in ")
    assert done.stderr == ""
    assert cli.ok("whoami") == "ada on default\n"


def test_an_agent_paused_is_listed_with_why_and_resumed_from_the_terminal(daphne, tmp_path):
    users = get_user_model().objects
    owner = users.create_user("ola")
    member = users.create_user("max")
    registry.add_member("default", owner)
    registry.add_member("default", member)
    registry.create_agent(
        id="coder", display_name="Coder", team="default", runtime="command", owner=owner,
        settings={"argv": ["true"]},
    )  # fmt: skip
    base = daphne()
    ola, max_ = Cli(tmp_path / "ola"), Cli(tmp_path / "max")
    ola.ok("login", "--server", base, "--token", key_of("ola"))
    max_.ok("login", "--server", base, "--token", key_of("max"))

    listed = ola.ok("agent", "list", "--team", "default")
    assert listed.splitlines()[0].split() == ["ID", "TEAM", "RUNTIME", "STATE", "WHY"]
    assert listed.splitlines()[1].split() == ["coder", "default", "command", "active", "-"]

    # A brake any member may pull; the release is the owner's (or staff's).
    said = max_.ok("agent", "pause", "coder", "--reason", "it keeps failing")
    assert said == "paused coder: it takes no new work until resumed\n"
    row = ola.ok("agent", "list").splitlines()[1]
    assert "paused" in row and "it keeps failing by max" in row, row
    ola.ok("agent", "resume", "coder")
    max_.ok("agent", "pause", "coder")  # no reason: the server's says who
    row = ola.ok("agent", "list").splitlines()[1]
    assert row.endswith("paused  paused by max"), row
    refused = max_("agent", "resume", "coder")
    assert refused.returncode == 1
    assert refused.stderr.startswith("clawboo: 403 forbidden: ")
    assert refused.stderr.count("\n") == 1
    assert ola.ok("agent", "resume", "coder") == "resumed coder: it is active\n"
    assert registry.get_agent("coder").state == "active"

    missing = ola("agent", "pause", "nope")
    assert (missing.returncode, missing.stderr) == (
        1,
        "clawboo: 404 not_found: agent 'nope' does not exist\n",
    )
    unknown = ola("agent", "list", "--team", "nope")
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "clawboo: 404 not_found: team 'nope' does not exist\n",
    )


def test_task_list_of_several_teams_says_each_tasks_team(monkeypatch, capsys):
    """Without --team a person in two teams saw both teams' tasks in one table with
    nothing saying which was whose: two "Fix login" read as one task listed twice."""
    import argparse

    from clawboo import people

    rows = [
        {"id": "t1", "team": "web", "status": "todo", "title": "Fix login"},
        {"id": "t2", "team": "api", "status": "todo", "title": "Fix login"},
    ]

    class Server:
        def call(self, method, path, body=None):
            return {"results": rows, "next": None}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(
        team=None, status=None, assignee=None, label=None, limit=50, ready=False, json=False
    )
    assert people.cmd_task_list(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["ID", "TEAM", "STATUS", "PRIORITY", "ASSIGNEE", "TITLE"]
    assert lines[1].split()[:2] == ["t1", "web"] and lines[2].split()[:2] == ["t2", "api"]
    rows[1]["team"] = "web"  # one team: its column says nothing, as before
    assert people.cmd_task_list(args) == 0
    assert "TEAM" not in capsys.readouterr().out


def test_agent_list_says_a_paused_cap_budget_holds_an_active_agent(monkeypatch, capsys):
    """A cap budget at its limit refuses the agent's claims while the agent reads
    "active": the list said nothing of why it took no work."""
    import argparse

    from clawboo import people

    answers = {
        "/api/agents": [
            {"id": "ada-bot", "team": "default", "runtime": "human", "state": "active"},
            {"id": "other", "team": "web", "runtime": "command", "state": "active"},
        ],
        "/api/budgets": [
            {"id": 1, "scope": "agent", "scope_id": "ada-bot", "window": "day",
             "limit_cents": 5, "spent_cents": 7, "status": "paused"},
            {"id": 2, "scope": "team", "scope_id": "web", "window": "month",
             "limit_cents": 500, "spent_cents": 10, "status": "active"},
        ],
    }  # fmt: skip

    class Server:
        def call(self, method, path, body=None):
            return answers[path.split("?")[0]]

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    assert people.cmd_agent_list(argparse.Namespace(team=None, json=False)) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["ada-bot"].endswith("active  budget 1 paused (agent ada-bot: 7¢ of 5¢ today)")
    assert rows["other"].split()[-1] == "-"
    answers["/api/budgets"][1]["status"] = "paused"  # a team's cap holds its agents too
    assert people.cmd_agent_list(argparse.Namespace(team=None, json=False)) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "budget 2 paused (team web: 10¢ of 500¢ this month)" in rows["other"]


def test_task_show_says_the_revision_an_approval_names(monkeypatch, capsys):
    """`task approve --revision N` is "the revision you read in task show", and a stale
    one is refused with "read it again": task show printed no revision."""
    import argparse

    from clawboo import people

    task = {"id": "t1", "title": "Drop the table", "status": "todo", "revision": 3,
            "approval": {"state": "required"}}  # fmt: skip

    class Server:
        def call(self, method, path, body=None):
            return task

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    assert people.cmd_task_show(argparse.Namespace(id="t1", json=False)) == 0
    assert "revision:    3\n" in capsys.readouterr().out


def test_a_first_login_without_server_names_the_option(tmp_path):
    # It said "clawboo: --server must be an http(s) URL, not ''".
    done = Cli(tmp_path / "new")("login", "--token", "k")
    assert (done.returncode, done.stderr) == (
        2,
        "clawboo: login needs --server URL, the address `clawboo up` printed"
        " (e.g. http://127.0.0.1:8000)\n",
    )


def test_task_approve_of_a_task_that_waits_for_nothing_says_so(monkeypatch):
    # It answered "409 illegal_transition: task 't1' cannot move from todo to done": the
    # landing's refusal, of a move the person never asked for.
    import argparse

    from clawboo import people

    posted = []

    class Server:
        def call(self, method, path, body=None):
            if method == "POST":
                posted.append(path)
            return {"id": "t1", "status": "todo", "approval": {"state": "approved"}}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(id="t1", reason=None, override=None, revision=None, json=False)
    with pytest.raises(people.Failure) as refused:
        people.cmd_task_approve(args)
    assert refused.value.line == (
        "clawboo: t1 is todo (its start was approved): nothing waits for approval (approve"
        " lands a task in review, or lets a task waiting for approval start)"
    )
    assert posted == []


def test_whoami_of_a_machine_token_names_its_agents_not_its_service_user():
    from clawboo import people

    me = {"username": "machine-25d4b71c", "principal": "machine", "agents": ["demo-coder"]}
    assert people.who(me) == "a machine token for demo-coder"
    assert people.agent_side(me).startswith("this key is the agent side")
    assert people.who({"username": "ada", "principal": "person"}) == "ada"
    assert people.agent_side({"username": "ada", "principal": "person"}) == ""


def test_task_wait_waits_out_a_server_restart(monkeypatch, capsys):
    """`clawboo task wait` ended at the first refused connection: `up` restarted while a
    person waited for an agent's run, and the wait was lost."""
    import argparse

    from clawboo import people

    answers = iter(["down", "down", {"id": "t1", "status": "in_progress"}, "down",
                    {"id": "t1", "title": "One", "status": "in_review"}])  # fmt: skip

    class Server:
        server = "http://127.0.0.1:8000"

        def call(self, method, path, body=None):
            answer = next(answers)
            if answer == "down":
                raise people.Failure(
                    "clawboo: cannot reach http://127.0.0.1:8000: refused", unreachable=True
                )
            return answer

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    monkeypatch.setattr(people.time, "sleep", lambda s: None)
    args = argparse.Namespace(id="t1", status=["in_review"], timeout=300.0, json=False)
    assert people.cmd_task_wait(args) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split()[:2] == ["t1", "in_review"]
    assert err.count("retrying until the timeout") == 2, err
    assert "reached http://127.0.0.1:8000 again" in err
    # Past its timeout, the refusal is the answer, as before.
    answers = iter(["down"])
    args.timeout = 0.0
    with pytest.raises(people.Failure) as failed:
        people.cmd_task_wait(args)
    assert failed.value.line.startswith("clawboo: cannot reach")
