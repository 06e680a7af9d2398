"""Hermes one-shot mode against a stand-in ``hermes`` on PATH: final text on stdout,
usage from the --usage-file report."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from executor.runtimes import Outcome, RunRequest, adapter_for
from executor.runtimes.hermes import HermesOutputParser
from tests.runtimes.stand_ins import FIXTURES, install_stand_in, kill_if_running, wait_until_gone

USAGE_REPORT = (FIXTURES / "hermes_usage.json").read_text()


def test_a_run_returns_stdout_as_the_summary_and_reads_the_usage_report(
    bin_dir: Path, worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(
        bin_dir,
        "hermes",
        stdout=["I changed greeting.txt.", "", "All tests pass."],
        usage_report=USAGE_REPORT,
    )

    result = adapter_for("hermes").run(
        make_request(settings={"model": "anthropic/claude-sonnet-4", "toolsets": "terminal,file"})
    )

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert result.summary == "I changed greeting.txt.\n\nAll tests pass."
    assert (result.tokens_in, result.tokens_out) == (5120, 640)
    assert result.cost_cents == 2  # 0.0235 USD
    assert result.native_session_id == "20250930_101500_ab12cd"
    call = hermes.call()
    argv = call["argv"]
    assert argv[:2] == ["-z", "Read TASK.md and do it."]
    usage_file = Path(argv[argv.index("--usage-file") + 1])
    assert worktree not in usage_file.parents  # never written into the diff
    assert not usage_file.exists()  # the scratch dir is cleaned up
    assert argv[argv.index("--model") + 1] == "anthropic/claude-sonnet-4"
    assert argv[argv.index("--toolsets") + 1] == "terminal,file"
    assert call["cwd"] == str(worktree)


def test_resume_uses_the_equals_form(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    hermes = install_stand_in(bin_dir, "hermes", stdout=["ok"])

    adapter_for("hermes").run(make_request(resume_session_id="20250930_101500_ab12cd"))

    assert "--resume=20250930_101500_ab12cd" in hermes.call()["argv"]


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


def test_the_usage_reader_accepts_openai_style_keys_and_skips_bad_values() -> None:
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
