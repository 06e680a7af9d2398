"""Reads go on when the disk is full: a real daphne whose SQLite database lives on a
tiny tmpfs, filled to the last byte after one write (needs root, to mount it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.servers import ROOT, free_port, wait_until_serving

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
        capture_output=True,
        timeout=30,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], timeout=30, check=False)


def fill(disk: Path) -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 1):  # big blocks, then whatever the block size left over
            while True:
                try:
                    os.write(fd, b"\0" * size)
                except OSError:
                    break
    finally:
        os.close(fd)


def call(base: str, token: str, path: str, body: object = None) -> tuple[int, object]:
    request = urllib.request.Request(  # noqa: S310 - loopback test server
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_reads_answer_200_on_a_full_disk(small_disk: Path) -> None:
    env = {
        **os.environ,
        "CLAWBOO_STATE_DIR": str(small_disk / "state"),
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "PYTHONPATH": str(ROOT),
        "CLAWBOO_HTTP_RATE_LIMIT": "0",
        "CLAWBOO_LOG_LEVEL": "CRITICAL",
    }
    env.pop("DATABASE_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, cwd=ROOT, check=True, timeout=120)
    token = subprocess.run(
        [*manage, "create_agent_token", "reader", "--team", "default"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    port = free_port()
    server = subprocess.Popen(
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
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(base + "/healthz", server)
        status, created = call(base, token, "/api/board/tasks", {"title": "before the disk filled"})
        assert status == 201, created
        task = created["id"]  # type: ignore[index]
        fill(small_disk)
        for path in (
            "/api/board/tasks",
            f"/api/board/tasks/{task}",
            "/api/board/columns",
            "/api/whoami",
            "/api/teams",
            "/api/routines",
            "/api/teams/default/events",
        ):
            status, body = call(base, token, path)
            assert status == 200, (path, body)
    finally:
        server.kill()
        server.wait(timeout=30)
