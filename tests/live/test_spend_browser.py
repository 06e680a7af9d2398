"""The board shows a team's spend against its budgets and a task's own and tree cost,
in a real browser, and a paused cap live as it happens."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.store import spend
from core import registry
from tests.live.browsing import CHROMIUM, log_in

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
