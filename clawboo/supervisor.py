"""The process supervisor behind ``clawboo up``.

Each child (daphne, the django-q2 cluster, the ticker, the executor workers) runs in
its own session, so its whole process group — qcluster's worker processes included —
can be signalled at once and nothing outlives the supervisor. A child that dies is
reported in one line and restarted with exponential backoff. Periodic work is not
the supervisor's: it is django-q2 schedules the qcluster child runs (``ops.periodic``).

Every step of the loop is a method (``reap``, ``restart_due``, ``stop_all``) so a
test can drive it directly, as healthchecks' ``sendalerts`` does.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from core.procs import ENV_FLAG, die_with_parent

log = logging.getLogger(__name__)

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 30.0
# A child that stayed up this long is healthy again: its next death restarts fast.
STABLE_AFTER_S = 60.0
# SIGTERM first; whatever is still alive after this is SIGKILLed.
STOP_GRACE_S = 5.0


@dataclass(frozen=True)
class ChildSpec:
    name: str
    argv: Sequence[str]


@dataclass
class Child:
    spec: ChildSpec
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    # Deaths since the child last stayed up STABLE_AFTER_S; drives the backoff.
    failures: int = 0
    restart_at: float | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def backoff_delay(failures: int, low: float = BACKOFF_MIN_S, high: float = BACKOFF_MAX_S) -> float:
    """1 s, 2 s, 4 s … capped at 30 s for the 1st, 2nd, 3rd … death in a row."""
    return min(low * 2 ** max(failures - 1, 0), high)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is still in process group ``pgid``.

    Zombies are skipped: an exited grandchild whose reaper is slow (or a PID 1 that
    never reaps) holds no resources and cannot be killed anyway.
    """
    proc = Path("/proc")
    if not proc.is_dir():  # not Linux: ask the kernel, zombies included
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ..." — comm may hold spaces and parentheses.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Supervisor:
    """Start, watch, restart and stop a fixed set of child processes."""

    def __init__(
        self,
        specs: Sequence[ChildSpec],
        *,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
        log_dir: Path | None = None,
        say: Callable[[str], None] = print,
        backoff_min_s: float = BACKOFF_MIN_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        stable_after_s: float = STABLE_AFTER_S,
        grace_s: float = STOP_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.children = [Child(spec) for spec in specs]
        self.env = env
        self.cwd = cwd
        self.log_dir = log_dir
        self.say = say
        self.backoff_min_s = backoff_min_s
        self.backoff_max_s = backoff_max_s
        self.stable_after_s = stable_after_s
        self.grace_s = grace_s
        self.clock = clock
        self.stop_event = threading.Event()
        # Groups of children that died on their own; killed again at stop in case a
        # grandchild survived the leader.
        self._dead_groups: set[int] = set()

    # --- one child ------------------------------------------------------------
    def log_path(self, child: Child) -> Path | None:
        return self.log_dir / f"{child.name}.log" if self.log_dir else None

    def start(self, child: Child) -> None:
        path = self.log_path(child)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            child.log_file = open(path, "ab")  # noqa: SIM115 - closed when the child is reaped
        out: IO[bytes] | int = child.log_file or subprocess.DEVNULL
        child.proc = subprocess.Popen(
            list(child.spec.argv),
            env={**(os.environ if self.env is None else self.env), ENV_FLAG: "1"},
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session and process group: Ctrl-C in the terminal reaches only
            # the supervisor, and stopping the child reaches its grandchildren too;
            # and it dies if the supervisor is killed outright (core.procs).
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        child.started_at = self.clock()
        child.restart_at = None

    def start_all(self) -> None:
        for child in self.children:
            self.start(child)
        self.say(
            "started " + ", ".join(f"{c.name} (pid {c.proc.pid})" for c in self.children if c.proc)
        )

    # --- the loop's steps -----------------------------------------------------
    def reap(self) -> list[Child]:
        """Report each child that died since the last call and schedule its restart."""
        died: list[Child] = []
        now = self.clock()
        for child in self.children:
            proc = child.proc
            if proc is None or child.restart_at is not None or proc.poll() is None:
                continue
            # The leader is gone; take down anything it left in its group.
            signal_group(proc.pid, signal.SIGKILL)
            self._dead_groups.add(proc.pid)
            self._close_log(child)
            if now - child.started_at >= self.stable_after_s:
                child.failures = 0
            child.failures += 1
            delay = backoff_delay(child.failures, self.backoff_min_s, self.backoff_max_s)
            child.restart_at = now + delay
            where = self.log_path(child)
            self.say(
                f"{child.name} {describe_exit(proc.returncode)}; restarting in {delay:g}s"
                + (f" (log: {where})" if where else "")
            )
            died.append(child)
        return died

    def restart_due(self) -> list[Child]:
        """Restart each dead child whose backoff has elapsed."""
        now = self.clock()
        restarted: list[Child] = []
        self._dead_groups = {pgid for pgid in self._dead_groups if group_alive(pgid)}
        for child in self.children:
            if child.restart_at is not None and now >= child.restart_at:
                self.start(child)
                assert child.proc is not None
                self.say(f"{child.name} restarted (pid {child.proc.pid})")
                restarted.append(child)
        return restarted

    def step(self) -> None:
        self.reap()
        self.restart_due()

    # --- lifetime -------------------------------------------------------------
    def request_stop(self, *_: object) -> None:
        self.stop_event.set()

    def run(self, poll_s: float = 0.2) -> int:
        """Start every child and supervise until SIGINT/SIGTERM; then stop them all."""
        previous = {
            sig: signal.signal(sig, self.request_stop) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            self.start_all()
            while not self.stop_event.wait(poll_s):
                self.step()
        finally:
            self.stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def stop_all(self) -> None:
        """SIGTERM every child, SIGKILL every process group still alive after the grace."""
        groups = {c.proc.pid for c in self.children if c.proc is not None} | self._dead_groups
        live = [c for c in self.children if c.running]
        if live:
            self.say(f"stopping {', '.join(c.name for c in live)} …")
        # SIGTERM the leaders only: qcluster stops its own workers in order, and a
        # worker signalled behind its parent's back can leave the cluster hanging.
        for child in live:
            assert child.proc is not None
            child.proc.send_signal(signal.SIGTERM)
        deadline = self.clock() + self.grace_s
        while self.clock() < deadline and self._any_alive(groups):
            time.sleep(0.05)
        leftover = [pgid for pgid in groups if group_alive(pgid)]
        for pgid in leftover:
            signal_group(pgid, signal.SIGKILL)
        for child in self.children:
            if child.proc is not None:
                try:
                    child.proc.wait(timeout=self.grace_s)
                except subprocess.TimeoutExpired:
                    log.warning("%s (pid %d) outlived SIGKILL", child.name, child.proc.pid)
            self._close_log(child)
            child.restart_at = None
        kill_deadline = self.clock() + self.grace_s
        while self.clock() < kill_deadline and self._any_alive(leftover):
            time.sleep(0.05)
        if leftover:
            self.say(f"killed {len(leftover)} process group(s) that ignored SIGTERM")
        self.say("stopped")

    def _any_alive(self, groups: Sequence[int] | set[int]) -> bool:
        for child in self.children:
            if child.proc is not None:
                child.proc.poll()  # reap our own children so they do not linger as zombies
        return any(group_alive(pgid) for pgid in groups)

    def _close_log(self, child: Child) -> None:
        if child.log_file is not None:
            child.log_file.close()
            child.log_file = None


def python_argv(*args: str) -> list[str]:
    """A command run with this interpreter, so children share the supervisor's venv."""
    return [sys.executable, *args]
