"""The full output of each execution, kept as a file per run.

The executor appends every line the runtime prints (stdout as printed, stderr
marked ``[stderr] ``) to
``<CLAWBOO_STATE_DIR>/runlogs/<team>/<task>/<execution id>.log``
as it arrives; the execution row keeps only a tail, this keeps all of it, up to
``CLAWBOO_RUNLOG_MAX_BYTES`` (then one truncation line). The board serves it for
download and its websocket streams the growing file to whoever watches the run;
``prune`` deletes the logs older than the history's retention window.

A team's logs live under that team's folder, so a reader scoped to a team
(the websocket of ``?team=T``) cannot reach another team's output by id; a
task's runs share its folder, so whoever watches a task finds its newest run
from the files alone, the moment it prints (not when the board's event of the
claim reaches that process).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from core.checks import ID_PATTERN

STDERR_MARK = "[stderr] "
TRUNCATED = "[clawboo: log truncated at {limit} bytes]\n"


def root() -> Path:
    return Path(settings.CLAWBOO_STATE_DIR) / "runlogs"


def _checked(value: str, what: str) -> str:
    if not ID_PATTERN.match(value):
        raise ValueError(f"not a {what} id: {value!r}")
    return value


def path_for(team_id: str, task_id: str, execution_id: int) -> Path:
    """Where the execution's log is (or will be). The ids are checked against the id
    pattern (no separators, never "." or ".."), so they name one folder and no other."""
    team, task = _checked(team_id, "team"), _checked(task_id, "task")
    return root() / team / task / f"{int(execution_id)}.log"


def newest(team_id: str, task_id: str) -> int | None:
    """The task's latest execution that has a log, or None."""
    try:
        folder = root() / _checked(team_id, "team") / _checked(task_id, "task")
        ids = [int(p.stem) for p in folder.glob("*.log") if p.stem.isdigit()]
    except (ValueError, OSError):
        return None
    return max(ids) if ids else None


def max_bytes() -> int:
    return int(settings.CLAWBOO_RUNLOG_MAX_BYTES)


class RunLog:
    """The appending side: one per run, called from the runtime's reader threads."""

    def __init__(self, team_id: str, task_id: str, execution_id: int) -> None:
        self.path = path_for(team_id, task_id, execution_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.limit = max_bytes()
        self.size = 0
        self.full = False
        # Line-buffered: each line is on disk (for the stream) as soon as it is written.
        self.file = open(self.path, "a", encoding="utf-8", errors="replace", buffering=1)  # noqa: SIM115

    def write(self, stream: str, line: str) -> None:
        text = _line(stream, line)
        with self.lock:
            if self.full or self.file.closed:
                return
            size = len(text.encode("utf-8", errors="replace"))
            if self.size + size > self.limit:
                self.full = True
                self.file.write(TRUNCATED.format(limit=self.limit))
                return
            self.size += size
            self.file.write(text)

    def close(self) -> None:
        with self.lock:
            self.file.close()


# A stdout line that begins like one of the log's own marks gets this mark, so
# what a run prints can never pass for a stderr line or the truncation line.
STDOUT_MARK = "[stdout] "
_MARKS = (STDERR_MARK, STDOUT_MARK, "[clawboo:")


def _line(stream: str, line: str) -> str:
    """One reported line as the log's text: each line break inside it (whatever
    ``str.splitlines`` counts as one) starts a line of the same stream, each marked
    as its stream's, so neither a remote worker's chunk nor a run's output can
    write a line of another stream or the log's own truncation line."""
    parts = line.rstrip("\n").splitlines() or [""]
    return "".join(_marked(stream, part) + "\n" for part in parts)


def _marked(stream: str, part: str) -> str:
    if stream == "stderr":
        return STDERR_MARK + part
    return STDOUT_MARK + part if part.startswith(_MARKS) else part


@dataclass(frozen=True)
class Appended:
    """What :func:`append` did: the log's size after it, whether the lines were
    written (False: they were already, a retried chunk), and whether the log is full."""

    size: int
    written: bool
    full: bool


def append(
    team_id: str,
    task_id: str,
    execution_id: int,
    lines: Sequence[tuple[str, str]],
    offset: int,
) -> Appended:
    """Append a remote run's ``(stream, line)`` chunk to its log, as :class:`RunLog`
    writes a local run's lines (same marks, same bound).

    ``offset`` is the size the sender last heard the log had: a chunk whose offset is
    behind the file was written already (its answer was lost, the chunk was sent
    again) and is not written twice. Under an exclusive lock on the file, so two
    server processes that take a chunk each of one run never interleave them."""
    path = path_for(team_id, task_id, execution_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    limit = max_bytes()
    with open(path, "ab") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        size = log.seek(0, os.SEEK_END)
        full = _ends_truncated(path, size)
        if offset < size or full:
            return Appended(size, False, full)
        out = bytearray()
        for stream, line in lines:
            data = _line(stream, line).encode("utf-8", errors="replace")
            if size + len(out) + len(data) > limit:
                out += TRUNCATED.format(limit=limit).encode()
                full = True
                break
            out += data
        log.write(out)
        log.flush()
        return Appended(size + len(out), True, full)


def _ends_truncated(path: Path, size: int) -> bool:
    mark = b"[clawboo: log truncated at "
    if size == 0:
        return False
    with open(path, "rb") as log:
        log.seek(max(0, size - 80))
        tail = log.read()
    return tail.rstrip(b"\n").rsplit(b"\n", 1)[-1].startswith(mark)


def read(
    team_id: str, task_id: str, execution_id: int, offset: int = 0, limit: int | None = None
) -> bytes:
    """Up to ``limit`` bytes of the log from ``offset`` (all of it by default); b"" when
    there is no log (yet)."""
    try:
        with open(path_for(team_id, task_id, execution_id), "rb") as log:
            log.seek(offset)
            return log.read(-1 if limit is None else limit)
    except FileNotFoundError:
        return b""


def exists(team_id: str, task_id: str, execution_id: int) -> bool:
    return path_for(team_id, task_id, execution_id).is_file()


def size(team_id: str, task_id: str, execution_id: int) -> int:
    try:
        return path_for(team_id, task_id, execution_id).stat().st_size
    except FileNotFoundError:
        return 0


def prune_before(cutoff: dt.datetime) -> int:
    """Delete the logs last written before ``cutoff``; returns how many."""
    base = root()
    if not base.is_dir():
        return 0
    limit = cutoff.timestamp()
    removed = 0
    for log in base.glob("*/*/*.log"):
        try:
            if log.stat().st_mtime < limit:
                os.unlink(log)
                removed += 1
        except FileNotFoundError:
            continue
    return removed
