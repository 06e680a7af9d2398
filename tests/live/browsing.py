"""What the browser tests share: the Debian Chromium, a login, the API over HTTP,
polling the database, and screenshots that land in ``docs/`` only when asked."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parents[2] / "docs"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)


def screenshot(page: Any, name: str, tmp_path: Path, **options: Any) -> Path:
    """Save a screenshot: into ``docs/`` when ``CLAWBOO_SCREENSHOTS=1`` (to refresh
    the pictures there), into the directory ``CLAWBOO_SCREENSHOTS`` names otherwise
    (``docs/img`` for the docs site), else into the test's tmp dir, so a test run
    leaves the tree as it found it."""
    wanted = os.environ.get("CLAWBOO_SCREENSHOTS", "")
    folder = DOCS if wanted == "1" else Path(wanted).resolve() if wanted else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), **options)
    return path


def log_in(page: Any, base: str, username: str, password: str, next_path: str = "/board/") -> None:
    page.goto(f"{base}/admin/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(base + next_path)


def api_post(base: str, key: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def eventually(check: Callable[[], bool], what: str, deadline_s: float = 5) -> None:
    """Poll ``check`` until it holds (the server writes in another process)."""
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
