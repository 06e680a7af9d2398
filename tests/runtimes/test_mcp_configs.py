"""The per-run MCP configuration each MCP-capable adapter hands its CLI: the board's
server with the run's credential, kept off the command line, gone after the run."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from executor.runtimes import McpEndpoint, Outcome, RunRequest, adapter_for
from executor.runtimes.claude_code import ClaudeCodeAdapter
from executor.runtimes.codex import CodexAdapter
from executor.runtimes.hermes_home import split_profile, user_home, with_board
from executor.runtimes.oneshot import SettingsError, child_environment
from tests.runtimes.stand_ins import install_stand_in, kill_if_running, real_lines, real_text

BOARD = McpEndpoint(url="http://127.0.0.1:8000/mcp/", token="clawboo-run-secret")


def test_claude_code_gets_an_mcp_config_file_and_may_call_the_board_tools(
    tmp_path: Path, make_request: Callable[..., RunRequest]
) -> None:
    request = make_request(mcp=BOARD, settings={"allowed_tools": "Read,Edit"})

    argv = ClaudeCodeAdapter().build_argv(request, "claude", tmp_path)

    assert argv[:9] == [
        "claude",
        "--output-format",
        "stream-json",
        "--verbose",
        "--setting-sources",
        "user",
        "--strict-mcp-config",
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


# -- Hermes: a Hermes home of the run's own (executor/runtimes/hermes_home.py) ----------

USER_CONFIG = """\
model:
  provider: custom
  base_url: http://127.0.0.1:9/v1
  default: fake-model
  api_key: ${FAKE_KEY}
mcp_servers:
  docs:
    command: docs-mcp
"""


@pytest.fixture
def hermes_user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's Hermes home (HERMES_HOME): config, key, sessions, a memory."""
    home = tmp_path / "user-hermes"
    (home / "memories").mkdir(parents=True)
    (home / "memories" / "MEMORY.md").write_text("remember me\n")
    (home / "config.yaml").write_text(USER_CONFIG)
    (home / ".env").write_text("FAKE_KEY=sk-user\n")
    (home / "state.db").write_bytes(b"sessions")
    monkeypatch.setenv("HERMES_HOME", str(home))
    return home


def run_home(call: dict[str, Any]) -> dict[str, Any]:
    return call["dirs"]["HERMES_HOME"]


def test_hermes_gets_a_home_of_its_own_with_the_board_in_the_users_config(
    bin_dir: Path, hermes_user_home: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run1-oneshot.stdout.txt"),
        usage_report=real_text("hermes/run1-oneshot.usage.json"),
        snapshot_dirs=("HERMES_HOME",),
    )

    result = adapter_for("hermes").run(make_request(mcp=BOARD))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    call = hermes.call()
    home = Path(call["env"]["HERMES_HOME"])
    assert home.name == "hermes-home" and home.parent != hermes_user_home.parent
    assert call["env"]["CLAWBOO_MCP_TOKEN"] == BOARD.token
    seen = run_home(call)
    assert seen["mode"] == "0o700"
    config = seen["entries"]["config.yaml"]
    assert config["link"] is None and config["mode"] == "0o600"
    # The user's config, and the board's server beside the user's own.
    assert yaml.safe_load(config["text"]) == {
        **yaml.safe_load(USER_CONFIG),
        "mcp_servers": {
            "docs": {"command": "docs-mcp"},
            "clawboo": {
                "url": BOARD.url,
                "headers": {"Authorization": "Token ${CLAWBOO_MCP_TOKEN}"},
                "skip_preflight": True,
            },
        },
    }
    # The key is in the run's environment only: on no command line, in no file.
    assert BOARD.token not in config["text"]
    assert not any(BOARD.token in arg for arg in call["argv"])
    # Everything else is the user's own, linked.
    for name in (".env", "state.db", "memories", "sessions", "skills", "logs"):
        assert seen["entries"][name]["link"] == str(hermes_user_home / name), name
    assert "--toolsets" not in call["argv"]
    # Gone with the run; the user's config untouched.
    assert not home.exists()
    assert (hermes_user_home / "config.yaml").read_text() == USER_CONFIG
    assert (hermes_user_home / "sessions").is_dir()  # what Hermes makes on a first run


