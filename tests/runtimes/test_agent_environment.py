"""An agent's process inherits none of the server's or worker's own configuration
(core.worker_environment, GOVERNANCE §6): a run's CLI, the verify gate that runs what
the agent wrote, and git in a checkout the agent wrote to -- each a real process
printing the environment it was given."""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from core.worker_environment import WORKERS_OWN, is_workers_own
from executor import rest, verification
from executor.runtimes import Outcome, RunRequest, adapter_for
from executor.runtimes.process import run_process
from tests.fixtures.gitrepos import make_repo
from worktrees.git import git_env, run_git

ROOT = Path(__file__).resolve().parent.parent.parent

# What an operator sets for the board's own use, beside what settings.py names.
THE_BOARDS = {
    "DATABASE_URL": "postgres://board:pw@db/board",
    "PGPASSWORD": "board-db-password",
    "PGHOST": "db.internal",
    "PGUSER": "board",
    "PGPASSFILE": "/srv/board/.pgpass",
    "PGSERVICE": "board",
    "PGSERVICEFILE": "/srv/board/pg_service.conf",
    "REDIS_URL": "redis://:pw@cache/0",
    "DJANGO_SECRET_KEY": "signs-tickets",
    "DJANGO_SETTINGS_MODULE": "clawboo.settings",
    "CLAWBOO_TOKEN": "machine-key",
    "CLAWBOO_REDIS_URL": "redis://:pw@cache/1",
    "EMAIL_HOST_PASSWORD": "smtp-password",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer collector",
}
PRINTS_ENV = "import json, os; print(json.dumps(dict(os.environ)))"
PRINT_ENV = [sys.executable, "-c", PRINTS_ENV]


@pytest.fixture
def boards_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in THE_BOARDS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AGENT_CLI_API_KEY", "the-cli-may-keep-its-own")


def printed(text: str) -> dict[str, str]:
    return json.loads(text.strip().splitlines()[-1])


def test_an_agents_run_inherits_none_of_the_boards_own_configuration(
    boards_environment: None, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    argv = ["sh", "-c", f"{' '.join(map(repr, PRINT_ENV))} > env.json"]

    result = adapter_for("command").run(make_request(settings={"argv": argv}))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    seen = json.loads((worktree / "env.json").read_text())
    assert sorted(set(THE_BOARDS) & set(seen)) == []
    assert seen["AGENT_CLI_API_KEY"] == "the-cli-may-keep-its-own"
    assert seen["CLAWBOO_TASK_ID"] == "T-42"  # the task's own variables still arrive


def test_the_verify_gate_inherits_none_of_it(boards_environment: None, tmp_path: Path) -> None:
    run = run_process(PRINT_ENV, cwd=tmp_path, env=verification._environment(), timeout_s=30)

    seen = printed(run.log_tail)
    assert sorted(set(THE_BOARDS) & set(seen)) == []
    assert seen["AGENT_CLI_API_KEY"] == "the-cli-may-keep-its-own"


def test_what_git_starts_in_a_checkout_inherits_none_of_it(
    boards_environment: None, tmp_path: Path
) -> None:
    # An agent can plant what git runs (a filter driver, an alias, a hook of the
    # shared git directory): git's own environment is what those inherit.
    repo = make_repo(tmp_path / "repo")
    alias = ["-c", f"alias.penv=!{sys.executable} -c '{PRINTS_ENV}'"]
    server = printed(run_git([*alias, "penv"], cwd=repo, env=None).stdout)
    worker = printed(rest.git([*alias, "penv"], repo))

    for seen in (server, worker):
        assert sorted(set(THE_BOARDS) & set(seen)) == []
    assert "CLAWBOO_TOKEN" not in git_env()


def test_the_remote_workers_git_runs_no_hook_the_run_planted(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {tmp_path / 'ran'}\n")
    hook.chmod(0o755)
    (repo / "new.txt").write_text("x\n")

    rest.git(["add", "-A"], repo)
    rest.git(["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "-m", "m"], repo)

    assert not (tmp_path / "ran").exists()


def _names_read(path: Path) -> set[str]:
    """Every literal variable name ``path`` reads from the environment."""
    readers = {"get", "env_int", "env_bool", "env_json", "getenv"}
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            environ = not isinstance(func, ast.Attribute) or "environ" in ast.unparse(func)
            if called in readers and environ and isinstance(first, ast.Constant):
                if isinstance(first.value, str) and first.value.isupper():
                    names.add(first.value)
    return names


def test_every_variable_the_server_reads_for_itself_is_a_row_of_the_table() -> None:
    read = _names_read(ROOT / "clawboo" / "settings.py") | {"REDIS_URL", "PGPASSWORD"}
    assert len(read) > 20  # the walk found the settings' knobs
    assert sorted(name for name in read if not is_workers_own(name)) == []
    assert all(row.why for row in WORKERS_OWN)
