"""The operator console's new columns in a real Chromium: the runs list and the tool
approvals list fit a 1440-pixel screen beside their filters, long errors and tool
calls cut short in the row."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import registry
from tests.live.browsing import log_in

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]

FITS = """() => {
    const results = document.querySelector('#changelist .results');
    const table = document.querySelector('#result_list');
    return {
        scroll: results.scrollWidth, client: results.clientWidth,
        right: table.getBoundingClientRect().right, viewport: window.innerWidth,
    };
}"""


def test_the_runs_and_tool_approvals_lists_fit_a_1440_pixel_screen(
    daphne, tmp_path, settings, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.ensure_team("acme", "Acme and Partners")
    registry.create_agent(
        id="shell-bot-with-a-long-name",
        display_name="Shell bot",
        team="acme",
        runtime="command",
        settings={},
        max_concurrent=3,
    )
    for n in range(3):
        task = store.create_task(
            id=f"importer-{n}",
            team="acme",
            title=f"Make the importer resumable after a crash, part {n}",
        ).task
        run = store.open_execution(
            task.id, store.claim(task.id, "shell-bot-with-a-long-name").ticket
        )
        store.close_execution(
            run.id,
            "failed",
            error_class="environment",
            error="exited with code 3: Traceback (most recent call last): " + "x" * 400,
        )
        store.ask_tool_call(
            task.id,
            "shell-bot-with-a-long-name",
            "Bash",
            {"command": "rsync -av --delete /srv/imports/ backup:/srv/imports/ " + "y" * 300},
        )
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    log_in(page, base, "op", "pw-op-123", "/admin/board/executionprocess/")
    for url in ("/admin/board/executionprocess/", "/admin/board/toolapproval/"):
        page.goto(base + url)
        assert page.locator("#result_list tbody tr").count() == 3
        fits = page.evaluate(FITS)
        page.screenshot(path=str(tmp_path / (url.strip("/").replace("/", "-") + ".png")))
        assert fits["scroll"] <= fits["client"], (url, fits)
        assert fits["right"] <= fits["viewport"], (url, fits)