def test_a_resumed_hermes_run_reads_the_users_session_store_and_lists_the_board(
    bin_dir: Path, hermes_user_home: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run4-chat-q-Q.stdout.txt"),
        stderr=real_lines("hermes/run5-chat-q-Q-resume.stderr.txt"),
        snapshot_dirs=("HERMES_HOME",),
    )
    request = make_request(
        mcp=BOARD, resume_session_id="20261201_081148_fd5f60", settings={"toolsets": "file"}
    )

    result = adapter_for("hermes").run(request)

    assert result.outcome is Outcome.SUCCEEDED, result.error
    call = hermes.call()
    assert call["argv"][:5] == [
        "chat",
        "-q",
        "Read TASK.md and do it.",
        "-Q",
        "--resume=20261201_081148_fd5f60",
    ]
    # A listed MCP server must be in the config -z and chat read: the run's is.
    assert call["argv"][call["argv"].index("--toolsets") + 1] == "file,clawboo"
    assert run_home(call)["entries"]["state.db"]["link"] == str(hermes_user_home / "state.db")


def test_the_hermes_session_store_is_linked_before_hermes_makes_it(
    bin_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_request: Callable[..., RunRequest],
) -> None:
    # A user who never ran Hermes: ~/.hermes does not exist, no config, no store yet.
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "person"))
    hermes = install_stand_in(bin_dir, "hermes", stdout=["done"], snapshot_dirs=("HERMES_HOME",))

    result = adapter_for("hermes").run(make_request(mcp=BOARD))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    user_home = tmp_path / "person" / ".hermes"
    entries = run_home(hermes.call())["entries"]
    # SQLite creates the store through the link: the first session is the user's.
    assert entries["state.db"]["link"] == str(user_home / "state.db")
    assert (
        yaml.safe_load(entries["config.yaml"]["text"])["mcp_servers"]["clawboo"]["url"] == BOARD.url
    )
    assert stat.S_IMODE(user_home.stat().st_mode) == 0o700


@pytest.mark.parametrize("outcome", ["failed", "timed_out"])
def test_the_hermes_run_home_is_removed_when_the_run_fails_or_times_out(
    outcome: str,
    bin_dir: Path,
    hermes_user_home: Path,
    make_request: Callable[..., RunRequest],
) -> None:
    if outcome == "failed":
        hermes = install_stand_in(
            bin_dir,
            "hermes",
            stdout=real_lines("hermes/run3-auth-401.stdout.txt"),
            usage_report=real_text("hermes/run3-auth-401.usage.json"),
            snapshot_dirs=("HERMES_HOME",),
        )
    else:
        hermes = install_stand_in(bin_dir, "hermes", hang=True, snapshot_dirs=("HERMES_HOME",))

    result = adapter_for("hermes").run(make_request(mcp=BOARD, timeout_s=1.0))

    try:
        assert result.outcome == outcome, result.error
        home = Path(hermes.call()["env"]["HERMES_HOME"])
        assert "clawboo" in run_home(hermes.call())["entries"]["config.yaml"]["text"]
        assert not home.exists()
        assert (hermes_user_home / "state.db").read_bytes() == b"sessions"
    finally:
        if outcome == "timed_out":
            kill_if_running(hermes.grandchild_pid())


