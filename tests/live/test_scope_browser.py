"""Scope on the board (issue 43), in a real browser: a ready task held back by
overlapping work says so on its card and in its detail, the wait clears live when
that work lands, and the New task form sets ``touches``."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import registry
from tests.live.browsing import CHROMIUM, log_in

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    # What the page shows is the API's answer, proven on both engines by tests/api.
    pytest.mark.backend_independent,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


@pytest.fixture
def person(settings, monkeypatch):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    return user


def test_a_card_held_back_by_overlapping_work_says_why_until_that_work_lands(
    daphne, person, browser
):
    busy = store.create_task(title="Rework the API", touches=["src/**"]).task
    assert store.claim(busy.id, "builder").ok
    held = store.create_task(title="Fix a typo in app.py", touches=["src/app.py"]).task
    free = store.create_task(title="Write the docs", touches=["docs/**"]).task
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    log_in(page, base, "op", "pw-op-123")
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    card = page.locator(f".column[data-status=todo] [data-task-id='{held.id}']")
    wait = card.locator(".pill.scope-wait")
    wait.wait_for(timeout=15_000)
    assert wait.text_content() == (
        f"waiting: touches src/app.py (it touches src/**) like task {busy.id!r} in progress"
    )
    other = page.locator(f".column[data-status=todo] [data-task-id='{free.id}']")
    assert other.locator(".pill.scope-wait").count() == 0
    card.click()
    page.locator("#detail-touches", has_text="src/app.py; waiting: touches").wait_for(
        timeout=15_000
    )
    # The work that held it lands: the card stops waiting, live.
    store.complete(busy.id)
    wait.wait_for(state="detached", timeout=15_000)
    page.locator("#detail-touches", has_text="src/app.py").wait_for()
    assert "waiting" not in page.locator("#detail-touches").text_content()
    # A new task says what it touches.
    page.click("#new-task-btn")
    page.fill("#new-task-form [name=title]", "Tidy the tests")
    page.fill("#new-task-touches", "tests/**, conftest.py")
    page.click("#create-task")
    page.locator(".card .title", has_text="Tidy the tests").wait_for(timeout=15_000)
    made = store.list_tasks().get(title="Tidy the tests")
    assert made.touches == ["tests/**", "conftest.py"]
