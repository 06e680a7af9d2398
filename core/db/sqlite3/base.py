"""Django's SQLite backend with a small per-process pool of open connections.

Under ASGI every request runs in a thread of its own and opens, then closes, its
own connection (``CONN_MAX_AGE = 0``: a kept thread-local connection would leak
with the thread). On SQLite that costs each request a connect, the storage
layer's five pragmas, a cold statement cache (the claim's statements are compiled
again, inside the write lock) and, whenever the closing connection happens to be
the last one open, a full checkpoint and deletion of the WAL.

With ``OPTIONS["pool_size"] = N`` a closed connection is rolled back if needed and
kept for the next request instead (at most N idle ones per database file; extras
are closed). Django still sees an ordinary connect and close. Django 5.2 pools
PostgreSQL connections itself (``OPTIONS["pool"]``) but not SQLite's.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from typing import Any

from django.db.backends.sqlite3 import base


class DatabaseWrapper(base.DatabaseWrapper):
    # True while the wrapped connection came from the pool: it is already set up
    # (core.storage skips its pragmas for it).
    reused_connection = False

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        params.pop("pool_size", None)  # ours, not sqlite3.connect's
        return params

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        pool = self._pool()
        if pool is not None:
            try:
                conn = pool.get_nowait()
            except queue.Empty:
                pass
            else:
                self.reused_connection = True
                return conn
        self.reused_connection = False
        return super().get_new_connection(conn_params)

    def _close(self) -> None:
        pool = self._pool()
        conn = self.connection
        if pool is not None and conn is not None:
            try:
                if conn.in_transaction:
                    conn.rollback()
                pool.put_nowait(conn)
                return
            except (queue.Full, sqlite3.Error):
                pass  # fall through: really close it
        super()._close()  # type: ignore[misc]

    def _pool(self) -> queue.Queue[Any] | None:
        size = int(self.settings_dict.get("OPTIONS", {}).get("pool_size") or 0)
        if size <= 0 or self.is_in_memory_db():
            return None
        key = str(self.settings_dict["NAME"])
        pool = _pools.get(key)
        if pool is None:
            with _pools_guard:
                pool = _pools.get(key)
                if pool is None:
                    # Last in, first out: the connection just closed has the warmest
                    # statement cache.
                    pool = _pools[key] = queue.LifoQueue(maxsize=size)
        return pool


_pools: dict[str, queue.Queue[Any]] = {}
_pools_guard = threading.Lock()
# Connections a parent process pooled before it forked (django-q2's cluster forks
# its workers after closing connections, which here means pooling them). A child
# must never use them — SQLite forbids carrying a connection across fork() — nor
# close them, so they are kept here, untouched, for the child's lifetime.
_inherited: list[queue.Queue[Any]] = []


def _forget_pools_in_child() -> None:
    global _pools_guard
    _pools_guard = threading.Lock()  # the parent may have held it while forking
    _inherited.extend(_pools.values())
    _pools.clear()


os.register_at_fork(after_in_child=_forget_pools_in_child)


def drain_pools() -> None:
    """Close every idle pooled connection (tests; a process about to fork)."""
    with _pools_guard:
        pools = list(_pools.values())
    for pool in pools:
        while True:
            try:
                pool.get_nowait().close()
            except queue.Empty:
                break
