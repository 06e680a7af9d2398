"""Codex: the exec --json event parser over lines the real CLI (0.171.0) printed, and
the adapter against a stand-in ``codex`` on PATH that prints them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from executor.runtimes import Outcome, RunRequest, adapter_for
from executor.runtimes.codex import CodexEventParser
from tests.runtimes.stand_ins import (
    fixture_lines,
    install_stand_in,
    kill_if_running,
    real_lines,
    wait_until_gone,
)

WRITE = "codex/run1-write-file.jsonl"
AUTH_401 = "codex/run3-auth-401.jsonl"
THREAD = "01a230a7-5848-7f81-8306-aaf76b3e470c"


def parse(name: str) -> CodexEventParser:
    parser = CodexEventParser()
    lines = real_lines(name) if name.startswith("codex/") else fixture_lines(name)
    for line in lines:
        parser.feed(line)
    return parser


def test_the_parser_reads_thread_usage_and_the_last_agent_message() -> None:
    parsed = parse(WRITE).parsed

    # The "Model metadata ... not found" error *item* a custom provider gets is not a
    # failure of the run.
    assert parsed.ok is True
    assert parsed.native_session_id == THREAD
    assert parsed.tokens_in == 21128  # cached tokens are already inside input_tokens
    assert parsed.tokens_out == 14
    assert parsed.cost_cents is None  # codex reports no cost
    assert parsed.summary == "DONE: wrote the file."


def test_a_failed_turn_is_a_failure_with_its_message() -> None:
    parsed = parse(AUTH_401).parsed

    assert parsed.ok is False
    assert parsed.error == (
        "codex turn failed: unexpected status 401 Unauthorized: Incorrect API key provided "
        "(fake), url: http://127.0.0.1:45683/v1/responses"
    )


def test_a_transient_error_followed_by_a_completed_turn_is_a_success() -> None:
    parsed = parse("codex_transient_error.jsonl").parsed

    assert parsed.ok is True
    assert parsed.error == ""
    assert parsed.summary == "Done after a retry."


def test_the_parser_skips_malformed_lines_unknown_events_and_bad_values() -> None:
    parsed = parse("codex_noisy.jsonl").parsed

    assert parsed.ok is True
    assert parsed.native_session_id == "noisy-thread"
    assert (parsed.tokens_in, parsed.tokens_out) == (0, 7)  # a boolean is not a count


def test_usage_adds_up_over_several_turns() -> None:
    parser = CodexEventParser()
    for _ in range(2):
        parser.feed('{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}')

    assert (parser.parsed.tokens_in, parser.parsed.tokens_out) == (20, 4)


def test_a_new_run_builds_exec_json_with_the_sandbox_and_worktree(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines(WRITE))

    result = adapter_for("codex").run(make_request(settings={"model": "gpt-5-codex"}))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert result.native_session_id == THREAD
    assert (result.tokens_in, result.tokens_out) == (21128, 14)
    call = codex.call()
    assert call["argv"] == [
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "-C",
        str(worktree),
        "--skip-git-repo-check",
        "--model",
        "gpt-5-codex",
        "Read TASK.md and do it.",
    ]
    assert "--full-auto" not in call["argv"]
    assert call["env"]["CLAWBOO_TASK_TITLE"] == "Say hello"


def test_resume_repeats_the_flags_then_names_the_thread(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines(WRITE))

    adapter_for("codex").run(make_request(resume_session_id="0199a213-81c0", prompt="continue"))

    assert codex.call()["argv"] == [
        "exec",
        "--json",
        "--sandbox",
        "workspace-write",
        "-C",
        str(worktree),
        "--skip-git-repo-check",
        "resume",
        "0199a213-81c0",
        "continue",
    ]


def test_a_prompt_starting_with_a_dash_is_not_read_as_a_flag(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines(WRITE))

    adapter_for("codex").run(make_request(prompt="- edit greeting.txt"))

    assert codex.call()["argv"][-1] == "\n- edit greeting.txt"


def test_a_failed_turn_fails_the_run_even_if_codex_exits_zero(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "codex", stdout=real_lines(AUTH_401))

    result = adapter_for("codex").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("codex turn failed: unexpected status 401 Unauthorized")
    assert result.native_session_id == "01a230a7-be23-7d13-ba5f-a3aa7bf26077"


def test_malformed_lines_among_good_ones_do_not_fail_the_run(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "codex", stdout=fixture_lines("codex_noisy.jsonl"))

    result = adapter_for("codex").run(make_request())

    assert result.outcome is Outcome.SUCCEEDED, result.error


def test_a_hang_past_the_timeout_kills_the_whole_process_group(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    codex = install_stand_in(bin_dir, "codex", stdout=real_lines(WRITE)[:2], hang=True)

    result = adapter_for("codex").run(make_request(timeout_s=1.0))

    grandchild = codex.grandchild_pid()
    try:
        assert result.outcome is Outcome.TIMED_OUT
        assert result.native_session_id == THREAD
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_an_unknown_sandbox_is_refused(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "codex", stdout=real_lines(WRITE))

    result = adapter_for("codex").run(make_request(settings={"sandbox": "none"}))

    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("bad codex settings: sandbox 'none'")


def test_codex_missing_from_path_is_a_clear_failed_result(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    result = adapter_for("codex").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error == "codex not found on PATH"
