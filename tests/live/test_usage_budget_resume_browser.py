"""The Usage page's budget table, in a real browser: a paused cap offers the board
chip's Resume (grace optional) to staff with the budget permission, and "Who
resumes?" to a member; it read "paused" and nothing more."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.store import spend
from core import registry
from tests.live.browsing import CHROMIUM, log_in, screenshot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def spend_on(task_id: str, cents: int) -> None:
    claimed = store.claim(task_id, "ada", "command")
    run = store.open_execution(task_id, claimed.ticket)
    store.close_execution(run.id, "failed", tokens_in=1000, cost_cents=cents)
    store.release(task_id, ticket=claimed.ticket)


def test_the_usage_pages_paused_budget_resumes_for_staff_and_says_who_may_to_a_member(
    daphne, settings, monkeypatch, browser, tmp_path
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    users = get_user_model().objects
    op = users.create_superuser("op", "op@example.com", "pw-op-123")
    bob = users.create_user("bob", password="pw-bob-123")
    for user in (op, bob):
        registry.add_member("default", user)
    cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    budget = spend.create_budget("default", {**cap, "limit_cents": 10})
    spend_on(store.create_task(title="Costly").task.id, 12)
    base = daphne()

    member = browser.new_page(viewport={"width": 1400, "height": 900})
    member.goto(base + "/board/login/?next=/board/usage/")
    member.fill("input[name=username]", "bob")
    member.fill("input[name=password]", "pw-bob-123")
    member.click("#login")
    member.wait_for_url(base + "/board/usage/")
    row = member.locator(f"#usage-budgets tr[data-budget='{budget.pk}']")
    row.locator("[data-action=who-resumes]").wait_for(timeout=10_000)
    assert row.locator("[data-action=resume-budget]").count() == 0
    row.locator("[data-action=who-resumes]").click()
    who = member.locator("#ask .budget-who")
    who.wait_for(timeout=5_000)
    assert "Only staff" in who.inner_text()
    assert member.locator("#ask-ok").is_hidden()
    member.locator("#ask-cancel").click()
    # On a phone the table's button is on screen too.
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    phone.context.add_cookies(member.context.cookies())
    phone.goto(base + "/board/usage/")
    button = phone.locator(
        f"#usage-budgets tr[data-budget='{budget.pk}'] [data-action=who-resumes]"
    )
    button.wait_for(timeout=10_000)
    box = button.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390, box
    screenshot(phone, "usage-budget-phone.png", tmp_path)

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    log_in(page, base, "op", "pw-op-123", next_path="/board/usage/?team=default")
    row = page.locator(f"#usage-budgets tr[data-budget='{budget.pk}']")
    assert row.get_attribute("data-status") == "paused"
    row.locator("[data-action=resume-budget]").click()
    assert "team default · day" in page.locator("#ask-title").inner_text()
    page.fill("#budget-grace", "0")
    page.click("#ask-ok")
    # No grace of 0: the dialog stays open (the field's own check), nothing is sent.
    assert page.locator("#ask[open]").count() == 1
    page.fill("#budget-grace", "25")
    screenshot(page, "usage-budget-resume.png", tmp_path)
    page.click("#ask-ok")
    # The row says what the server answered: no longer paused, its Resume gone.
    page.locator(f"#usage-budgets tr[data-budget='{budget.pk}'][data-status=soft_capped]").wait_for(
        timeout=10_000
    )
    assert row.locator("[data-action=resume-budget]").count() == 0
    assert (
        "Resumed the team default · day budget with 25¢ grace."
        in page.locator("#toasts").inner_text()
    )
    budget.refresh_from_db()
    assert (budget.paused_until, budget.pause_at_cents, budget.grace_cents) == (None, 37, 25)
