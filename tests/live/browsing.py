"""What the browser tests share: the Debian Chromium (one per test module, a fresh
context per page), a login, the API over HTTP, polling the database, and screenshots
that land in ``docs/`` only when asked.

Registered in ``tests/conftest.py``'s ``pytest_plugins``, so a test anywhere asks for
``browser`` by name."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "img"
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


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One Playwright driver and one Chromium for a whole test module: starting them
    costs about a CPU-second, a page in a new context a few milliseconds.

    While Playwright is started its sync API keeps an event loop in this thread, and
    Django refuses ORM calls beside a running loop, including pytest-django's flush
    when a transactional test ends (after that test's monkeypatch is undone). So the
    module's tests may use the ORM for as long as this browser lives, and no longer:
    the variable is set before Playwright starts and removed once it has stopped, and
    the next module runs with neither. (The test servers drop it from their own
    environment: they keep Django's guard.)"""
    from playwright.sync_api import sync_playwright

    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = launch(playwright)
            yield browser
            browser.close()
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


@pytest.fixture
def browser(chromium: Any) -> Iterator[Any]:
    """The module's Chromium, for one test. ``browser.new_page(viewport=...)`` opens
    each page in a context of its own (so no cookie or storage is shared between
    pages, let alone tests); whatever context the test leaves open is closed when
    it ends. A test never closes the browser itself."""
    yield chromium
    for context in list(chromium.contexts):
        context.close()


def screenshot(page: Any, name: str, tmp_path: Path, **options: Any) -> Path:
    """Save a screenshot: into ``docs/img/`` (the docs site's pictures) when
    ``CLAWBOO_SCREENSHOTS=1``, into the directory ``CLAWBOO_SCREENSHOTS`` names otherwise,
    else into the test's tmp dir, so a test run
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
