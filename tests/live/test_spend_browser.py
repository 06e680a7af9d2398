"""The board shows a team's spend against its budgets and a task's own and tree cost,
in a real browser, and a paused cap live as it happens; the board's chip and the Usage
page's table resume it for staff and say who may to a member."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.models import Budget
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


def test_the_board_shows_spend_against_budgets_and_tree_cost(
    daphne, settings, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    team_cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    spend.create_budget("default", {**team_cap, "limit_cents": 100})
    root = store.create_task(title="Parent").task
    child = store.create_task(title="Child", parent_task_id=root.id).task
    spend_on(root.id, 12)
    spend_on(child.id, 30)
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    strip = page.locator("#spend .budget")
    strip.wait_for(timeout=10_000)
    assert "42¢ / $1.00" in strip.inner_text()
    card = page.locator(f"[data-task-id='{root.id}'] .cost")
    assert "12¢ (tree 42¢)" in card.inner_text()
    # A run over the cap pauses the team: the strip turns to "paused" live.
    spend_on(store.create_task(title="Big").task.id, 60)
    page.locator("#spend .budget-paused").wait_for(timeout=10_000)


@pytest.fixture
def paused_cap(settings, monkeypatch) -> Budget:
    """Staff ``op`` and member ``bob`` of the default team, whose day cap of 10¢ a 12¢
    run has paused."""
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
    return budget


def test_a_paused_cap_offers_resume_to_staff_and_says_who_may_to_a_member(
    daphne, paused_cap, browser, tmp_path
):
    budget = paused_cap
    base = daphne()

    member = browser.new_page(viewport={"width": 1400, "height": 900})
    member.goto(base + "/board/login/?next=/board/")  # a member's login: the board's own
    member.fill("input[name=username]", "bob")
    member.fill("input[name=password]", "pw-bob-123")
    member.click("#login")
    member.wait_for_url(base + "/board/")
    paused = member.locator("#spend .budget-paused")
    paused.wait_for(timeout=10_000)
    assert paused.locator("[data-action=resume-budget]").count() == 0
    paused.locator("[data-action=who-resumes]").click()
    who = member.locator("#ask .budget-who")
    who.wait_for(timeout=5_000)
    assert "Only staff" in who.inner_text()
    assert member.locator("#ask-ok").is_hidden()
    screenshot(member, "budget-who-resumes.png", tmp_path)
    member.locator("#ask-cancel").click()
    # On a phone the chip and its button are on screen too.
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    phone.context.add_cookies(member.context.cookies())
    phone.goto(base + "/board/")
    button = phone.locator("#spend .budget-paused [data-action=who-resumes]")
    button.wait_for(timeout=10_000)
    box = button.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390, box
    screenshot(phone, "budget-phone.png", tmp_path)

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    log_in(page, base, "op", "pw-op-123")
    page.locator("#spend .budget-paused [data-action=resume-budget]").click()
    page.fill("#budget-grace", "25")
    screenshot(page, "budget-resume.png", tmp_path)
    page.click("#ask-ok")
    # Resumed with 25¢ past what it spent: no longer paused, on this board and bob's.
    page.locator("#spend .budget-soft_capped").wait_for(timeout=10_000)
    member.locator("#spend .budget-soft_capped").wait_for(timeout=10_000)
    budget.refresh_from_db()
    assert (budget.paused_until, budget.pause_at_cents, budget.grace_cents) == (None, 37, 25)


# The Usage page's budget table: it read "paused" and nothing more; it offers the
# board chip's Resume (grace optional) to staff and "Who resumes?" to a member.
def test_the_usage_pages_paused_budget_resumes_for_staff_and_says_who_may_to_a_member(
    daphne, paused_cap, browser, tmp_path
):
    budget = paused_cap
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
