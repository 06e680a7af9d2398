"""The real Claude Code CLI against the scripted model endpoint (no project code).

These prove the endpoint and the hermetic environment, and pin down what the real
tool prints: the lines the adapter parses and the fixtures under tests/runtimes/.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.real_runtimes.hermetic import ProcessGroups, Tool, claude_env, live_group_members
from tests.real_runtimes.model_server import BAD_KEY, ModelServer, Script

pytestmark = [pytest.mark.real_runtimes, pytest.mark.timeout(120)]

STREAM = ["--output-format", "stream-json", "--verbose"]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


def claude(
    processes: ProcessGroups,
    tool: Tool,
    server: ModelServer,
    work: Path,
    *args: str,
    key: str | None = None,
    timeout_s: float = 60,
):
    env = claude_env(work.parent / "home", server.url, **({"key": key} if key else {}))
    return processes.run([tool.bin, *args], env=env, cwd=work, timeout_s=timeout_s)


def result_line(run) -> dict:
    results = run.of_type("result")
    assert len(results) == 1, run.describe()
    return results[0]


def test_accept_edits_writes_the_file_and_reports_success(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "Write hello.txt",
        *STREAM,
        "--permission-mode",
        "acceptEdits",
    )
    assert run.returncode == 0, run.describe()
    assert (work / "hello.txt").read_text() == "hello from the fake model\n"
    init = run.jsonl()[0]
    assert init["type"] == "system" and init["subtype"] == "init"
    assert init["permissionMode"] == "acceptEdits"
    assert init["claude_code_version"] == claude_code.version
    result = result_line(run)
    assert result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "DONE: wrote the file."
    assert result["session_id"] == init["session_id"]
    assert result["permission_denials"] == []
    assert result["usage"]["input_tokens"] > 0 and result["total_cost_usd"] > 0
    assert model_server.replies() == ["tool_call:Write", "text"]


def test_resume_continues_the_same_session(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    first = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "Write hello.txt",
        *STREAM,
        "--permission-mode",
        "acceptEdits",
    )
    session = result_line(first)["session_id"]
    second = claude(
        processes,
        claude_code,
        model_server,
        work,
        *STREAM,
        "--permission-mode",
        "acceptEdits",
        f"--resume={session}",
        "-p",
        "--",
        "Carry on",
    )
    assert second.returncode == 0, second.describe()
    assert result_line(second)["session_id"] == session
    # The resumed conversation carries the first run's tool result, so the script
    # answers with the final text straight away.
    last = model_server.model_requests()[-1].body
    assert any("Write hello.txt" in str(m.get("content")) for m in last["messages"])
    assert model_server.replies()[-1] == "text"


def test_with_no_permission_mode_the_write_is_denied_yet_the_run_says_success(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    run = claude(processes, claude_code, model_server, work, "-p", "Write hello.txt", *STREAM)
    assert run.returncode == 0, run.describe()
    assert not (work / "hello.txt").exists()
    denied = [e for e in run.of_type("system") if e.get("subtype") == "permission_denied"]
    assert denied and denied[0]["tool_name"] == "Write"
    result = result_line(run)
    assert (result["subtype"], result["is_error"]) == ("success", False)
    assert [d["tool_name"] for d in result["permission_denials"]] == ["Write"]


def test_auth_failure_is_is_error_with_subtype_success_and_exit_1(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "Write hello.txt",
        *STREAM,
        "--permission-mode",
        "acceptEdits",
        key=BAD_KEY,
    )
    assert run.returncode == 1, run.describe()
    result = result_line(run)
    assert (result["subtype"], result["is_error"]) == ("success", True)
    assert result["api_error_status"] == 401
    assert "Invalid API key" in result["result"]
    assert model_server.replies() == ["401"]  # retries are off


def test_a_500_is_an_error_result_without_retries(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    model_server.script = Script(failure="500")
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "Write hello.txt",
        *STREAM,
        "--permission-mode",
        "acceptEdits",
    )
    assert run.returncode == 1, run.describe()
    result = result_line(run)
    assert result["is_error"] is True and result["api_error_status"] == 500
    assert model_server.replies() == ["500"]


def test_max_turns_ends_with_error_max_turns(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "Write hello.txt",
        *STREAM,
        "--permission-mode",
        "acceptEdits",
        "--max-turns",
        "1",
    )
    result = result_line(run)
    assert (result["subtype"], result["is_error"]) == ("error_max_turns", True), run.describe()


def test_a_hanging_model_is_bounded_and_leaves_no_process(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    model_server.script = Script(failure="hang")
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "Write hello.txt",
        *STREAM,
        "--permission-mode",
        "acceptEdits",
        timeout_s=8,
    )
    assert run.timed_out, run.describe()
    assert live_group_members(run.pgid) == []


def test_the_permission_modes_it_accepts(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "hi",
        *STREAM,
        "--permission-mode",
        "no-such-mode",
    )
    assert run.returncode != 0
    assert (
        "Allowed choices are acceptEdits, auto, bypassPermissions, manual, dontAsk, plan"
        in run.stderr
    ), run.describe()


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for root only")
def test_bypass_permissions_is_refused_as_root(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    run = claude(
        processes,
        claude_code,
        model_server,
        work,
        "-p",
        "hi",
        *STREAM,
        "--permission-mode",
        "bypassPermissions",
    )
    assert run.returncode == 1
    assert "cannot be used with root/sudo privileges" in run.stderr
    assert model_server.model_requests() == []


def test_setting_sources_user_ignores_the_projects_hooks_and_mcp_json(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    """What the adapter passes (executor/runtimes/claude_code.py) so a run reads no
    configuration its worktree holds: without it, the real CLI in -p mode runs a
    SessionStart hook from the project's .claude/settings.json."""
    marker = work.parent / "hook-ran"
    hook = {"type": "command", "command": f"touch {marker}"}
    (work / ".claude").mkdir()
    (work / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"SessionStart": [{"hooks": [hook]}]}})
    )
    args = ["-p", "Write hello.txt", *STREAM, "--permission-mode", "acceptEdits"]

    plain = claude(processes, claude_code, model_server, work, *args)
    assert plain.returncode == 0, plain.describe()
    assert marker.exists(), "the real CLI no longer runs a project hook: revisit the flag"
    marker.unlink()

    closed = claude(
        processes,
        claude_code,
        model_server,
        work,
        "--setting-sources",
        "user",
        "--strict-mcp-config",
        *args,
    )
    assert closed.returncode == 0, closed.describe()
    assert not marker.exists()


