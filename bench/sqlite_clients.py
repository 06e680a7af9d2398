"""Many concurrent API clients against one daphne on SQLite: every answer counted.

Each client, on its own keep-alive connection, loops create task → list → comment
→ read until the time is up. A ``503 busy`` is what a well-behaved client is told
to retry after ``Retry-After``; it does (up to a few times) and the operation
counts as failed only if it never got through. The target: no 500 at all, and no
operation that failed for good.

    python bench/sqlite_clients.py [--clients 50] [--seconds 60]

prints and writes ``bench/results/sqlite_clients.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
RETRIES = 5


@dataclass
class Tally:
    statuses: Counter[int] = field(default_factory=Counter)
    busy_without_retry_after: int = 0
    failed_operations: int = 0
    operations: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def as_dict(self) -> dict[str, Any]:
        return {
            "operations": self.operations,
            "failed_operations": self.failed_operations,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "server_errors": sum(v for k, v in self.statuses.items() if k >= 500 and k != 503),
            "busy": self.statuses.get(503, 0),
            "busy_without_retry_after": self.busy_without_retry_after,
        }


class Client:
    def __init__(self, base: str, token: str, tally: Tally, name: str) -> None:
        url = urlsplit(base)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.tally, self.name = tally, name
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One operation: retried on ``503 busy`` after its Retry-After."""
        data = None if body is None else json.dumps(body).encode()
        for _ in range(RETRIES):
            try:
                self.conn.request(method, path, body=data, headers=self.headers)
                response = self.conn.getresponse()
                raw = response.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                with self.tally.lock:
                    self.tally.statuses[0] += 1  # a dropped connection: a failure too
                continue
            with self.tally.lock:
                self.tally.statuses[response.status] += 1
            if response.status != 503:
                return response.status, json.loads(raw) if raw else None
            retry_after = response.getheader("Retry-After")
            if retry_after is None:
                with self.tally.lock:
                    self.tally.busy_without_retry_after += 1
            time.sleep(float(retry_after or 1))
        return 503, None

    def run(self, until: float) -> None:
        n = 0
        while time.monotonic() < until:
            n += 1
            steps = [("POST", "/api/board/tasks", {"title": f"{self.name}-{n}"})]
            status, created = self.call(*steps[0])
            ok = status == 201
            if ok:
                task = created["id"]
                for method, path, body in (
                    ("GET", "/api/board/tasks?limit=20", None),
                    ("POST", f"/api/board/tasks/{task}/comments", {"body": f"note {n}"}),
                    ("GET", f"/api/board/tasks/{task}", None),
                ):
                    status, _ = self.call(method, path, body)
                    ok = ok and status in (200, 201)
            with self.tally.lock:
                self.tally.operations += 1
                self.tally.failed_operations += 0 if ok else 1
        self.conn.close()


def run_clients(base: str, token: str, clients: int, seconds: float) -> dict[str, Any]:
    tally = Tally()
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=Client(base, token, tally, f"c{i}").run, args=(until,))
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"clients": clients, "seconds": seconds, **tally.as_dict()}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from bench.server import Server

    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    server = Server("memory")
    try:
        result = run_clients(server.base, server.token, args.clients, args.seconds)
    finally:
        server.stop()
    out = ROOT / "bench" / "results" / "sqlite_clients.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
