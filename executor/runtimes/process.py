"""The one way runtimes start a process: argv only, own process group, bounded life.

Every one-shot adapter goes through :func:`run_process`. The child is started in a
new session (``start_new_session=True``) so it leads its own process group; on
timeout or cancel the whole group gets SIGTERM, then SIGKILL after a grace period.
It also dies with the thread that started it (:mod:`core.procs`): a worker
killed mid-run (SIGKILL, OOM) takes its agent with it, instead of leaving it editing
a worktree whose task the board hands out again when the lease lapses.
The timeout is enforced by the waiting thread, not by reading output, so a child
that hangs silently is still stopped. When the child exits on its own, anything it
left running in its group is stopped the same way: a one-shot run leaves no orphans.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from core.procs import death_prefix, die_with_parent
from executor.runtimes.base import OutputCallback

DEFAULT_GRACE_S = 5.0
# How long a process that exited normally gives its leftovers to stop after SIGTERM.
LEFTOVER_GRACE_S = 1.0
TAIL_LINES = 200
# One runaway line (a base64 blob in a tool result) must not fill the log tail.
MAX_TAIL_LINE_CHARS = 4000
_POLL_S = 0.05


@dataclass
class ProcessRun:
    """How a process ended. ``launch_error`` is set (and nothing else) if it never started."""

    exit_code: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    stderr_tail: str = ""
    log_tail: str = ""
    duration_s: float = 0.0
    launch_error: str = ""
    # Exceptions raised by the line parser, kept so a parser bug shows in the log
    # instead of killing the reader thread and hanging the run.
    parser_errors: int = 0


class _Tail:
    """The last N lines of output, shared by the two reader threads."""

    def __init__(self, size: int) -> None:
        self._lines: deque[str] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        if len(line) > MAX_TAIL_LINE_CHARS:
            line = line[:MAX_TAIL_LINE_CHARS] + " [...]"
        with self._lock:
            self._lines.append(line)

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._lines)


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    on_stdout_line: Callable[[str], None] | None = None,
    on_stderr_line: Callable[[str], None] | None = None,
    on_output: OutputCallback | None = None,
    cancel: threading.Event | None = None,
    grace_s: float = DEFAULT_GRACE_S,
) -> ProcessRun:
    """Run ``argv`` to its end, streaming stdout (stderr) lines to ``on_stdout_line``
    (``on_stderr_line``).

    Blocks until the process and its readers are done. ``env`` is the child's whole
    environment. Never raises for anything the child does; a failure to start
    (missing file, not executable, bad cwd) comes back as ``launch_error``.
    """
    started = time.monotonic()
    proc = _launch(argv, cwd, env)
    if isinstance(proc, str):
        return ProcessRun(launch_error=proc)

    # With start_new_session the child is its session's and group's leader.
    pgid = proc.pid
    log = _Tail(TAIL_LINES)
    stderr = _Tail(TAIL_LINES)
    run = ProcessRun()
    parser_errors = [0]
    readers = _start_readers(
        proc, log, stderr, parser_errors, on_output, on_stdout_line, on_stderr_line
    )
    _wait_for_end(proc, run, started + max(timeout_s, 0.0), cancel)

    if run.cancelled or run.timed_out:
        stop_process_group(proc, pgid, grace_s)
    else:
        stop_process_group(proc, pgid, LEFTOVER_GRACE_S)

    # The pipes reach EOF once every holder is dead. A process that escaped the
    # group with its own setsid() could still hold them; don't wait on it forever.
    for reader in readers:
        reader.join(timeout=2.0)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None and not any(r.is_alive() for r in readers):
            stream.close()

    run.exit_code = proc.returncode
    run.log_tail = log.text()
    run.stderr_tail = stderr.text()
    run.duration_s = time.monotonic() - started
    run.parser_errors = parser_errors[0]
    return run


def _launch(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str]
) -> subprocess.Popen[bytes] | str:
    """The started process, in a session and group of its own; or why it could not
    start (missing file, not executable, bad cwd)."""
    if not Path(cwd).is_dir():
        # Popen would blame the program ("No such file") for a missing directory.
        return f"working directory {cwd} does not exist"
    # Through setpriv only a program that will start: one that cannot is Popen's to
    # refuse, so the launch error reads the same either way.
    prefix = death_prefix() if _startable(argv[0], cwd, env) else []
    try:
        return subprocess.Popen(
            [*prefix, *argv],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=None if prefix else die_with_parent,
        )
    except OSError as exc:
        return f"could not start {argv[0]}: {exc}"


def _startable(program: str, cwd: Path, env: Mapping[str, str]) -> bool:
    """Whether ``program`` names an executable file, found as exec would find it
    for the child (its ``PATH``; a path with a slash from ``cwd``)."""
    if os.sep in program:
        path = Path(cwd) / program
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


def _start_readers(
    proc: subprocess.Popen[bytes],
    log: _Tail,
    stderr: _Tail,
    parser_errors: list[int],
    on_output: OutputCallback | None,
    on_stdout_line: Callable[[str], None] | None,
    on_stderr_line: Callable[[str], None] | None,
) -> list[threading.Thread]:
    """One thread per pipe: every line to the log's tail and ``on_output``, and to
    its parser (whose errors are counted and noted, never raised)."""

    def parse(on_line: Callable[[str], None] | None, line: str) -> None:
        if on_line is None:
            return
        try:
            on_line(line)
        except Exception as exc:
            parser_errors[0] += 1
            log.add(f"[clawboo] parser error: {exc!r}")

    def read(
        stream: IO[bytes], name: str, tail: _Tail | None, on_line: Callable[[str], None] | None
    ) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            log.add(line)
            if tail is not None:
                tail.add(line)
            _call_quietly(on_output, name, line)
            parse(on_line, line)

    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(
            target=read, args=(proc.stdout, "stdout", None, on_stdout_line),
            name=f"stdout-{proc.pid}", daemon=True,
        ),
        threading.Thread(
            target=read, args=(proc.stderr, "stderr", stderr, on_stderr_line),
            name=f"stderr-{proc.pid}", daemon=True,
        ),
    ]  # fmt: skip
    for reader in readers:
        reader.start()
    return readers


def _wait_for_end(
    proc: subprocess.Popen[bytes],
    run: ProcessRun,
    deadline: float,
    cancel: threading.Event | None,
) -> None:
    """Wait for the process to exit, to be cancelled or to pass its deadline."""
    while proc.poll() is None:
        if cancel is not None and cancel.is_set():
            run.cancelled = True
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            run.timed_out = True
            return
        try:
            proc.wait(timeout=min(_POLL_S, remaining))
        except subprocess.TimeoutExpired:
            pass


def stop_process_group(proc: subprocess.Popen[bytes], pgid: int, grace_s: float) -> None:
    """SIGTERM the group, wait up to ``grace_s`` for it to empty, then SIGKILL it.

    Reaps the leader. A no-op when the group is already empty.
    """
    if _group_alive(proc, pgid):
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _group_alive(proc, pgid) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        if _group_alive(proc, pgid):
            _signal_group(pgid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # everyone already gone
    except PermissionError:
        pass  # a member changed its uid; nothing more we are allowed to do


def _group_alive(proc: subprocess.Popen[bytes], pgid: int) -> bool:
    """Whether any process in the group still runs (zombies don't count).

    Reaping the leader first matters: an unreaped leader is a zombie that keeps
    the group id alive. Under a PID 1 that never reaps, orphaned grandchildren
    linger as zombies too, which is why /proc is read when ``killpg(pgid, 0)``
    finds anyone at all (zombies included).
    """
    proc.poll()
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # nobody at all in the group, not even a zombie: no need to look
    except PermissionError:
        return True
    if not Path("/proc").is_dir():
        return True
    return any(True for _ in live_group_members(pgid))


def live_group_members(pgid: int) -> list[int]:
    """Pids of non-zombie processes in group ``pgid`` (Linux, via /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != "Z" and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def _call_quietly(callback: OutputCallback | None, stream: str, line: str) -> None:
    # A broken live-log sink must not stop the run or lose the parse.
    if callback is None:
        return
    try:
        callback(stream, line)
    except Exception:  # noqa: S110
        pass
