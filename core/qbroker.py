"""django-q2's ORM broker, with a pusher that outlives a database outage.

The stock pusher treats any error of a dequeue as a crashed broker: it sleeps
10 s and exits, and the cluster's guard starts a new one — so a single query cut
by ``pg_terminate_backend`` (or a SQLite lock held past its timeout) stops the
cluster picking up tasks for 10 s or more after the database is back. Here a
dequeue that finds the database unavailable drops the connection, waits its
backoff (:mod:`core.reconnect`) and reports an empty queue; the pusher polls on.
"""

from __future__ import annotations

import time
from typing import Any

from django_q.brokers.orm import ORM

from core import reconnect


class ReconnectingORM(ORM):
    _outage: reconnect.Outage | None = None

    def dequeue(self) -> Any:
        if self._outage is None:
            self._outage = reconnect.Outage("qcluster pusher")
        try:
            found = super().dequeue()
        except Exception as exc:
            if not reconnect.is_unavailable(exc):
                raise
            time.sleep(self._outage.lost(exc))
            return None
        self._outage.ok()
        return found
