"""Hermes against a stand-in ``hermes`` on PATH that prints what the real CLI (0.19.0)
printed: ``-z`` with its --usage-file report (the verdict), ``chat -q -Q --resume``."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from executor.runtimes import Outcome, RunRequest, adapter_for
from executor.runtimes.hermes import HermesOutputParser
from tests.runtimes.stand_ins import (
    install_stand_in,
    kill_if_running,
    real_lines,
    real_text,
    wait_until_gone,
)

USAGE_REPORT = real_text("hermes/run1-oneshot.usage.json")
SESSION = "20261201_081148_fd5f60"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: Hermes's store is ``$HOME/.hermes/state.db``."""
    directory = tmp_path / "home"
    directory.mkdir()
    monkeypatch.setenv("HOME", str(directory))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    return directory


def session_store(home: Path, *, tokens: tuple[int, int], cost: float, status: str) -> Path:
    """Hermes's session store with one session's running totals (the columns the
    adapter reads, as hermes_state.py 0.19.0 declares them)."""
    path = home / ".hermes" / "state.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL,"
            " started_at REAL NOT NULL, input_tokens INTEGER DEFAULT 0,"
            " output_tokens INTEGER DEFAULT 0, estimated_cost_usd REAL, cost_status TEXT)"
        )
        db.execute(
            "INSERT INTO sessions VALUES (?, 'cli', 0, ?, ?, ?, ?)",
            (SESSION, *tokens, cost, status),
        )
    return path


def test_a_run_returns_stdout_as_the_summary_and_reads_the_usage_report(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run1-oneshot.stdout.txt"),
        usage_report=USAGE_REPORT,
    )

    result = adapter_for("hermes").run(
        make_request(settings={"model": "fake-model", "toolsets": "terminal,file"})
    )

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert result.summary == "DONE: wrote the file."
    assert (result.tokens_in, result.tokens_out) == (27139, 14)
    assert result.cost_cents is None  # cost_status "unknown": no price, not 0
    assert result.native_session_id == "20261201_081148_fd5f60"
    call = hermes.call()
    argv = call["argv"]
    assert argv[:2] == ["-z", "Read TASK.md and do it."]
    usage_file = Path(argv[argv.index("--usage-file") + 1])
    assert worktree not in usage_file.parents  # never written into the diff
    assert not usage_file.exists()  # the scratch dir is cleaned up
    assert argv[argv.index("--model") + 1] == "fake-model"
    assert argv[argv.index("--toolsets") + 1] == "terminal,file"
    assert call["cwd"] == str(worktree)


def test_a_model_failure_with_exit_0_is_failed_by_the_usage_report(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run3-auth-401.stdout.txt"),
        usage_report=real_text("hermes/run3-auth-401.usage.json"),
    )

    result = adapter_for("hermes").run(make_request())

    assert result.exit_code == 0
    assert result.outcome is Outcome.FAILED
    assert result.error == (
        "hermes reported a failed run: HTTP 401: Incorrect API key provided (fake)"
    )
    assert (result.tokens_in, result.native_session_id) == (None, None)


def test_resume_continues_the_session_with_chat_q(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run4-chat-q-Q.stdout.txt"),
        stderr=real_lines("hermes/run5-chat-q-Q-resume.stderr.txt"),
    )

    result = adapter_for("hermes").run(
        make_request(resume_session_id="20261201_081148_fd5f60", settings={"model": "m"})
    )

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert hermes.call()["argv"] == [
        "chat",
        "-q",
        "Read TASK.md and do it.",
        "-Q",
        "--resume=20261201_081148_fd5f60",
        "--yolo",
        "--accept-hooks",
        "--model",
        "m",
    ]
    assert result.native_session_id == "20261201_081148_fd5f60"
    # The tool preview and its diff are not the answer.
    assert result.summary == "DONE: wrote the file."
    assert (result.tokens_in, result.cost_cents) == (None, None)


def test_a_resumed_run_counts_what_its_session_gained_in_hermes_store(
    bin_dir: Path, home: Path, make_request: Callable[..., RunRequest]
) -> None:
    # The totals the real Hermes kept for a session across its first run and a resume.
    store = session_store(home, tokens=(27200, 14), cost=0.0, status="unknown")
    install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run4-chat-q-Q.stdout.txt"),
        stderr=real_lines("hermes/run5-chat-q-Q-resume.stderr.txt"),
        sqlite=(
            (
                str(store),
                [
                    "UPDATE sessions SET input_tokens = 42890, output_tokens = 21"
                    f" WHERE id = '{SESSION}'"
                ],
            ),
        ),
    )

    result = adapter_for("hermes").run(make_request(resume_session_id=SESSION))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert (result.tokens_in, result.tokens_out) == (42890 - 27200, 21 - 14)
    assert result.cost_cents is None  # cost_status "unknown": no price, not 0


