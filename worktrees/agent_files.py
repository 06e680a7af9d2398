"""Reading and writing files in a checkout an agent controls.

Anything in a checkout may be what the agent made it: a FIFO (whose read waits for
a writer forever), a device, a socket, or a symlink to any of them or to a file
outside the checkout. So a file there is read only when it is itself a regular
file -- checked with ``lstat``, opened ``O_NOFOLLOW | O_NONBLOCK`` (opening a FIFO
then returns at once) and checked again with ``fstat`` on what was opened -- and
every read runs under a deadline, so even a file on a stalled filesystem cannot
hold the worker. A write replaces the path with a new regular file (temp file and
``rename``) instead of writing through whatever is there.

Git itself skips FIFOs and stores a symlink as a link (it never reads through one);
its calls carry their own timeouts (:mod:`worktrees.git`).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

READ_TIMEOUT_S = 10.0
MAX_READ_BYTES = 16 * 1024 * 1024
_CHUNK = 65536


class NotARegularFile(OSError):
    """The path is a FIFO, device, socket, directory or symlink: never read."""


class FileTooLarge(OSError):
    """The file is over the read's size limit."""


def _open_regular(path: Path) -> int:
    found = os.lstat(path)
    if not stat.S_ISREG(found.st_mode):
        raise NotARegularFile(errno.EINVAL, "not a regular file", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the lstat
            raise NotARegularFile(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _bounded(path: Path, consume: Callable[[int], T], timeout_s: float) -> T:
    """``consume(fd)`` of the regular file at ``path``, in a thread, under a deadline.

    On a timeout the thread is left to finish (it closes the file); the caller gets
    ``TimeoutError`` and goes on."""
    fd = _open_regular(path)
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = consume(fd)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            os.close(fd)

    reader = threading.Thread(target=run, name="clawboo-agent-file", daemon=True)
    reader.start()
    reader.join(timeout_s)
    if reader.is_alive():
        raise TimeoutError(errno.ETIMEDOUT, f"read took over {timeout_s:g}s", str(path))
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def read_bytes(
    path: Path, *, max_bytes: int = MAX_READ_BYTES, timeout_s: float = READ_TIMEOUT_S
) -> bytes:
    """The content of the regular file at ``path``; OSError for anything else
    (:class:`NotARegularFile`, :class:`FileTooLarge`, ``TimeoutError``)."""

    def pull(fd: int) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, _CHUNK):
            total += len(chunk)
            if total > max_bytes:
                raise FileTooLarge(errno.EFBIG, f"over {max_bytes} bytes", str(path))
            chunks.append(chunk)
        return b"".join(chunks)

    return _bounded(path, pull, timeout_s)


def read_text(
    path: Path, *, max_bytes: int = MAX_READ_BYTES, timeout_s: float = READ_TIMEOUT_S
) -> str:
    """:func:`read_bytes` as UTF-8 (``UnicodeDecodeError``, a ValueError, if not)."""
    return read_bytes(path, max_bytes=max_bytes, timeout_s=timeout_s).decode("utf-8")


def count_lines(path: Path, *, timeout_s: float = READ_TIMEOUT_S) -> int | None:
    """Lines of the regular file at ``path`` as git counts them, None for a binary
    file (a NUL in its first 8000 bytes, git's test); OSError as :func:`read_bytes`."""

    def count(fd: int) -> int | None:
        lines = 0
        first = True
        last = b""
        while chunk := os.read(fd, _CHUNK):
            if first and b"\0" in chunk[:8000]:
                return None
            first = False
            lines += chunk.count(b"\n")
            last = chunk
        return lines + (1 if last and not last.endswith(b"\n") else 0)

    return _bounded(path, count, timeout_s)


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with a regular file holding ``text``: whatever was there (a
    FIFO, a symlink to a file elsewhere) is replaced, never written through."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # what a checkout's other files are, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
