"""The ``command`` runtime, run for real: a script that edits a file in the worktree."""

from __future__ import annotations

import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from executor.runtimes import Outcome, RunRequest, adapter_for
from tests.runtimes.stand_ins import install_stand_in, kill_if_running, wait_until_gone

EDIT_SCRIPT = """\
import os, pathlib
task = pathlib.Path(os.environ["CLAWBOO_TASK_FILE"]).read_text()
greeting = pathlib.Path("greeting.txt")
greeting.write_text(greeting.read_text().replace("hello", "hello, world"))
pathlib.Path("seen.txt").write_text(
    os.environ["CLAWBOO_TASK_ID"] + "|" + os.environ["CLAWBOO_TASK_TITLE"] + "|"
    + os.environ["CLAWBOO_HANDOFF_FILE"] + "|" + task.splitlines()[0]
)
print("edited greeting.txt")
"""


def test_it_runs_the_configured_argv_in_the_worktree_with_the_task_context(
    worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    (worktree / "greeting.txt").write_text("hello\n")
    (worktree / "edit.py").write_text(EDIT_SCRIPT)

    result = adapter_for("command").run(
        make_request(settings={"argv": [sys.executable, "edit.py"]})
    )

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert result.exit_code == 0
    assert (worktree / "greeting.txt").read_text() == "hello, world\n"
    assert (worktree / "seen.txt").read_text() == (
        f"T-42|Say hello|{worktree / 'AGENT_HANDOFF.json'}|# Task"
    )
    assert result.summary == "edited greeting.txt"
    assert result.cost_cents is None and result.tokens_in is None


def test_the_runs_prompt_is_given_in_a_file_the_run_names(
    worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    prompt = "Task T-42: Say hello\n\nFeedback from the previous attempt: " + "x" * 200_000
    argv = ["sh", "-c", 'cp "$CLAWBOO_PROMPT_FILE" got.txt']

    result = adapter_for("command").run(make_request(prompt=prompt, settings={"argv": argv}))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    # Whole, however long: a file, not a variable.
    assert (worktree / "got.txt").read_text() == prompt


def test_a_relative_program_is_found_in_the_worktree(
    worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    script = worktree / "work.sh"
    script.write_text('#!/bin/sh\necho "working on $CLAWBOO_TASK_ID" > out.txt\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)

    result = adapter_for("command").run(make_request(settings={"argv": ["./work.sh"]}))

    assert result.outcome is Outcome.SUCCEEDED, result.error
    assert (worktree / "out.txt").read_text() == "working on T-42\n"


def test_extra_env_reaches_the_command(
    worktree: Path, make_request: Callable[..., RunRequest]
) -> None:
    result = adapter_for("command").run(
        make_request(
            settings={"argv": ["sh", "-c", 'echo "$CLAWBOO_EXTRA:$CLAWBOO_TASK_FILE"']},
            env={"CLAWBOO_EXTRA": "x"},
            task_file=Path("/elsewhere/TASK.md"),
        )
    )

    assert result.summary == "x:/elsewhere/TASK.md"


def test_a_nonzero_exit_is_a_failure_naming_the_code_and_the_last_stderr_line(
    make_request: Callable[..., RunRequest],
) -> None:
    result = adapter_for("command").run(
        make_request(settings={"argv": ["sh", "-c", "echo 'tests failed' >&2; exit 3"]})
    )

    assert result.outcome is Outcome.FAILED
    assert result.exit_code == 3
    assert result.error == "exited with code 3: tests failed"
    assert "tests failed" in result.log_tail


def test_a_program_not_on_path_is_a_clear_failed_result(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    result = adapter_for("command").run(make_request(settings={"argv": ["no-such-tool", "x"]}))

    assert result.outcome is Outcome.FAILED
    assert result.error == "no-such-tool not found on PATH"


def test_an_absolute_program_that_does_not_exist_is_no_such_file_not_a_path_lookup(
    tmp_path: Path, make_request: Callable[..., RunRequest]
) -> None:
    missing = str(tmp_path / "bin" / "no-such-tool")
    result = adapter_for("command").run(make_request(settings={"argv": [missing]}))

    assert result.outcome is Outcome.FAILED
    assert result.error == f"no such file: {missing}"


def test_missing_argv_setting_is_a_failed_result_not_a_crash(
    make_request: Callable[..., RunRequest],
) -> None:
    for settings in ({}, {"argv": "echo hi"}, {"argv": []}, {"argv": ["echo", 3]}):
        result = adapter_for("command").run(make_request(settings=settings))

        assert result.outcome is Outcome.FAILED
        assert result.error.startswith("bad command settings:"), settings


def test_a_command_hanging_past_its_timeout_is_killed_with_its_children(
    bin_dir: Path, make_request: Callable[..., RunRequest]
) -> None:
    install_stand_in(bin_dir, "slow-tool", hang=True)

    result = adapter_for("command").run(
        make_request(settings={"argv": ["slow-tool"]}, timeout_s=1.0)
    )

    grandchild = int((bin_dir / "slow-tool.grandchild").read_text())
    try:
        assert result.outcome is Outcome.TIMED_OUT
        assert result.error == "timed out after 1s; process group killed"
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_the_workers_own_configuration_does_not_reach_the_agent(
    monkeypatch: pytest.MonkeyPatch, make_request: Callable[..., RunRequest]
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://board")
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "clawboo.settings")
    monkeypatch.setenv("CLAWBOO_STATE_DIR", "/var/clawboo")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "kept-for-the-cli")
    script = (
        "import os; print(','.join(sorted(k for k in os.environ if k in "
        "{'DATABASE_URL', 'DJANGO_SETTINGS_MODULE', 'CLAWBOO_STATE_DIR', "
        "'ANTHROPIC_API_KEY', 'CLAWBOO_TASK_ID'})))"
    )

    result = adapter_for("command").run(
        make_request(settings={"argv": [sys.executable, "-c", script]})
    )

    assert result.summary == "ANTHROPIC_API_KEY,CLAWBOO_TASK_ID"
