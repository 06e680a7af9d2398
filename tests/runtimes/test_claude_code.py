"""Claude Code: the stream-json parser over lines the real CLI (2.1.332) printed, and
the adapter against a stand-in ``claude`` on PATH that prints them."""

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
    real_lines,
    wait_until_gone,
)

WRITE = "claude-code/run1-write-file.stream.jsonl"
MAX_TURNS = "claude-code/run3-max-turns-1.stream.jsonl"
DENIED = "claude-code/run4-permission-default-denied.stream.jsonl"
AUTH_401 = "claude-code/run5-auth-401.stream.jsonl"
SESSION = "2d8a13c0-bd52-4062-ab48-c69bedce91d7"


def parse(name: str) -> ClaudeStreamParser:
    parser = ClaudeStreamParser()
    lines = fixture_lines(name) if name.endswith("noisy.jsonl") else real_lines(name)
    for line in lines:
        parser.feed(line)
    return parser


def test_the_parser_reads_session_cost_tokens_and_text_from_a_successful_run() -> None:
    parsed = parse(WRITE).parsed

    assert parsed.ok is True
    assert parsed.native_session_id == SESSION
    assert parsed.cost_cents == 10  # 0.102076 USD
    assert (parsed.tokens_in, parsed.tokens_out) == (25449, 14)
    assert parsed.summary == "DONE: wrote the file."
    assert parsed.error == ""


def test_a_model_401_is_is_error_with_subtype_success_and_fails() -> None:
    parsed = parse(AUTH_401).parsed

    assert parsed.ok is False
    assert parsed.error == (
        "claude reported an API error (HTTP 401): Invalid API key · Fix external API key"
    )
    assert parsed.native_session_id == "75bd7868-ff2e-4977-94aa-a1da961e2510"


def test_max_turns_names_the_subtype_and_its_errors() -> None:
    parsed = parse(MAX_TURNS).parsed

    assert parsed.ok is False
    assert parsed.error == "claude reported error_max_turns: Reached maximum number of turns (1)"
    assert parsed.cost_cents == 5  # 0.050816 USD
    assert (parsed.tokens_in, parsed.tokens_out) == (12669, 7)


def test_a_refused_write_fails_the_run_though_the_result_says_success() -> None:
    parsed = parse(DENIED).parsed

    assert parsed.ok is False
    assert parsed.error == (
        "claude was refused permission (Write: Claude requested permissions to write to "
        "/srv/example/cc/work/hello.txt, but you haven't granted it yet.)"
    )
    assert parsed.summary == "DONE: wrote the file."  # what the model claimed


def test_usd_cost_rounds_half_up() -> None:
    parser = ClaudeStreamParser()
    parser.feed(
        '{"type":"result","subtype":"error_max_turns","is_error":true,"total_cost_usd":1.005}'
    )
    assert parser.parsed.cost_cents == 101  # not to even


def test_the_parser_skips_malformed_lines_unknown_types_and_bad_field_values() -> None:
    parsed = parse("claude_noisy.jsonl").parsed

    assert parsed.ok is True
    assert parsed.native_session_id == "noisy-session"
    assert parsed.summary == "done"
    assert parsed.cost_cents is None  # "not-a-number" is not a cost


def test_before_the_result_line_usage_counts_each_message_once() -> None:
    parser = ClaudeStreamParser()
    for line in real_lines(WRITE)[:4]:  # stop before "result"
        parser.feed(line)

    assert parser.parsed.tokens_in == 12675 + 12774
    assert parser.parsed.tokens_out == 1 + 1
    assert parser.parsed.summary == "DONE: wrote the file."
    assert parser.parsed.ok is None

    # The same message id seen twice (one line per content block) counts once.
    parser.feed(real_lines(WRITE)[3])
    assert parser.parsed.tokens_in == 12675 + 12774


def test_a_successful_run_builds_the_documented_argv_and_captures_cost(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE))
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
    assert result.native_session_id == SESSION
    assert result.cost_cents == 10
    assert (result.tokens_in, result.tokens_out) == (25449, 14)
    assert result.summary == "DONE: wrote the file."
    assert len(live) == 5
    call = claude.call()
    assert call["argv"] == [
        "--output-format",
        "stream-json",
        "--verbose",
        "--setting-sources",
        "user",
        "--strict-mcp-config",
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
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE))

    adapter_for("claude-code").run(make_request(resume_session_id="-starts-with-dash"))

    argv = claude.call()["argv"]
    assert "--resume=-starts-with-dash" in argv
    assert argv.index("--resume=-starts-with-dash") < argv.index("--")


