"""Claude Code: the stream-json parser over recorded lines, and the adapter against a
stand-in ``claude`` on PATH."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from executor.runtimes import Outcome, RunRequest, adapter_for, start_run
from executor.runtimes.claude_code import ClaudeStreamParser
from tests.runtimes.stand_ins import (
    fixture_lines,
    install_stand_in,
    kill_if_running,
    wait_until_gone,
)


def parse(name: str) -> ClaudeStreamParser:
    parser = ClaudeStreamParser()
    for line in fixture_lines(name):
        parser.feed(line)
    return parser


def test_the_parser_reads_session_cost_tokens_and_text_from_a_successful_run() -> None:
    parsed = parse("claude_success.jsonl").parsed

    assert parsed.ok is True
    assert parsed.native_session_id == "5f0c2a6e-8d1b-4c6f-9a43-2b7e1d0c9f11"
    assert parsed.cost_cents == 5  # 0.0478 USD, half up
    assert parsed.tokens_in == 20 + 3000 + 3000  # input plus both cache counts
    assert parsed.tokens_out == 115
    assert parsed.summary == "Updated greeting.txt to say hello, world."
    assert parsed.error == ""


def test_the_parser_judges_by_is_error_even_when_the_subtype_says_success() -> None:
    parsed = parse("claude_error_success_subtype.jsonl").parsed

    assert parsed.ok is False
    assert parsed.error == "claude reported success: API Error: 529 Overloaded"
    assert parsed.native_session_id == "7a8b9c0d-1111-2222-3333-444455556666"


def test_the_parser_names_the_error_subtype_when_there_is_no_result_text() -> None:
    parsed = parse("claude_max_turns.jsonl").parsed

    assert parsed.ok is False
    assert parsed.error == "claude reported error_max_turns"
    assert parsed.cost_cents == 101  # 1.005 USD rounds half up, not to even
    assert (parsed.tokens_in, parsed.tokens_out) == (900, 300)


def test_the_parser_skips_malformed_lines_unknown_types_and_bad_field_values() -> None:
    parsed = parse("claude_noisy.jsonl").parsed

    assert parsed.ok is True
    assert parsed.native_session_id == "noisy-session"
    assert parsed.summary == "done"
    assert parsed.cost_cents is None  # "not-a-number" is not a cost


def test_before_the_result_line_usage_counts_each_message_once() -> None:
    parser = ClaudeStreamParser()
    for line in fixture_lines("claude_success.jsonl")[:5]:  # stop before "result"
        parser.feed(line)

    # msg_01A appears twice with the same usage; msg_01B once.
    assert parser.parsed.tokens_in == (12 + 3000) + (8 + 3000)
    assert parser.parsed.tokens_out == 95 + 20
    assert parser.parsed.summary == "Updated greeting.txt."
    assert parser.parsed.ok is None


def test_a_successful_run_builds_the_documented_argv_and_captures_cost(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=fixture_lines("claude_success.jsonl"))
    settings = {
        "model": "claude-sonnet-4-5",
        "permission_mode": "acceptEdits",
        "max_turns": 12,
        "allowed_tools": ["Read", "Edit", "Bash(git diff:*)"],
    }
    live: list[tuple[str, str]] = []

    result = adapter_for("claude-code").run(
        make_request(settings=settings, prompt="- fix the greeting"),
        on_output=lambda stream, line: live.append((stream, line)),
    )

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert result.native_session_id == "5f0c2a6e-8d1b-4c6f-9a43-2b7e1d0c9f11"
    assert result.cost_cents == 5
    assert (result.tokens_in, result.tokens_out) == (6020, 115)
    assert result.summary == "Updated greeting.txt to say hello, world."
    assert len(live) == 6
    call = claude.call()
    assert call["argv"] == [
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "acceptEdits",
        "--model",
        "claude-sonnet-4-5",
        "--max-turns",
        "12",
        "--allowedTools",
        "Read,Edit,Bash(git diff:*)",
        "-p",
        "--",
        "- fix the greeting",
    ]
    assert call["cwd"] == str(worktree)
    assert call["env"]["CLAWBOO_TASK_ID"] == "T-42"
    assert call["env"]["CLAWBOO_TASK_FILE"] == str(worktree / "TASK.md")


def test_resume_passes_the_session_id_in_the_equals_form(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=fixture_lines("claude_success.jsonl"))

    adapter_for("claude-code").run(make_request(resume_session_id="-starts-with-dash"))

    argv = claude.call()["argv"]
    assert "--resume=-starts-with-dash" in argv
    assert argv.index("--resume=-starts-with-dash") < argv.index("--")


def test_an_error_result_is_a_failed_run_even_with_subtype_success(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(
        bin_dir, "claude", stdout=fixture_lines("claude_error_success_subtype.jsonl"), exit_code=1
    )

    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.exit_code == 1
    assert result.error == "claude reported success: API Error: 529 Overloaded"
    assert result.cost_cents == 0  # 0.0012 USD
    assert result.native_session_id == "7a8b9c0d-1111-2222-3333-444455556666"


def test_malformed_and_unknown_lines_among_good_ones_do_not_fail_the_run(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "claude", stdout=fixture_lines("claude_noisy.jsonl"))

    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert "this is not json at all" in result.log_tail


def test_a_run_that_exits_without_a_result_line_is_not_a_success(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(
        bin_dir,
        "claude",
        stdout=fixture_lines("claude_success.jsonl")[:3],
        stderr=["Error: socket hang up"],
    )

    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error == "ended without reporting a result: Error: socket hang up"
    assert result.native_session_id == "5f0c2a6e-8d1b-4c6f-9a43-2b7e1d0c9f11"


def test_a_hang_past_the_timeout_kills_the_whole_process_group(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(
        bin_dir, "claude", stdout=fixture_lines("claude_success.jsonl")[:1], hang=True
    )

    result = adapter_for("claude-code").run(make_request(timeout_s=1.0))

    grandchild = claude.grandchild_pid()
    try:
        assert result.outcome is Outcome.TIMED_OUT
        # What was learned before the hang is kept: the session can be resumed.
        assert result.native_session_id == "5f0c2a6e-8d1b-4c6f-9a43-2b7e1d0c9f11"
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_cancel_through_the_run_handle_kills_the_run(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", hang=True)
    hanging = threading.Event()

    handle = start_run(
        adapter_for("claude-code"),
        make_request(timeout_s=60),
        on_output=lambda stream, line: hanging.set() if line == "hanging" else None,
    )
    assert hanging.wait(30), "the stand-in never started"
    handle.cancel()
    assert handle.wait(15)
    result = handle.result()

    grandchild = claude.grandchild_pid()
    try:
        assert result.outcome is Outcome.CANCELLED
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_claude_missing_from_path_is_a_clear_failed_result(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error == "claude not found on PATH"


def test_an_unknown_permission_mode_is_refused_before_anything_runs(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=fixture_lines("claude_success.jsonl"))

    result = adapter_for("claude-code").run(make_request(settings={"permission_mode": "yolo"}))

    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("bad claude-code settings: permission_mode 'yolo'")
    assert not Path(f"{claude.path}.call.json").exists()


def test_the_fixture_lines_are_valid_json_objects() -> None:
    # The noisy fixture is broken on purpose; the recorded ones must parse cleanly,
    # or the tests above would pass for the wrong reason.
    for name in ("claude_success.jsonl", "claude_error_success_subtype.jsonl"):
        for line in fixture_lines(name):
            assert isinstance(json.loads(line), dict)
