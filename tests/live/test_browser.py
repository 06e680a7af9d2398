"""The board page in a real browser (headless Chromium driven by Playwright)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from core import registry
from tests.live.browsing import CHROMIUM, DOCS, api_post, log_in, screenshot  # noqa: F401 - DOCS

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def test_the_board_updates_live_and_offers_only_legal_moves(
    daphne, tmp_path, settings, monkeypatch, browser
):
    # Playwright's sync API runs an event loop in this thread; the test's own ORM reads
    # are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # The server checks passwords with the product's hashers, not the tests' fast one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    key = Token.objects.create(user=user).key
    base = daphne()
    port = int(base.rsplit(":", 1)[1])
    page = browser.new_page(viewport={"width": 1400, "height": 800})
    log_in(page, base, "op", "pw-op-123")
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)

    # A task created through the API appears without a reload, within 2 s.
    task = api_post(
        base, key, "/api/board/tasks", {"title": "Fix login", "priority": 2, "labels": ["auth"]}
    )
    card = page.locator(f"[data-task-id='{task['id']}']")
    card.wait_for(timeout=2_000)
    assert card.locator("xpath=ancestor::div[@data-status]").get_attribute("data-status") == "todo"

    # The status menu offers the current status and the legal targets only.
    card.click()
    menu = page.locator("#detail select.status-menu")
    menu.wait_for()
    options = menu.locator("option").evaluate_all("os => os.map(o => o.value)")
    assert options == ["todo", "in_progress", "blocked", "backlog", "cancelled"]
    assert "done" not in options
    menu.select_option("blocked")
    deadline = time.monotonic() + 5
    while store.get_task(task["id"]).status != "blocked":
        assert time.monotonic() < deadline, "the move did not reach the API"
        time.sleep(0.05)
    page.locator(f"[data-status=blocked] [data-task-id='{task['id']}']").wait_for(timeout=2_000)

    # Kill the server under the open socket, change the board meanwhile, bring it
    # back: the page shows it is reconnecting, then catches up from the log.
    daphne.kill_all()
    page.wait_for_selector("#conn[data-state=reconnecting]", timeout=5_000)
    missed = store.create_task(title="Written while you were away").task
    daphne(port=port)
    page.locator(f"[data-task-id='{missed.id}']").wait_for(timeout=15_000)
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    assert page.locator("#chat li").count() >= 1

    screenshot(page, "board.png", tmp_path)
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    phone.context.add_cookies(page.context.cookies())
    phone.goto(base + "/board/")
    phone.locator(f"[data-task-id='{missed.id}']").wait_for(timeout=5_000)
    phone.screenshot(path=str(tmp_path / "board-phone-live.png"))


def test_a_non_staff_teammate_logs_in_to_the_board_and_watches_it(
    daphne, settings, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    bea = get_user_model().objects.create_user("bea", password="pw-bea-123")
    registry.add_member("default", bea)
    registry.create_team("red", "Red")
    hidden = store.create_task(title="Red team secret", team="red").task
    writer = get_user_model().objects.create_user("writer")
    registry.add_member("default", writer)
    key = Token.objects.create(user=writer).key
    base = daphne()
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    page.goto(base + "/board/")  # not logged in: the board's own login, not the admin's
    page.wait_for_url(lambda url: "/board/login/" in url)
    page.fill("input[name=username]", "bea")
    page.fill("input[name=password]", "pw-bea-123")
    page.click("#login")
    page.wait_for_url(base + "/board/")
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    teams = page.locator("select[name=team] option").evaluate_all("os => os.map(o => o.value)")
    assert teams == ["default"]
    assert page.locator("a[href='/admin/']").count() == 0
    task = api_post(base, key, "/api/board/tasks", {"title": "Watch me arrive"})
    page.locator(f"[data-task-id='{task['id']}']").wait_for(timeout=5_000)
    assert page.locator(f"[data-task-id='{hidden.id}']").count() == 0
    # The admin stays staff-only: it sends her to its own login.
    page.goto(base + "/admin/")
    assert "/admin/login/" in page.url
