"""The board shows a task's pull request: the card's badge says its checks are
running, the review panel links it and lists its checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import registry
from executor.runner import Executor
from tests.forges.conftest import Setup
from tests.live.browsing import CHROMIUM, log_in, screenshot
from worktrees import pull_requests

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


@pytest.mark.parametrize("forge_repo", ["github"], indirect=True)
def test_the_card_and_the_review_panel_show_the_pull_request_and_its_checks(
    forge_repo: Setup, daphne, settings, tmp_path, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    task = store.create_task(title="Add the feature", repository="app").task
    Executor("builder").work_once()
    forge_repo.forge.set_check(forge_repo.forge.head_of(1), "ci", "pending")
    pull_requests.refresh(task.id)
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    card = page.locator(f"[data-status=in_review] [data-task-id='{task.id}']")
    badge = card.locator(".badge.pull-request")
    badge.wait_for(timeout=10_000)
    assert badge.inner_text() == "PR #1 · checks running"
    assert badge.get_attribute("href").endswith("/pull/1")
    card.locator(".title, h4, strong").first.click()
    panel = page.locator(f"#detail [data-review-for='{task.id}']")
    panel.wait_for(timeout=10_000)
    section = panel.locator("p.pull-request")
    assert "#1" in section.inner_text() and "checks running" in section.inner_text()
    assert panel.locator("ul.checks li").inner_text().startswith("ci")
    screenshot(page, "pull-request.png", tmp_path)
