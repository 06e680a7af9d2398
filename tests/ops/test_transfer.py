"""``clawboo export`` / ``clawboo import``: JSON Lines that restore into an empty
SQLite or PostgreSQL database, whose re-export is the same bytes."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import time_machine
from django.contrib.auth import get_user_model

from board import store
from board.models import Task
from core import chat, registry
from ops import transfer
from routines import store as routine_store
from routines.models import RoutineFire
from routines.ticker import Ticker
from tests.conftest import ROOT

START = dt.datetime(2030, 1, 7, 8, 0, 0, 123456, tzinfo=dt.UTC)


def build_a_team() -> None:
    """Some of every kind of row, made through the data layers."""
    User = get_user_model()
    ada = User.objects.create_user("ada", "ada@example.com", "pw", first_name="Ada")
    User.objects.create_user("op", "op@example.com", "pw", is_staff=True)
    registry.create_team("acme", "Acme Ltd", creator=ada)
    registry.create_agent(
        id="bot",
        display_name="Bot ✓",
        team="acme",
        runtime="command",
        owner=ada,
        settings={"argv": ["true"], "env": {"API_TOKEN": "hush", "MODE": "fast"}},
    )
    first = store.create_task(
        team="acme", title="First", labels=["a", "b"], metadata={"z": 1, "a": [1.5, None]}
    ).task
    second = store.create_task(team="acme", title="Second", depends_on=[first.id]).task
    store.create_task(team="acme", title="Child", parent_task_id=first.id, priority=3)
    store.add_comment(first.id, "Looks right — ship it", "ada")
    claimed = store.claim(first.id, "bot", runtime="command")
    execution = store.open_execution(first.id, claimed.ticket, runtime="command", pid=42)
    store.record_workspace(
        first.id,
        repo_path="/srv/repo",
        worktree_path="/srv/wt/first",
        branch=f"clawboo/task-{first.id}",
        base_sha="a" * 40,
        base_commit="b" * 40,
    )
    store.close_execution(execution.id, "succeeded", tokens_in=5, tokens_out=7, cost_cents=2)
    store.complete(first.id, ticket=claimed.ticket)
    store.set_priority(second.id, 9)
    chat.post("acme", "morning all", author="ada")
    store.create_task(title="elsewhere")  # the default team has work too


def build_with_a_routine_fire(clock) -> None:
    build_a_team()
    routine_store.create_routine(
        agent_id="bot", team="acme", cron_spec="0 * * * *", task_template={"title": "Hourly"}
    )
    clock.shift(dt.timedelta(hours=1))
    assert Ticker().tick().claimed
    assert RoutineFire.objects.count() == 1


def export_text(team: str | None = None) -> str:
    out = io.StringIO()
    transfer.export_to(out, team)
    return out.getvalue()


def clawboo(database_url: str, state: Path, *args: str, stdin: str | None = None) -> str:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(state),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "clawboo.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def fresh_databases(tmp_path: Path, *, both: bool = True) -> list[tuple[str, str]]:
    """Empty databases to restore into: a SQLite file, and a new PostgreSQL database
    when the suite has a server. ``both=False``: only the suite's own engine (what
    does not cross engines need not run on SQLite twice)."""
    server = os.environ.get("CLAWBOO_TEST_DATABASE_URL")
    found = [("sqlite", f"sqlite:///{tmp_path / 'fresh.sqlite3'}")] if both or not server else []
    if server:
        import psycopg

        name = f"test_clawboo_{os.getpid()}_import_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server.replace("postgres://", "postgresql://"), autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        found.append(("postgresql", server.rsplit("/", 1)[0] + f"/{name}"))
    return found


def drop_databases(found: list[tuple[str, str]]) -> None:
    server = os.environ.get("CLAWBOO_TEST_DATABASE_URL")
    for vendor, url in found:
        if vendor == "postgresql" and server:
            import psycopg

            name = url.rsplit("/", 1)[1]
            with psycopg.connect(
                server.replace("postgres://", "postgresql://"), autocommit=True
            ) as db:
                db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.django_db(transaction=True)
def test_a_restored_export_exports_the_same_bytes_on_sqlite_and_postgresql(tmp_path):
    with time_machine.travel(START, tick=False) as clock:
        build_with_a_routine_fire(clock)
    original = export_text()
    (tmp_path / "all.jsonl").write_text(original, encoding="utf-8")
    kinds = [json.loads(text)["type"] for text in original.splitlines()]
    for kind in ("user", "team", "agent", "task", "task_dep", "comment", "execution"):
        assert kind in kinds
    for kind in ("workspace", "event", "chat", "routine", "routine_fire"):
        assert kind in kinds
    found = fresh_databases(tmp_path)
    try:
        for vendor, url in found:
            state = tmp_path / f"state-{vendor}"
            clawboo(url, state, "migrate", "-v", "0")
            said = clawboo(url, state, "import", str(tmp_path / "all.jsonl"))
            assert said.startswith("imported ")
            again = clawboo(url, state, "export")
            assert again == original, vendor
            # Ids keep counting past the restored ones: new work can be filed there.
            clawboo(url, state, "import", "--format", "taskmaster", "-", stdin=TASKMASTER)
    finally:
        drop_databases(found)


@pytest.mark.django_db
def test_agents_are_exported_without_secrets_and_users_without_passwords():
    build_a_team()
    report = transfer.ExportReport()
    records = [json.loads(text) for text in transfer.export_lines(None, report)]
    agent = next(r for r in records if r["type"] == "agent")
    assert agent["settings"] == {"argv": ["true"], "env": {"MODE": "fast"}}
    assert agent["owner"] == "ada" and agent["approved_by"] is None
    assert report.redacted == ["agent bot: settings.env.API_TOKEN"]
    users = [r for r in records if r["type"] == "user"]
    assert [u["username"] for u in users] == ["ada", "op"]
    assert all("password" not in u for u in users)
    team = next(r for r in records if r["type"] == "team" and r["id"] == "acme")
    assert team["members"] == ["ada"]
    assert records[-1]["type"] == "end" and records[-1]["counts"]["task"] == 4


@pytest.mark.django_db
def test_a_team_export_holds_only_that_team():
    build_a_team()
    records = [json.loads(text) for text in transfer.export_lines("acme")]
    tasks = [r for r in records if r["type"] == "task"]
    assert {t["team_id"] for t in tasks} == {"acme"} and len(tasks) == 3
    assert {r["team_id"] for r in records if r["type"] == "event"} == {"acme"}
    assert [r["username"] for r in records if r["type"] == "user"] == ["ada"]
    assert records[0] == {"type": "clawboo-export", "version": 1, "team": "acme"}


@pytest.mark.django_db
def test_it_refuses_a_database_that_holds_work_and_writes_nothing():
    build_a_team()
    text = export_text("acme")
    before = Task.objects.count()
    with pytest.raises(transfer.ImportRefused, match="not empty"):
        transfer.import_lines(text.splitlines(keepends=True))
    assert Task.objects.count() == before


@pytest.mark.django_db
def test_a_bad_line_is_named_and_nothing_is_written():
    header = '{"type":"clawboo-export","version":1,"team":null}\n'
    with pytest.raises(Exception, match="line 2: not JSON"):
        transfer.import_lines([header, "{oops\n"])
    with pytest.raises(Exception, match="line 2: unknown record type 'widget'"):
        transfer.import_lines([header, '{"type":"widget"}\n'])
    with pytest.raises(Exception, match="line 1: not a clawboo-export"):
        transfer.import_lines(['{"type":"something-else"}\n'])
    assert Task.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_an_export_restores_in_process_into_an_emptied_database():
    build_a_team()
    text = export_text()
    # Empty it the way a fresh install is: flush, then the migration's default team.
    from django.core.management import call_command

    call_command("flush", "--no-input", verbosity=0)
    registry.ensure_team("default", "Default team")
    counts = transfer.import_lines(text.splitlines(keepends=True))
    assert counts["task"] == 4 and counts["event"] > 0
    assert export_text() == text
    # The board works on what was restored: a new task, a claim, a new event.
    new = store.create_task(team="acme", title="After the restore").task
    assert store.claim(new.id, "bot", runtime="command").ok


TASKMASTER = json.dumps(
    {
        "master": {
            "tasks": [
                {
                    "id": 1,
                    "title": "Set up the repo",
                    "description": "Init",
                    "details": "git init, CI",
                    "testStrategy": "CI is green",
                    "status": "done",
                    "priority": "high",
                    "dependencies": [],
                    "subtasks": [],
                },
                {
                    "id": 2,
                    "title": "Login page",
                    "description": "Form and session",
                    "status": "pending",
                    "priority": "medium",
                    "dependencies": [1],
                    "subtasks": [
                        {"id": 1, "title": "Form", "status": "done", "dependencies": []},
                        {"id": 2, "title": "Session", "status": "pending", "dependencies": [1]},
                    ],
                },
                {"id": 3, "title": "Later", "status": "deferred", "dependencies": [2, 9]},
                {"id": 4, "title": "Look at it", "status": "review", "dependencies": []},
            ],
            "metadata": {"created": "2025-01-01T00:00:00Z"},
        },
        "feature-x": {"tasks": [{"id": 1, "title": "Flag", "status": "cancelled"}]},
    }
)


@pytest.mark.django_db
def test_a_taskmaster_file_becomes_board_tasks_once():
    from ops import taskmaster

    report = taskmaster.import_file(TASKMASTER)
    assert report.created == 7 and report.links == 3
    assert any("tm-9" in note for note in report.notes)  # an unknown dependency is skipped
    setup = store.get_task("tm-1")
    assert (setup.status, setup.priority) == ("done", 2)
    assert setup.description == "Init\n\ngit init, CI"
    assert setup.metadata["taskmaster"] == {
        "id": "1",
        "tag": "master",
        "status": "done",
        "test_strategy": "CI is green",
    }
    login = store.get_task("tm-2")
    assert login.status == "todo" and login.unmet_deps == 0  # its dependency is done
    session = store.get_task("tm-2.2")
    assert session.parent_task_id == "tm-2" and store.depends_on_ids("tm-2.2") == ["tm-2.1"]
    assert session.unmet_deps == 0
    assert store.get_task("tm-3").status == "backlog"
    assert store.get_task("tm-4").status == "in_review"
    flag = store.get_task("tm-feature-x-1")
    assert flag.status == "cancelled" and flag.labels == ["taskmaster", "feature-x"]

    again = taskmaster.import_file(TASKMASTER)
    assert (again.created, again.existing, again.links, again.moved) == (0, 7, 0, 0)


@pytest.mark.django_db
def test_a_file_that_is_not_taskmasters_is_refused():
    from core.errors import ValidationFailed
    from ops import taskmaster

    with pytest.raises(ValidationFailed, match="no 'tasks' list"):
        taskmaster.import_file('{"hello": 1}')
    with pytest.raises(ValidationFailed, match="not JSON"):
        taskmaster.import_file("{")


# --- damaged files: refused whole, one line naming the fault, nothing written -------


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _text(records: list[dict]) -> list[str]:
    return [json.dumps(record, ensure_ascii=False) + "\n" for record in records]


def _first(records: list[dict], kind: str) -> dict:
    return next(record for record in records if record["type"] == kind)


def _truncated(records):
    return records[: len(records) // 2]


def _wrong_count(records):
    records[-1]["counts"]["task"] += 1
    return records


def _unknown_column(records):
    _first(records, "task")["colour"] = "red"
    return records


def _missing_column(records):
    del _first(records, "comment")["body"]
    return records


def _status_outside_the_seven(records):
    _first(records, "task")["status"] = "finished"
    return records


def _wrong_type(records):
    _first(records, "task")["priority"] = "high"
    return records


def _bad_time(records):
    _first(records, "task")["created_at"] = "yesterday"
    return records


def _dangling_reference(records):
    _first(records, "task_dep")["depends_on_id"] = "no-such-task"
    return records


def _unknown_user(records):
    _first(records, "agent")["owner"] = "mallory"
    return records


def _nul(records):
    _first(records, "task")["title"] = "bad\u0000title"
    return records


def _too_long(records):
    _first(records, "task")["title"] = "x" * 501
    return records


def _twice(records):
    task = _first(records, "task")
    records.insert(records.index(task), dict(task))
    records[-1]["counts"]["task"] += 1
    return records


def _agent_labels_past_the_cap(records):
    # An export from before the cap of 64 labels an agent (claim-next asks one term a
    # label; SQLite's compound SELECT holds 500).
    _first(records, "agent")["labels"] = [f"skill-{n}" for n in range(65)]
    return records


def _agent_label_too_long(records):
    _first(records, "agent")["labels"] = ["gpu", "x" * 65]
    return records


def _after_the_end(records):
    return [*records, dict(_first(records, "chat"))]


DAMAGE = {
    "truncated": (_truncated, "truncated: no end record"),
    "wrong count": (_wrong_count, "the end record counts 4 task record(s), the file holds 3"),
    "unknown column": (_unknown_column, "task record: unknown column 'colour'"),
    "missing column": (_missing_column, "comment record: no 'body' column"),
    "status": (_status_outside_the_seven, "status 'finished' is not one of backlog, todo"),
    "type": (_wrong_type, "task record: priority must be an integer"),
    "time": (_bad_time, "created_at 'yesterday' is not an ISO-8601 time"),
    "reference": (_dangling_reference, "depends_on_id 'no-such-task' names no task record"),
    "user": (_unknown_user, "owner 'mallory' names no user record"),
    "nul": (_nul, "title: contains a NUL character"),
    "too long": (_too_long, "title is longer than 500 characters"),
    "twice": (_twice, "twice"),
    "after the end": (_after_the_end, "a record after the end record"),
    "agent labels": (
        _agent_labels_past_the_cap,
        "agent record: labels: at most 64 labels (agent 'bot'",
    ),
    "agent label": (
        _agent_label_too_long,
        "agent record: labels: must be a list of non-empty strings",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_export_is_refused_whole_naming_the_fault(damage):
    build_a_team()
    damaged = _text(DAMAGE[damage][0](_records(export_text("acme"))))
    before = export_text()
    # Checked whole before the write (even before the database is found not empty).
    with pytest.raises(transfer.ValidationFailed) as refused:
        transfer.import_lines(damaged)
    assert DAMAGE[damage][1] in refused.value.detail
    assert "\n" not in refused.value.detail
    assert export_text() == before


@pytest.mark.django_db(transaction=True)
# The refusal is the command's reading of a file, before any write: no engine can
# change it, so it runs in the SQLite pass alone.
@pytest.mark.backend_independent
def test_the_import_command_refuses_in_one_line_without_a_traceback(tmp_path):
    build_a_team()
    text = export_text("acme")
    state = tmp_path / "state"
    fresh = fresh_databases(tmp_path, both=False)
    try:
        for _vendor, url in fresh:
            clawboo(url, state, "migrate")
            for name, body in (
                ("nul.jsonl", "".join(_text(_nul(_records(text))))),
                ("cut.jsonl", text[: len(text) // 2]),
                ("binary.jsonl", None),
            ):
                path = tmp_path / name
                if body is None:
                    path.write_bytes(b'{"type":"clawboo-export","version":1}\n\xff\xfe\n')
                else:
                    path.write_text(body)
                done = subprocess.run(
                    [sys.executable, "-m", "clawboo.cli", "import", str(path)],
                    env={
                        **os.environ,
                        "DATABASE_URL": url,
                        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
                        "CLAWBOO_STATE_DIR": str(state),
                        "PYTHONPATH": str(ROOT),
                    },
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                assert done.returncode != 0, name
                assert "Traceback" not in done.stderr, done.stderr
                assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert '"type":"task"' not in clawboo(url, state, "export")  # nothing written
    finally:
        drop_databases(fresh)


def build_the_demo_with_governance(tmp_path: Path, settings) -> dict[str, str]:
    """`clawboo demo` (it registers a repository), then what a team governs it with:
    a budget, a task approval given, a tool approval answered allow_always, and a
    machine token binding an agent to a host."""
    from django.core.management import call_command

    from board.store import spend, tool_approvals
    from core import machines

    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    settings.CLAWBOO_REPO_ROOTS = []
    call_command("demo", "--dir", str(tmp_path / "demo"))
    User = get_user_model()
    User.objects.create_user("ada", "ada@example.com", "pw", is_staff=True)
    spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "day",
            "limit_cents": 500,
            "mode": "cap",
        },
    )
    risky = store.create_task(
        team="demo", title="Risky", approval_required=True, repository="shop"
    ).task
    store.decide_approval(risky.id, "approve", by="ada")
    asked = tool_approvals.ask(risky.id, "demo-coder", "Bash", {"command": "make"})
    assert asked is not None
    tool_approvals.decide(asked.id, "allow_always", by="ada")
    registry.create_agent(
        id="gpu-bot",
        display_name="GPU",
        team="demo",
        runtime="command",
        settings={"argv": ["true"]},
    )
    machines.mint("gpu-1", ["gpu-bot"])
    return {"risky": risky.id}


@pytest.mark.django_db(transaction=True)
def test_the_demo_with_repository_budget_approvals_and_a_machine_token_round_trips(
    tmp_path, settings
):
    made = build_the_demo_with_governance(tmp_path, settings)
    original = export_text()
    kinds = [json.loads(text)["type"] for text in original.splitlines()]
    for kind in ("repository", "budget", "tool_approval", "tool_grant", "machine_binding"):
        assert kind in kinds, kind
    # No secret of the machine token leaves: neither its key's hash nor its user.
    from core.models import MachineToken

    token = MachineToken.objects.get()
    assert token.key_hash not in original and token.prefix not in original
    assert token.user.username not in original
    (tmp_path / "demo.jsonl").write_text(original, encoding="utf-8")

    found = fresh_databases(tmp_path)
    try:
        for vendor, url in found:
            state = tmp_path / f"state-{vendor}"
            clawboo(url, state, "migrate", "-v", "0")
            said = clawboo(url, state, "import", str(tmp_path / "demo.jsonl"))
            assert said.startswith("imported "), said
            assert "1 repository" in said and "1 budget" in said and "1 machine_binding" in said
            # The binding came back with a new key, said once, for that host.
            assert "machine token re-minted for host gpu-1 (agents gpu-bot): " in said
            # The same board, repositories, budgets, approvals and bindings.
            assert clawboo(url, state, "export") == original, vendor
            # A second import of the same file is refused whole: nothing written.
            env_args = (url, state)
            again = subprocess.run(
                [sys.executable, "-m", "clawboo.cli", "import", str(tmp_path / "demo.jsonl")],
                env={
                    **os.environ,
                    "DATABASE_URL": env_args[0],
                    "DJANGO_SETTINGS_MODULE": "clawboo.settings",
                    "CLAWBOO_STATE_DIR": str(env_args[1]),
                    "PYTHONPATH": str(ROOT),
                },
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=240,
            )
            assert again.returncode != 0 and "not empty" in again.stderr, again.stderr
            assert "Traceback" not in again.stderr
            assert clawboo(url, state, "export") == original, vendor
    finally:
        drop_databases(found)
    assert made["risky"] in original