def test_hermes_without_the_board_keeps_the_users_home(
    bin_dir: Path, hermes_user_home: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(bin_dir, "hermes", stdout=["done"])

    adapter_for("hermes").run(make_request(settings={"toolsets": "file"}))

    call = hermes.call()
    assert call["env"]["HERMES_HOME"] == str(hermes_user_home)
    assert call["argv"][call["argv"].index("--toolsets") + 1] == "file"


def test_a_hermes_config_that_cannot_be_read_fails_the_run_before_it_starts(
    bin_dir: Path, hermes_user_home: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(bin_dir, "hermes", stdout=["done"])
    (hermes_user_home / "config.yaml").write_text("model: [unclosed\n")

    result = adapter_for("hermes").run(make_request(mcp=BOARD))

    assert result.outcome is Outcome.FAILED
    assert result.error.startswith("bad hermes settings: the hermes config ")
    assert "not valid YAML" in result.error
    assert not Path(f"{hermes.path}.call.json").exists()


def test_a_hermes_home_that_cannot_be_prepared_fails_the_run_before_it_starts(
    bin_dir: Path, hermes_user_home: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(bin_dir, "hermes", stdout=["done"])
    (hermes_user_home / "sessions").write_text("not a directory")

    result = adapter_for("hermes").run(make_request(mcp=BOARD))

    assert result.outcome is Outcome.FAILED
    assert result.error.startswith(
        f"bad hermes settings: cannot make the run's hermes home from {hermes_user_home}: "
    )
    assert not Path(f"{hermes.path}.call.json").exists()


def test_the_board_joins_a_cli_toolset_list_that_allows_only_named_mcp_servers() -> None:
    allow_list = {"platform_toolsets": {"cli": ["file", "docs"]}, "mcp_servers": {"docs": {}}}
    no_list = {"platform_toolsets": {"cli": ["file", "terminal"]}}

    assert with_board(allow_list, BOARD)["platform_toolsets"]["cli"] == ["file", "docs", "clawboo"]
    assert with_board(no_list, BOARD)["platform_toolsets"]["cli"] == ["file", "terminal"]
    assert allow_list["mcp_servers"] == {"docs": {}}  # the user's dict is not changed


def test_the_hermes_home_is_the_one_hermes_would_pick(tmp_path: Path) -> None:
    root = tmp_path / ".hermes"
    (root / "profiles" / "coder").mkdir(parents=True)
    home = {"HOME": str(tmp_path)}

    assert user_home(home) == root
    assert user_home({**home, "HERMES_HOME": "/srv/hermes"}) == Path("/srv/hermes")
    assert user_home(home, "coder") == root / "profiles" / "coder"
    assert user_home(home, "default") == root
    (root / "active_profile").write_text("coder\n")
    assert user_home(home) == root / "profiles" / "coder"
    # A HERMES_HOME that is a profile's home is used as it is.
    assert user_home({**home, "HERMES_HOME": str(root / "profiles" / "x")}) == (
        root / "profiles" / "x"
    )
    with pytest.raises(SettingsError, match="hermes profile 'nope' does not exist"):
        user_home(home, "nope")


def test_a_hermes_profile_flag_names_the_home_and_is_dropped_from_the_argv(
    bin_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_request: Callable[..., RunRequest],
) -> None:
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    profile = tmp_path / ".hermes" / "profiles" / "coder"
    profile.mkdir(parents=True)
    (profile / "config.yaml").write_text("model:\n  default: coder-model\n")
    hermes = install_stand_in(bin_dir, "hermes", stdout=["done"], snapshot_dirs=("HERMES_HOME",))
    settings = {"extra_args": ["--verbose", "-p", "coder"]}

    adapter_for("hermes").run(make_request(mcp=BOARD, settings=settings))

    call = hermes.call()
    assert call["argv"][-1] == "--verbose" and "-p" not in call["argv"]
    config = yaml.safe_load(run_home(call)["entries"]["config.yaml"]["text"])
    assert config["model"] == {"default": "coder-model"}
    assert split_profile(["--profile=coder", "-x"]) == (["-x"], "coder")
    assert split_profile(["-x"]) == (["-x"], None)
