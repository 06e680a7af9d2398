"""Child processes that do not outlive their parent.

A child started in its own session (as agents and ``clawboo up``'s parts are, so a
stop can reach their whole process group) is out of reach of anything aimed at
the parent's group: killed with SIGKILL, or by the OOM killer, the parent could
otherwise leave it running. On Linux the child asks the kernel, between fork and
exec, for SIGKILL when the thread that started it dies (``PR_SET_PDEATHSIG``).
Pass :func:`die_with_parent` as ``preexec_fn``; elsewhere it does nothing.

A ``preexec_fn`` makes Python fork the whole interpreter and run Python in the
child before exec, where without one it spawns with ``vfork``: from a worker
holding ~150 MB that is tens of milliseconds a start instead of a few, paid twice
a task (the run, its verify command). :func:`death_prefix` asks the same of the
kernel through util-linux's ``setpriv --pdeathsig`` (which sets it and execs the
command: same pid, same process), so the spawn needs no ``preexec_fn``.

A child that forks workers of its own (django-q2's cluster forks a sentinel, which
forks the workers) passes the rule down with :func:`forks_die_with_parent`: the
supervisor sets ``CLAWBOO_DIE_WITH_PARENT=1`` for its children and the console
script honours it, so killing ``clawboo up`` outright leaves no process behind.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any


def _linux_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_PRCTL = _linux_prctl()
_PR_SET_PDEATHSIG = 1
_SIGKILL = int(signal.SIGKILL)


def die_with_parent() -> None:
    """In the child, before exec: one foreign call, no locks, safe after fork.

    The signal follows the *thread* that started the child, so call ``Popen`` from
    a thread that outlives it (both callers wait for their child on that thread or
    on the process's main thread).
    """
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, _SIGKILL)


_SETPRIV_ARGS = ("--pdeathsig", "KILL", "--")
_setpriv: list[str] | None = None  # found and probed: the prefix ([] when unusable)
_setpriv_lock = threading.Lock()


def death_prefix() -> list[str]:
    """``[setpriv, --pdeathsig, KILL, --]`` to put before a command so that it dies
    with the thread that starts it, spawned without a ``preexec_fn``; ``[]`` where
    setpriv is missing or cannot (not Linux, an old util-linux): then pass
    :func:`die_with_parent` as before. Probed once per process."""
    global _setpriv
    with _setpriv_lock:
        if _setpriv is None:
            _setpriv = []
            found = shutil.which("setpriv") if _PRCTL is not None else None
            if found is not None:
                try:
                    probe = subprocess.run(  # noqa: S603 - an argv list
                        [found, *_SETPRIV_ARGS, "true"], capture_output=True, timeout=10
                    )
                    if probe.returncode == 0:
                        _setpriv = [found, *_SETPRIV_ARGS]
                except (OSError, subprocess.TimeoutExpired):
                    pass
        return list(_setpriv)


ENV_FLAG = "CLAWBOO_DIE_WITH_PARENT"


def forks_die_with_parent() -> None:
    """Every process this one forks from now on (and they in turn) dies with the
    thread that forked it. For the processes the supervisor starts."""
    os.register_at_fork(after_in_child=die_with_parent)


def run_within(
    argv: list[str], timeout: float, **kwargs: Any
) -> subprocess.CompletedProcess[str] | None:
    """A short command (argv, never a shell string) run to its end with its output
    captured as text, or None when it did not answer within ``timeout`` seconds
    (``subprocess`` killed it). Its exit status is the caller's to read."""
    try:
        return subprocess.run(  # noqa: S603 - an argv list, no shell
            argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
    except subprocess.TimeoutExpired:
        return None
