"""Approval before a tool runs, end to end (issue 34): the executor runs the real Claude
Code with the board's MCP server as its permission prompt tool; the scripted model asks
for a Bash command its permission mode (acceptEdits) does not allow, and the call waits
on the board for a person.

- the pending approval shows at ``GET /api/approvals`` within seconds;
- ``allow_once``: the command ran (its file exists) and the run completes;
- ``deny``: it did not run, and the run ends failed with the denial in its log;
- no answer: denied at the timeout (fail closed), and no process is left.
"""

from __future__ import annotations

import json
import os
import shlex
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from board.models import ToolApproval
from core import registry
from executor.runner import Executor
from tests.real_runtimes.hermetic import installed
from tests.real_runtimes.model_server import ModelServer, Script
from tests.real_runtimes.test_executor_acceptance import RUNTIMES

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]
TIMEOUT_MS = 6_000  # how long the board waits for a person in these runs


@pytest.fixture
def board(daphne: Callable[..., str], settings: Any) -> str:
    # Tickets are signed: the server must check them with the test's key.
    base = daphne(
        extra_env={
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "CLAWBOO_TOOL_APPROVAL_TIMEOUT_MS": str(TIMEOUT_MS),
        }
    )
    settings.CLAWBOO_MCP_URL = f"{base}/mcp/"
    return base


@pytest.fixture
def person(db: None) -> str:
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    return Token.objects.create(user=user).key


def call(base: str, key: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def start_run(
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    repo: Path,
) -> tuple[str, Path, threading.Thread, dict[str, Any]]:
    """A claude-code agent whose model runs one Bash command (writing ``proof``), on
    a fresh task, in a thread: the run blocks while the call waits for a person."""
    runtime = RUNTIMES["claude-code"]
    tool = installed(runtime.tool)
    for name, value in runtime.env(tmp_path / "agent-home", model_server.url).items():
        monkeypatch.setenv(name, value)
    proof = tmp_path / "proof.txt"
    model_server.script = Script(command=f"echo ran > {shlex.quote(str(proof))}", board_calls=False)
    registry.create_agent(
        id="real",
        display_name="Real",
        team="default",
        runtime="claude-code",
        settings={"binary": str(tool.bin), "repo_path": str(repo), "timeout_s": 120},
    )
    task_id = store.create_task(title="Run the migration", file_mutating=False).task.id
    out: dict[str, Any] = {}

    def work() -> None:
        out["report"] = Executor("real").work_once()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return task_id, proof, thread, out


def pending_via_api(board: str, key: str, within_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        status, body = call(board, key, "GET", "/api/approvals")
        assert status == 200, body
        if body:
            return body[0]
        time.sleep(0.2)
    raise AssertionError("no pending approval showed up")


def test_allow_once_runs_the_command_and_the_run_completes(
    board: str,
    person: str,
    model_server: ModelServer,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task_id, proof, thread, out = start_run(model_server, tmp_path, monkeypatch, repo)
    asked = time.monotonic()

    pending = pending_via_api(board, person)

    assert time.monotonic() - asked < 45  # the CLI's start-up and two model turns
    assert (pending["task_id"], pending["agent_id"], pending["tool"]) == (task_id, "real", "Bash")
    assert str(proof) in pending["arguments"]["command"]
    assert not proof.exists()  # it waits: nothing ran yet
    status, decided = call(
        board, person, "POST", f"/api/approvals/{pending['id']}", {"decision": "allow_once"}
    )
    assert status == 200 and decided["state"] == "allowed" and decided["decided_by"] == "ada"
    status, again = call(
        board, person, "POST", f"/api/approvals/{pending['id']}", {"decision": "deny"}
    )
    assert status == 409 and again["error"] == "conflict"
    thread.join(timeout=150)

    assert not thread.is_alive()
    assert proof.read_text() == "ran\n"
    assert out["report"].outcome == "succeeded", out["report"].error
    assert store.list_executions(task_id).get().status == "succeeded"


def test_deny_keeps_the_command_from_running_and_the_run_says_so(
    board: str,
    person: str,
    model_server: ModelServer,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task_id, proof, thread, out = start_run(model_server, tmp_path, monkeypatch, repo)

    pending = pending_via_api(board, person)
    status, _ = call(board, person, "POST", f"/api/approvals/{pending['id']}", {"decision": "deny"})
    assert status == 200
    thread.join(timeout=150)

    assert not thread.is_alive() and not proof.exists()
    execution = store.list_executions(task_id).get()
    assert execution.status == "failed"
    assert "denied" in execution.log and "Bash" in (execution.error or "")


def test_no_answer_is_a_deny_at_the_timeout_and_leaves_no_process(
    board: str,
    person: str,
    model_server: ModelServer,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task_id, proof, thread, out = start_run(model_server, tmp_path, monkeypatch, repo)

    pending = pending_via_api(board, person)
    thread.join(timeout=150)

    assert not thread.is_alive() and not proof.exists()
    row = ToolApproval.objects.get(pk=pending["id"])
    assert row.state == "timed_out" and row.decided_by is None
    waited = (row.decided_at - row.created_at).total_seconds()
    assert TIMEOUT_MS / 1000 - 0.5 <= waited < TIMEOUT_MS / 1000 + 5
    execution = store.list_executions(task_id).get()
    assert execution.status == "failed" and "in time" in execution.log
    assert processes_of(tmp_path / "agent-home") == []


def processes_of(home: Path) -> list[int]:
    """Live processes whose environment names the agent's home (the CLI and anything
    it started)."""
    marker = str(home).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # gone, or not ours
    return found
