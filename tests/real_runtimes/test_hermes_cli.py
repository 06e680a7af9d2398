"""The real Hermes CLI against the scripted Chat Completions endpoint (no project code)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.real_runtimes.hermetic import (
    CliRun,
    ProcessGroups,
    Tool,
    hermes_env,
    live_group_members,
)
from tests.real_runtimes.model_server import AUTH_401_MARKER, ModelServer, Script

pytestmark = [pytest.mark.real_runtimes, pytest.mark.timeout(180)]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


def hermes_run(
    processes: ProcessGroups,
    tool: Tool,
    server: ModelServer,
    work: Path,
    *args: str,
    timeout_s: float = 90,
) -> CliRun:
    env = hermes_env(work.parent / "home", server.url_v1)
    return processes.run([tool.bin, *args], env=env, cwd=work, timeout_s=timeout_s)


def usage(path: Path) -> dict:
    return json.loads(path.read_text())


def test_one_shot_writes_the_file_and_reports_usage(
    processes: ProcessGroups, hermes: Tool, model_server: ModelServer, work: Path, tmp_path: Path
) -> None:
    report = tmp_path / "usage.json"
    run = hermes_run(
        processes, hermes, model_server, work, "-z", "Write hello.txt", "--usage-file", str(report)
    )
    assert run.returncode == 0, run.describe()
    assert (work / "hello.txt").read_text() == "hello from the fake model\n"
    assert run.stdout == "DONE: wrote the file.\n"
    found = usage(report)
    assert (found["completed"], found["failed"]) == (True, False)
    assert found["input_tokens"] > 0 and found["output_tokens"] > 0
    assert found["cost_status"] == "unknown"  # no price known: not a cost of 0
    assert re.fullmatch(r"\d{8}_\d{6}_[0-9a-f]{6}", found["session_id"])
    assert model_server.replies() == ["tool_call:write_file", "text"]


def test_one_shot_exits_0_on_a_model_401_and_only_the_usage_file_says_failed(
    processes: ProcessGroups, hermes: Tool, model_server: ModelServer, work: Path, tmp_path: Path
) -> None:
    report = tmp_path / "usage.json"
    run = hermes_run(
        processes,
        hermes,
        model_server,
        work,
        "-z",
        f"{AUTH_401_MARKER} Write hello.txt",
        "--usage-file",
        str(report),
    )
    assert run.returncode == 0, run.describe()
    assert run.stdout.startswith("HTTP 401: Incorrect API key provided")
    found = usage(report)
    assert (found["completed"], found["failed"]) == (False, True)
    assert found["session_id"] is None and found["input_tokens"] is None


def test_one_shot_ignores_resume_but_chat_q_resumes_the_session(
    processes: ProcessGroups, hermes: Tool, model_server: ModelServer, work: Path, tmp_path: Path
) -> None:
    first_report = tmp_path / "first.json"
    hermes_run(
        processes,
        hermes,
        model_server,
        work,
        "-z",
        "Write hello.txt",
        "--usage-file",
        str(first_report),
    )
    session = usage(first_report)["session_id"]

    again = tmp_path / "again.json"
    hermes_run(
        processes,
        hermes,
        model_server,
        work,
        "-z",
        "Carry on",
        "--resume",
        session,
        "--usage-file",
        str(again),
    )
    assert usage(again)["session_id"] != session

    resumed = hermes_run(
        processes, hermes, model_server, work, "chat", "-q", "Carry on", "-Q", "--resume", session
    )
    assert resumed.returncode == 0, resumed.describe()
    assert f"session_id: {session}" in resumed.stderr
    assert f"Resumed session {session}" in resumed.stderr
    assert resumed.stdout.rstrip().endswith("DONE: wrote the file.")
    messages = model_server.model_requests()[-1].body["messages"]
    assert any("Write hello.txt" in str(m.get("content")) for m in messages)

    # --usage-file belongs to -z only.
    refused = hermes_run(
        processes,
        hermes,
        model_server,
        work,
        "chat",
        "-q",
        "x",
        "-Q",
        "--usage-file",
        str(tmp_path / "no.json"),
    )
    assert refused.returncode == 2


def test_chat_q_exits_1_when_the_model_fails(
    processes: ProcessGroups, hermes: Tool, model_server: ModelServer, work: Path
) -> None:
    model_server.script = Script(failure="500")
    run = hermes_run(processes, hermes, model_server, work, "chat", "-q", "Write hello.txt", "-Q")
    assert run.returncode == 1, run.describe()
    assert "HTTP 500" in run.stdout
    assert re.search(r"^session_id: \S+$", run.stderr, re.M)
    assert model_server.replies() == ["500"]  # agent.api_max_retries: 1


def test_provider_without_model_exits_2(
    processes: ProcessGroups, hermes: Tool, model_server: ModelServer, work: Path
) -> None:
    run = hermes_run(processes, hermes, model_server, work, "-z", "hi", "--provider", "custom")
    assert run.returncode == 2
    assert "--provider requires --model" in run.stderr


def test_a_hanging_model_is_bounded_and_leaves_no_process(
    processes: ProcessGroups, hermes: Tool, model_server: ModelServer, work: Path
) -> None:
    model_server.script = Script(failure="hang")
    run = hermes_run(processes, hermes, model_server, work, "-z", "Write hello.txt", timeout_s=15)
    assert run.timed_out, run.describe()
    assert live_group_members(run.pgid) == []
