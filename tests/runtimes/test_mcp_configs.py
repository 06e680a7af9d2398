"""The per-run MCP configuration each MCP-capable adapter hands its CLI: the board's
server with the run's credential, kept off the command line, gone after the run."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path

from executor.runtimes import McpEndpoint, Outcome, RunRequest, adapter_for
from executor.runtimes.claude_code import ClaudeCodeAdapter
from executor.runtimes.codex import CodexAdapter
from executor.runtimes.oneshot import child_environment
from tests.runtimes.stand_ins import install_stand_in, real_lines

BOARD = McpEndpoint(url="http://127.0.0.1:8000/mcp/", token="clawboo-run-secret")


def test_claude_code_gets_an_mcp_config_file_and_may_call_the_board_tools(
    tmp_path: Path, make_request: Callable[..., RunRequest]
) -> None:
    request = make_request(mcp=BOARD, settings={"allowed_tools": "Read,Edit"})

    argv = ClaudeCodeAdapter().build_argv(request, "claude", tmp_path)

    assert argv[:6] == [
        "claude",
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        str(tmp_path / "mcp.json"),
    ]
    assert argv[argv.index("--allowedTools") + 1] == "Read,Edit,mcp__clawboo"
    assert not any(BOARD.token in arg for arg in argv)
    config = tmp_path / "mcp.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {
        "mcpServers": {
            "clawboo": {
                "type": "http",
                "url": BOARD.url,
                "headers": {"Authorization": f"Token {BOARD.token}"},
                "alwaysLoad": True,
            }
        }
    }


def test_the_claude_code_config_is_removed_when_the_run_ends(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    claude = install_stand_in(
        bin_dir, "claude", stdout=real_lines("claude-code/run1-write-file.stream.jsonl")
    )

    result = adapter_for("claude-code").run(make_request(mcp=BOARD))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    argv = claude.call()["argv"]
    config = Path(argv[argv.index("--mcp-config") + 1])
    assert config.name == "mcp.json" and not config.exists()


def test_codex_gets_the_server_as_config_overrides_and_the_token_in_its_environment(
    tmp_path: Path, make_request: Callable[..., RunRequest]
) -> None:
    request = make_request(mcp=BOARD)

    argv = CodexAdapter().build_argv(request, "codex", tmp_path)

    overrides = [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]
    assert overrides == [
        'mcp_servers.clawboo.url="http://127.0.0.1:8000/mcp/"',
        'mcp_servers.clawboo.bearer_token_env_var="CLAWBOO_MCP_TOKEN"',
    ]
    assert not any(BOARD.token in arg for arg in argv)
    env = child_environment(request)
    assert env["CLAWBOO_MCP_TOKEN"] == BOARD.token
    assert env["CLAWBOO_MCP_URL"] == BOARD.url


def test_without_the_board_no_mcp_configuration_is_passed(
    tmp_path: Path, make_request: Callable[..., RunRequest]
) -> None:
    request = make_request()

    assert "--mcp-config" not in ClaudeCodeAdapter().build_argv(request, "claude", tmp_path)
    assert "-c" not in CodexAdapter().build_argv(request, "codex", tmp_path)
    assert "CLAWBOO_MCP_TOKEN" not in child_environment(request)
