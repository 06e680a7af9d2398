"""The shared subprocess runner: streaming, timeouts, cancel and process-group kills."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from executor.runtimes.process import run_process
from tests.runtimes.stand_ins import install_stand_in, is_running, kill_if_running, wait_until_gone

ENV = {"PATH": "/usr/bin:/bin"}


def test_it_streams_stdout_lines_to_the_parser_and_both_streams_to_the_log(tmp_path: Path) -> None:
    parsed: list[str] = []
    live: list[tuple[str, str]] = []

    run = run_process(
        [
            sys.executable,
            "-c",
            "import sys; print('a'); print('b'); print('oops', file=sys.stderr)",
        ],
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
        on_stdout_line=parsed.append,
        on_output=lambda stream, line: live.append((stream, line)),
    )

    assert run.exit_code == 0
    assert not run.timed_out and not run.cancelled
    assert parsed == ["a", "b"]
    assert ("stderr", "oops") in live and ("stdout", "a") in live
    assert run.stderr_tail == "oops"
    assert set(run.log_tail.splitlines()) == {"a", "b", "oops"}


def test_a_silent_hang_is_stopped_at_the_timeout_with_its_whole_group(tmp_path: Path) -> None:
    hanger = install_stand_in(tmp_path / "bin", "hanger", hang=True)

    run = run_process([str(hanger.path)], cwd=tmp_path, env=ENV, timeout_s=1.0)

    grandchild = hanger.grandchild_pid()
    try:
        assert run.timed_out
        assert run.exit_code is not None and run.exit_code < 0  # ended by a signal
        assert wait_until_gone(grandchild), "the grandchild sleep outlived the run"
        assert run.duration_s < 1.0 + 5.0
    finally:
        kill_if_running(grandchild)


def test_a_child_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    stubborn = install_stand_in(tmp_path / "bin", "stubborn", hang=True, ignore_sigterm=True)

    run = run_process([str(stubborn.path)], cwd=tmp_path, env=ENV, timeout_s=1.0, grace_s=0.3)

    grandchild = stubborn.grandchild_pid()
    try:
        assert run.timed_out
        assert run.exit_code == -9
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_cancel_stops_a_running_child_and_its_group(tmp_path: Path) -> None:
    hanger = install_stand_in(tmp_path / "bin", "hanger", hang=True)
    cancel = threading.Event()

    def cancel_once_hanging(stream: str, line: str) -> None:
        if line == "hanging":
            cancel.set()

    run = run_process(
        [str(hanger.path)],
        cwd=tmp_path,
        env=ENV,
        timeout_s=60,
        on_output=cancel_once_hanging,
        cancel=cancel,
    )

    grandchild = hanger.grandchild_pid()
    try:
        assert run.cancelled and not run.timed_out
        assert run.duration_s < 10
        assert wait_until_gone(grandchild)
    finally:
        kill_if_running(grandchild)


def test_background_leftovers_are_stopped_when_the_child_exits_normally(tmp_path: Path) -> None:
    pid_file = tmp_path / "leftover.pid"
    script = (
        "import subprocess, sys; "
        "p = subprocess.Popen(['sleep', '300']); "
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))"
    )

    run = run_process([sys.executable, "-c", script], cwd=tmp_path, env=ENV, timeout_s=30)

    leftover = int(pid_file.read_text())
    try:
        assert run.exit_code == 0 and not run.timed_out
        assert wait_until_gone(leftover), "a background process outlived its run"
    finally:
        kill_if_running(leftover)


def test_a_program_that_cannot_start_is_a_launch_error_not_an_exception(tmp_path: Path) -> None:
    run = run_process([str(tmp_path / "nope")], cwd=tmp_path, env=ENV, timeout_s=5)

    assert run.launch_error.startswith(f"could not start {tmp_path / 'nope'}")
    assert run.exit_code is None


def test_a_parser_that_raises_does_not_stop_the_run(tmp_path: Path) -> None:
    seen: list[str] = []

    def fragile_parser(line: str) -> None:
        seen.append(line)
        if line == "bad":
            raise ValueError("boom")

    run = run_process(
        [sys.executable, "-c", "print('bad'); print('good')"],
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
        on_stdout_line=fragile_parser,
    )

    assert run.exit_code == 0
    assert seen == ["bad", "good"]
    assert run.parser_errors == 1
    assert "parser error" in run.log_tail


def test_the_log_tail_keeps_only_the_last_lines(tmp_path: Path) -> None:
    run = run_process(
        [sys.executable, "-c", "for i in range(1000): print(i)"],
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
    )

    lines = run.log_tail.splitlines()
    assert len(lines) == 200
    assert lines[-1] == "999" and lines[0] == "800"


def test_undecodable_bytes_do_not_break_the_stream(tmp_path: Path) -> None:
    parsed: list[str] = []

    run = run_process(
        [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok\\n')"],
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
        on_stdout_line=parsed.append,
    )

    assert run.exit_code == 0
    assert parsed == ["\ufffd\ufffd ok"]


def test_a_missing_working_directory_is_named_as_such(tmp_path: Path) -> None:
    run = run_process(["true"], cwd=tmp_path / "gone", env=ENV, timeout_s=5)

    assert run.launch_error == f"working directory {tmp_path / 'gone'} does not exist"


def test_the_liveness_check_the_kill_tests_rely_on_sees_a_live_process() -> None:
    assert is_running(os.getpid())


def test_a_run_dies_with_the_worker_that_started_it(tmp_path: Path) -> None:
    # The run is in a session of its own, out of reach of a kill aimed at the
    # worker's group: a worker killed outright must still not leave it running.
    import signal
    import subprocess
    import time

    pidfile = tmp_path / "run.pid"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path;"
            "from executor.runtimes.process import run_process;"
            "run_process(['sh', '-c', 'echo $$ > run.pid; exec sleep 60'],"
            " cwd=Path(sys.argv[1]), env={'PATH': '/usr/bin:/bin'}, timeout_s=60)",
            str(tmp_path),
        ],
        cwd=Path(__file__).resolve().parents[2],
    )
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline and worker.poll() is None
        time.sleep(0.02)
    run_pid = int(pidfile.read_text())
    try:
        assert is_running(run_pid)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        assert wait_until_gone(run_pid, deadline_s=10)
    finally:
        kill_if_running(run_pid)
