"""A long git call's progress, said while it runs: a remote worker's first clone of a
large repository took minutes and its log said "cloning …" and then nothing.

git writes its progress to stderr when asked (``--progress``; by itself only to a
terminal), one update per carriage return: ``Receiving objects:  45% (450/1000),
1.20 MiB | 2.00 MiB/s``, the last of a phase ending ``, done.``. :func:`run` reads it
while the call runs, under the one deadline the call always had, and hands ``say`` a
line at most every :data:`EVERY_S` seconds, and at the end of each phase once the call
has run that long: a clone that takes a second says nothing more than before.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

EVERY_S = 5.0
# One update: "[remote: ]Phase name:  NN% (done/total)[, rest][, done.]".
UPDATE = re.compile(
    r"^(?:remote: )?(?P<phase>[A-Z][a-z]+(?: [a-z]+)*):\s+(?P<percent>\d{1,3})%"
    r" \((?P<done>\d+)/(?P<total>\d+)\)(?P<rest>.*)$"
)


@dataclass(frozen=True)
class Progress:
    phase: str  # "Receiving objects", "Resolving deltas", …
    percent: int
    done: int
    total: int
    amount: str  # "1.20 MiB | 2.00 MiB/s" (receiving), else ""
    finished: bool  # the phase's last update (", done.")

    def line(self) -> str:
        text = f"{self.phase.lower()} {self.percent}% ({self.done}/{self.total})"
        text += f", {self.amount}" if self.amount else ""
        return text + (", done" if self.finished else "")


def parse(update: str) -> Progress | None:
    """One of git's progress updates, or None for anything else it says (an error)."""
    found = UPDATE.match(update.strip())
    if found is None:
        return None
    rest = found["rest"].strip()
    finished = rest.endswith(", done.") or rest == "done."
    rest = rest.removesuffix("done.").strip().strip(",").strip()
    return Progress(
        found["phase"],
        int(found["percent"]),
        int(found["done"]),
        int(found["total"]),
        rest,
        finished,
    )


@dataclass(frozen=True)
class Finished:
    """How the call ended: ``returncode`` None when it did not end by the deadline
    (killed); ``said`` what git wrote that was no progress (its error, say);
    ``last`` its last progress."""

    returncode: int | None
    said: str
    last: Progress | None


def run(
    argv: Sequence[str],
    timeout: float,
    say: Callable[[str], None],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    every_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Finished:
    """Run git ``argv`` (with ``--progress`` among them; its stdout is not read) to its
    end or ``timeout`` seconds, whichever is first, saying its progress to ``say``
    (``every_s``: :data:`EVERY_S`)."""
    every_s = EVERY_S if every_s is None else every_s
    started = clock()
    deadline = started + timeout
    proc = subprocess.Popen(  # noqa: S603 - an argv list, no shell
        list(argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    pending, other = b"", []
    last: Progress | None = None
    said_at = started
    try:
        while (left := deadline - clock()) > 0:
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break  # git closed stderr: it is ending
            *updates, pending = re.split(rb"[\r\n]", pending + chunk)
            for raw in updates:
                text = raw.decode(errors="replace")
                progress = parse(text)
                if progress is None:
                    other.append(text)
                    continue
                last, now = progress, clock()
                if now - said_at >= every_s or (progress.finished and now - started >= every_s):
                    say(progress.line())
                    said_at = now
        else:
            _stop(proc)
            return Finished(None, "\n".join(other), last)
        try:
            code = proc.wait(timeout=max(deadline - clock(), 0.01))
        except subprocess.TimeoutExpired:
            _stop(proc)
            return Finished(None, "\n".join(other), last)
    finally:
        proc.stderr.close()
    other.append(pending.decode(errors="replace"))
    return Finished(code, "\n".join(line for line in other if line.strip()), last)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Kill git and what it started (its remote helper, ssh): they share its session."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