def system_prompt(server: ModelServer) -> str:
    """The system prompt of the run's first model request, as text."""
    first = server.model_requests()[0].body
    system = first.get("system")
    if isinstance(system, list):
        return "\n".join(str(block.get("text", "")) for block in system)
    return str(system or "")


def test_setting_sources_user_drops_claude_md_and_append_system_prompt_carries_it(
    processes: ProcessGroups, claude_code: Tool, model_server: ModelServer, work: Path
) -> None:
    """Why the adapter hands the project's instructions over itself: the flag that
    keeps the worktree's settings out keeps its CLAUDE.md out too, and
    ``--append-system-prompt=`` (the equals form the adapter uses: the text may start
    with "-") puts text in the system prompt the model is sent."""
    (work / "CLAUDE.md").write_text("Worktree rule: CLAWBOO-WORKTREE-MARKER.\n")
    args = ["-p", "Write hello.txt", *STREAM, "--permission-mode", "acceptEdits"]
    closed = ["--setting-sources", "user", "--strict-mcp-config"]

    plain = claude(processes, claude_code, model_server, work, *args)
    assert plain.returncode == 0, plain.describe()
    assert "CLAWBOO-WORKTREE-MARKER" in json.dumps(model_server.model_requests()[0].body), (
        "the real CLI no longer reads CLAUDE.md by default: revisit the adapter"
    )

    model_server.requests.clear()
    without = claude(processes, claude_code, model_server, work, *closed, *args)
    assert without.returncode == 0, without.describe()
    assert "CLAWBOO-WORKTREE-MARKER" not in json.dumps(
        [r.body for r in model_server.model_requests()]
    )

    model_server.requests.clear()
    given = "- Base rule: CLAWBOO-BASE-MARKER.\nSecond line."
    told = claude(
        processes,
        claude_code,
        model_server,
        work,
        *closed,
        f"--append-system-prompt={given}",
        *args,
    )
    assert told.returncode == 0, told.describe()
    assert given in system_prompt(model_server)
    assert "CLAWBOO-WORKTREE-MARKER" not in json.dumps(
        [r.body for r in model_server.model_requests()]
    )