def test_a_run_reads_no_settings_or_mcp_servers_the_worktree_holds(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    # What a builder could leave for its next run in the same checkout: a wider
    # allow list, a hook that runs a shell command, another model, its own MCP server.
    (worktree / ".claude").mkdir()
    project = {
        "permissions": {"allow": ["Bash(*)"], "defaultMode": "bypassPermissions"},
        "hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch x"}]}]},
        "model": "opus",
    }
    (worktree / ".claude" / "settings.json").write_text(json.dumps(project))
    (worktree / ".claude" / "settings.local.json").write_text(json.dumps(project))
    (worktree / ".mcp.json").write_text(json.dumps({"mcpServers": {"mine": {"command": "x"}}}))
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE))

    adapter_for("claude-code").run(make_request(resume_session_id="S-1"))

    argv = claude.call()["argv"]
    # Only the operator's user settings load (not project, not local) ...
    assert argv[argv.index("--setting-sources") + 1] == "user"
    # ... and only the MCP servers the executor hands the run on --mcp-config.
    assert "--strict-mcp-config" in argv
    assert argv.index("--strict-mcp-config") < argv.index("--")


def test_an_auth_failure_is_a_failed_run_with_the_reason(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "claude", stdout=real_lines(AUTH_401), exit_code=1)

    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.exit_code == 1
    assert result.error.startswith("claude reported an API error (HTTP 401)")
    assert result.cost_cents == 0


def test_with_no_permission_mode_set_it_runs_accept_edits(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE))

    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.SUCCEEDED, result.error
    argv = claude.call()["argv"]
    assert argv[argv.index("--permission-mode") + 1] == "acceptEdits"


def test_a_denied_write_with_exit_0_is_a_failed_run(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "claude", stdout=real_lines(DENIED))

    result = adapter_for("claude-code").run(make_request(settings={"permission_mode": "default"}))

    assert result.exit_code == 0
    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("claude was refused permission (Write: ")


def test_the_modes_the_real_cli_accepts_are_accepted(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE))
    for mode in ("acceptEdits", "auto", "bypassPermissions", "manual", "dontAsk", "plan"):
        adapter_for("claude-code").run(make_request(settings={"permission_mode": mode}))
        argv = claude.call()["argv"]
        assert argv[argv.index("--permission-mode") + 1] == mode


def test_bypass_permissions_as_root_fails_with_the_clis_reason(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    stderr = real_lines("claude-code/run7-bypassPermissions-as-root.stderr.txt")
    install_stand_in(bin_dir, "claude", stderr=stderr, exit_code=1)

    result = adapter_for("claude-code").run(
        make_request(settings={"permission_mode": "bypassPermissions"})
    )

    assert result.outcome is Outcome.FAILED
    assert result.error == (
        "exited with code 1: --dangerously-skip-permissions cannot be used with root/sudo "
        "privileges for security reasons"
    )


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
        stdout=real_lines(WRITE)[:3],
        stderr=["Error: socket hang up"],
    )

    result = adapter_for("claude-code").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error == "ended without reporting a result: Error: socket hang up"
    assert result.native_session_id == SESSION


def test_a_hang_past_the_timeout_kills_the_whole_process_group(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE)[:1], hang=True)

    result = adapter_for("claude-code").run(make_request(timeout_s=1.0))

    grandchild = claude.grandchild_pid()
    try:
        assert result.outcome is Outcome.TIMED_OUT
        # What was learned before the hang is kept: the session can be resumed.
        assert result.native_session_id == SESSION
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
    claude = install_stand_in(bin_dir, "claude", stdout=real_lines(WRITE))

    result = adapter_for("claude-code").run(make_request(settings={"permission_mode": "yolo"}))

    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("bad claude-code settings: permission_mode 'yolo'")
    assert not Path(f"{claude.path}.call.json").exists()


def test_the_recorded_lines_are_valid_json_objects() -> None:
    # The noisy fixture is broken on purpose; the real ones must parse cleanly,
    # or the tests above would pass for the wrong reason.
    for name in (WRITE, MAX_TURNS, DENIED, AUTH_401):
        for line in real_lines(name):
            assert isinstance(json.loads(line), dict)
