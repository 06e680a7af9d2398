"""Per-path locks that serialize mutating operations on one checkout.

A provision, a pause and a GC sweep of the same worktree must never interleave,
whether they run on two threads of one server or in two processes (a web worker
and ``manage.py worktrees_gc``). So each path gets a re-entrant thread lock *and*
an ``fcntl.flock`` on a lock file under ``<state>/locks``. The flock is taken once
per thread nesting level (flock locks belong to the open file, so a second open of
the same file in this process would deadlock against ourselves).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings


class _PathLock:
    def __init__(self) -> None:
        self.rlock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_registry: dict[str, _PathLock] = {}
_registry_guard = threading.Lock()


def lock_file_for(path: str | Path) -> Path:
    key = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()
    return Path(settings.CLAWBOO_STATE_DIR) / "locks" / f"{key}.lock"


@contextmanager
def path_lock(path: str | Path) -> Iterator[None]:
    """Hold the exclusive lock for ``path`` (re-entrant within one thread).

    Blocks until every other thread and process holding it lets go. Lock files are
    never deleted: removing one while another process waits on it would let two
    holders in at once.
    """
    key = os.path.abspath(str(path))
    with _registry_guard:
        entry = _registry.setdefault(key, _PathLock())
    with entry.rlock:
        if entry.depth == 0:
            lock_file = lock_file_for(key)
            lock_file.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            entry.fd = fd
        entry.depth += 1
        try:
            yield
        finally:
            entry.depth -= 1
            if entry.depth == 0 and entry.fd is not None:
                fd, entry.fd = entry.fd, None
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
