"""Real servers for the live tests: daphne processes on free ports over the test database."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_serving(url: str, proc: subprocess.Popen[bytes], deadline_s: float = 30) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback test server
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server at {url} did not answer in {deadline_s}s")


def redis_url() -> str | None:
    url = os.environ.get("CLAWBOO_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
    try:
        import redis

        redis.Redis.from_url(url, socket_timeout=1).ping()
    except Exception:
        return None
    return url


@pytest.fixture
def daphne(database_url: str, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Start a daphne process on the test database; returns its base URL."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(extra_env: dict[str, str] | None = None, port: int | None = None) -> str:
        port = port or free_port()
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
            "PYTHONPATH": str(ROOT),
            **(extra_env or {}),
        }
        log = open(tmp_path / f"daphne-{port}.log", "wb")  # noqa: SIM115 - closed with proc
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "clawboo.asgi:application",
            ],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base + "/api/schema/", proc)
        return base

    def kill_all() -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    start.kill_all = kill_all  # type: ignore[attr-defined]
    yield start
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    # daphne waits out its application close timeout (10 s) for a connection still
    # open, an MCP stream say; how it stops is not under test: a short grace, then kill.
    grace = time.monotonic() + 1
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, grace - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
