"""What a new user tripped on in the browser (newuser8): a card's error badge ran past
the card's right edge, over the next column, at 1440 px; a negative priority's badge
broke in two beside an open task."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, launch, screenshot
from tests.live.test_board_browser import WIDE, card_in, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator

# Every badge of a card whose right edge is past the card's (a fraction of a pixel of
# rounding allowed).
OVERFLOWING_JS = """card => {
  const right = card.getBoundingClientRect().right + 0.5;
  return [...card.querySelectorAll('.badge, .pill')]
    .filter(b => b.getBoundingClientRect().right > right)
    .map(b => b.textContent);
}"""


def test_a_cards_error_badge_stays_inside_the_card(daphne, operator, tmp_path):
    """A remote worker's failure reads "remote worker: RuntimeError: repository …": its
    badge (the first 27 characters) was wider than a 1440 px board's card and ran over
    the next column. It ends in "…" inside the card; its title says it whole."""
    error = "remote worker: RuntimeError: repository 'shop' has no remote to clone"
    failing = store.create_task(title="remote job", max_attempts=3, file_mutating=False).task
    claimed = store.claim(failing.id, "builder")
    assert claimed.outcome == "ok"
    store.fail(failing.id, error, ticket=claimed.ticket)
    base = daphne()
    with playwright_api.sync_playwright() as p:
        browser = launch(p)
        page = open_board(browser, base, WIDE)
        card = card_in(page, "todo", failing.id)
        card.wait_for(timeout=10_000)
        assert card.locator(".error").get_attribute("title") == error
        screenshot(page, "board-card-error.png", tmp_path)
        assert card.evaluate(OVERFLOWING_JS) == []
        browser.close()


def test_a_negative_prioritys_badge_stays_on_one_line_beside_an_open_task(
    daphne, operator, tmp_path
):
    """With a task open the columns narrow, and a card's "P-5" broke into "P-" over
    "5"."""
    low = store.create_task(title="x", priority=-5, status="backlog").task
    other = store.create_task(title="Open me").task
    base = daphne()
    with playwright_api.sync_playwright() as p:
        browser = launch(p)
        page = open_board(browser, base, WIDE)
        card_in(page, "todo", other.id).click()
        page.locator("#detail").wait_for(timeout=5_000)
        prio = card_in(page, "backlog", low.id).locator(".prio")
        assert prio.inner_text() == "P-5"
        screenshot(page, "board-negative-priority.png", tmp_path)
        box = prio.bounding_box()
        assert box is not None and box["height"] < 20, box
        browser.close()