def test_a_priced_resumed_run_is_charged_what_its_session_cost_meanwhile(
    bin_dir: Path, home: Path, make_request: Callable[..., RunRequest]
) -> None:
    store = session_store(home, tokens=(1000, 10), cost=0.10, status="estimated")
    install_stand_in(
        bin_dir,
        "hermes",
        stdout=["DONE"],
        stderr=[f"session_id: {SESSION}"],
        sqlite=(
            (
                str(store),
                [
                    "UPDATE sessions SET input_tokens = 1500, output_tokens = 30,"
                    f" estimated_cost_usd = 0.25 WHERE id = '{SESSION}'"
                ],
            ),
        ),
    )

    result = adapter_for("hermes").run(make_request(resume_session_id=SESSION))

    assert (result.tokens_in, result.tokens_out, result.cost_cents) == (500, 20, 15)


def test_a_resumed_run_without_a_readable_store_leaves_tokens_unknown(
    bin_dir: Path, home: Path, make_request: Callable[..., RunRequest]
) -> None:
    (home / ".hermes").mkdir()
    (home / ".hermes" / "state.db").write_text("not a database")
    install_stand_in(bin_dir, "hermes", stdout=["DONE"], stderr=[f"session_id: {SESSION}"])

    result = adapter_for("hermes").run(make_request(resume_session_id=SESSION))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert (result.tokens_in, result.tokens_out, result.cost_cents) == (None, None, None)


def test_a_resumed_run_that_exits_1_fails_with_the_printed_reason(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(
        bin_dir,
        "hermes",
        stdout=["HTTP 401: Incorrect API key provided (fake)"],
        stderr=["", "session_id: 20261201_081148_fd5f60"],
        exit_code=1,
    )

    result = adapter_for("hermes").run(make_request(resume_session_id="20261201_081148_fd5f60"))

    assert result.outcome is Outcome.FAILED
    assert result.error == "hermes exited with code 1: HTTP 401: Incorrect API key provided (fake)"


def test_provider_without_model_is_refused_before_anything_runs(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "hermes", stdout=["ok"])

    result = adapter_for("hermes").run(make_request(settings={"provider": "custom"}))

    assert result.outcome is Outcome.FAILED
    assert result.error == "bad hermes settings: provider needs model (hermes exits 2 without it)"


def test_no_usage_report_leaves_tokens_and_cost_unknown(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "hermes", stdout=["done"])

    result = adapter_for("hermes").run(make_request())

    assert result.outcome is Outcome.SUCCEEDED
    assert (result.tokens_in, result.tokens_out, result.cost_cents) == (None, None, None)


def test_a_malformed_usage_report_is_ignored(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "hermes", stdout=["done"], usage_report="{not json")

    result = adapter_for("hermes").run(make_request())

    assert result.outcome is Outcome.SUCCEEDED
    assert result.cost_cents is None


def test_the_usage_reader_accepts_other_key_spellings_and_skips_bad_values() -> None:
    parser = HermesOutputParser()

    parser.read_usage({"prompt_tokens": 7, "completion_tokens": 3, "cost_usd": "x"})

    assert (parser.parsed.tokens_in, parser.parsed.tokens_out) == (7, 3)
    assert parser.parsed.cost_cents is None
    parser.read_usage(["not", "a", "dict"])  # ignored, no crash


def test_a_nonzero_exit_is_a_failure(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "hermes", stderr=["provider error: 401"], exit_code=2)

    result = adapter_for("hermes").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error == "exited with code 2: provider error: 401"


def test_a_hang_past_the_timeout_kills_the_whole_process_group(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(bin_dir, "hermes", hang=True)

    result = adapter_for("hermes").run(make_request(timeout_s=1.0))

    grandchild = hermes.grandchild_pid()
    try:
        assert result.outcome is Outcome.TIMED_OUT
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_hermes_missing_from_path_is_a_clear_failed_result(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    result = adapter_for("hermes").run(make_request())

    assert result.outcome is Outcome.FAILED
    assert result.error == "hermes not found on PATH"


def test_a_run_never_inherits_the_opt_in_to_the_worktrees_own_plugins(
    bin_dir: Path,
    worktree: Path,
    make_request: Callable[..., RunRequest],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Hermes imports ./.hermes/plugins/ from its working directory when the server's
    # environment opts in: a plugin the builder left would run in its next run.
    monkeypatch.setenv("HERMES_ENABLE_PROJECT_PLUGINS", "1")
    (worktree / ".hermes" / "plugins" / "mine").mkdir(parents=True)
    hermes = install_stand_in(
        bin_dir,
        "hermes",
        stdout=real_lines("hermes/run1-oneshot.stdout.txt"),
        usage_report=USAGE_REPORT,
    )

    result = adapter_for("hermes").run(make_request())

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert "HERMES_ENABLE_PROJECT_PLUGINS" not in hermes.call()["env"]
