"""The real Codex CLI against the scripted Responses endpoint (no project code)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real_runtimes.hermetic import (
    CliRun,
    ProcessGroups,
    Tool,
    codex_env,
    git_repo,
    live_group_members,
)
from tests.real_runtimes.model_server import BAD_KEY, ModelServer, Script

pytestmark = [pytest.mark.real_runtimes, pytest.mark.timeout(120)]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    # Codex refuses a directory that is not a git repository (or --skip-git-repo-check).
    return git_repo(tmp_path / "work")


def codex_run(
    processes: ProcessGroups,
    tool: Tool,
    server: ModelServer,
    work: Path,
    *args: str,
    key: str | None = None,
    timeout_s: float = 60,
) -> CliRun:
    env = codex_env(work.parent / "home", server.url_v1, **({"key": key} if key else {}))
    return processes.run(
        [tool.bin, "exec", "--json", *args], env=env, cwd=work, timeout_s=timeout_s
    )


def sandboxed(work: Path) -> list[str]:
    return ["--sandbox", "workspace-write", "-C", str(work)]


def test_it_writes_the_file_through_its_shell_tool(
    processes: ProcessGroups, codex: Tool, model_server: ModelServer, work: Path
) -> None:
    run = codex_run(processes, codex, model_server, work, *sandboxed(work), "Write hello.txt")
    assert run.returncode == 0, run.describe()
    assert (work / "hello.txt").read_text() == "hello from the fake model\n"
    kinds = [e["type"] for e in run.jsonl()]
    assert kinds[0] == "thread.started" and kinds[-1] == "turn.completed"
    items = [e["item"] for e in run.of_type("item.completed")]
    # A custom provider's model has no metadata: Codex says so as an error *item*,
    # which is not a failure of the run.
    assert items[0]["type"] == "error"
    assert any(i["type"] == "command_execution" and i["exit_code"] == 0 for i in items)
    assert items[-1] == {
        "id": items[-1]["id"],
        "type": "agent_message",
        "text": "DONE: wrote the file.",
    }
    usage = run.of_type("turn.completed")[0]["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert model_server.replies() == ["tool_call:exec_command", "text"]


def test_resume_takes_exec_flags_before_resume_and_keeps_the_thread(
    processes: ProcessGroups, codex: Tool, model_server: ModelServer, work: Path
) -> None:
    first = codex_run(processes, codex, model_server, work, *sandboxed(work), "Write hello.txt")
    thread_id = first.of_type("thread.started")[0]["thread_id"]
    second = codex_run(
        processes, codex, model_server, work, *sandboxed(work), "resume", thread_id, "Carry on"
    )
    assert second.returncode == 0, second.describe()
    assert second.of_type("thread.started")[0]["thread_id"] == thread_id
    assert model_server.replies()[-1] == "text"

    # Flags after "resume" are rejected.
    refused = codex_run(
        processes,
        codex,
        model_server,
        work,
        "resume",
        "--sandbox",
        "workspace-write",
        thread_id,
        "Carry on",
    )
    assert refused.returncode == 2, refused.describe()


def test_full_auto_is_rejected(
    processes: ProcessGroups, codex: Tool, model_server: ModelServer, work: Path
) -> None:
    run = codex_run(processes, codex, model_server, work, "--full-auto", "hi")
    assert run.returncode != 0
    assert model_server.model_requests() == []


def test_auth_failure_is_error_then_turn_failed_exit_1(
    processes: ProcessGroups, codex: Tool, model_server: ModelServer, work: Path
) -> None:
    run = codex_run(
        processes, codex, model_server, work, *sandboxed(work), "Write hello.txt", key=BAD_KEY
    )
    assert run.returncode == 1, run.describe()
    assert [e["type"] for e in run.jsonl()][-2:] == ["error", "turn.failed"]
    message = run.of_type("turn.failed")[0]["error"]["message"]
    assert message.startswith("unexpected status 401 Unauthorized: Incorrect API key provided")
    assert model_server.replies() == ["401"]


def test_a_500_fails_the_turn_without_retries(
    processes: ProcessGroups, codex: Tool, model_server: ModelServer, work: Path
) -> None:
    model_server.script = Script(failure="500")
    run = codex_run(processes, codex, model_server, work, *sandboxed(work), "Write hello.txt")
    assert run.returncode == 1, run.describe()
    assert run.of_type("turn.failed")
    assert model_server.replies() == ["500"]


def test_a_hanging_model_is_bounded_and_leaves_no_process(
    processes: ProcessGroups, codex: Tool, model_server: ModelServer, work: Path
) -> None:
    model_server.script = Script(failure="hang")
    run = codex_run(
        processes, codex, model_server, work, *sandboxed(work), "Write hello.txt", timeout_s=8
    )
    assert run.timed_out, run.describe()
    assert live_group_members(run.pgid) == []
