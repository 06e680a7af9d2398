"""A real daphne server for the HTTP and websocket benches: a migrated temp state
dir (SQLite), an API token, and the server process."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench.benchdb import migrate

ROOT = Path(__file__).resolve().parent.parent
REDIS_URL = os.environ.get("CLAWBOO_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_answers() -> bool:
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping()
        return True
    except Exception:
        return False


METRICS_TOKEN = secrets.token_hex(16)


class Server:
    """A migrated state dir, a token, and a daphne process serving it."""

    def __init__(self, layer: str, *, database_url: str | None = None, root: Path = ROOT) -> None:
        """``database_url``: a migrated-here database (default: SQLite in the state
        dir); ``root``: the checkout whose code serves (another branch's, for a
        baseline in the same run)."""
        self.state = Path(tempfile.mkdtemp(prefix="clawboo-fanout-"))
        self.root = root
        self.env = {
            **os.environ,
            "CLAWBOO_STATE_DIR": str(self.state),
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "PYTHONPATH": str(root),
            "CLAWBOO_HTTP_RATE_LIMIT": "0",
            # /healthz names its database pool only to staff or this token's bearer.
            "CLAWBOO_METRICS_TOKEN": METRICS_TOKEN,
        }
        self.env.pop("DATABASE_URL", None)
        if database_url:
            self.env["DATABASE_URL"] = database_url
        if layer == "redis":
            self.env["CLAWBOO_REDIS_URL"] = REDIS_URL
        else:
            self.env.pop("CLAWBOO_REDIS_URL", None)
        manage = [sys.executable, str(root / "manage.py")]
        default_db = None if database_url else self.state / "clawboo.sqlite3"
        migrate(self.env, default_db, root)
        out = subprocess.run(
            [*manage, "create_agent_token", "bench", "--team", "default"],
            env=self.env,
            check=True,
            cwd=root,
            capture_output=True,
            text=True,
        )
        self.token = out.stdout.strip()
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "clawboo.asgi:application",
            ],
            env=self.env,
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 120  # a loaded machine starts it slowly
        while True:
            try:
                urllib.request.urlopen(self.base + "/api/schema/", timeout=1)  # noqa: S310
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("daphne did not start") from None
                time.sleep(0.1)

    def create_task(self, title: str) -> None:
        request = urllib.request.Request(
            self.base + "/api/board/tasks",
            data=json.dumps({"title": title}).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
            method="POST",
        )
        urllib.request.urlopen(request, timeout=30).read()  # noqa: S310 - loopback

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.state, ignore_errors=True)
