"""What a new user tripped on in the browser (newuser8): a card's error badge ran past
the card's right edge, over the next column, at 1440 px; a negative priority's badge
broke in two beside an open task."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
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


def test_a_cards_error_badge_stays_inside_the_card(daphne, operator, tmp_path, browser):
    """A remote worker's failure reads "remote worker: RuntimeError: repository …": its
    badge (the first 27 characters) was wider than a 1440 px board's card and ran over
    the next column. It ends in "…" inside the card; its title says it whole."""
    error = "remote worker: RuntimeError: repository 'shop' has no remote to clone"
    failing = store.create_task(title="remote job", max_attempts=3, file_mutating=False).task
    claimed = store.claim(failing.id, "builder")
    assert claimed.outcome == "ok"
    store.fail(failing.id, error, ticket=claimed.ticket)
    base = daphne()
    page = open_board(browser, base, WIDE)
    card = card_in(page, "todo", failing.id)
    card.wait_for(timeout=10_000)
    assert card.locator(".error").get_attribute("title") == error
    screenshot(page, "board-card-error.png", tmp_path)
    assert card.evaluate(OVERFLOWING_JS) == []


def test_a_negative_prioritys_badge_stays_on_one_line_beside_an_open_task(
    daphne, operator, tmp_path, browser
):
    """With a task open the columns narrow, and a card's "P-5" broke into "P-" over
    "5"."""
    low = store.create_task(title="x", priority=-5, status="backlog").task
    other = store.create_task(title="Open me").task
    base = daphne()
    page = open_board(browser, base, WIDE)
    card_in(page, "todo", other.id).click()
    page.locator("#detail").wait_for(timeout=5_000)
    prio = card_in(page, "backlog", low.id).locator(".prio")
    assert prio.inner_text() == "P-5"
    screenshot(page, "board-negative-priority.png", tmp_path)
    box = prio.bounding_box()
    assert box is not None and box["height"] < 20, box


def test_approving_a_task_that_names_no_repository_says_its_queue(
    daphne, operator, repo, tmp_path, monkeypatch, browser
):
    """A task filed with no repository (`clawboo task create` on the demo team) works in
    its agent's default one, the demo's queued shop: the approve dialog said "Approving
    lands the task's change … and moves it to Done", and the task stayed in review,
    queued. Its worktree's repository is the one that says it."""
    from core import repositories
    from tests.worktrees.queue_fixtures import GATE, Harness
    from worktrees import queue

    log = tmp_path / "gates.log"
    command = GATE.format(pause="0", log=log)
    repositories.register(
        team="default", path=str(repo), id="shop", landing_mode="queue", verify_cmd=command
    )
    monkeypatch.setattr(queue, "kick", lambda repo_path: None)  # nothing lands here
    task_id = Harness(repo, log, command).in_review("Add power()", {"calc.py": "pass\n"})
    assert store.get_task(task_id).as_dict()["repository"] is None
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.wait_for_selector("#merge-queue:not([hidden]) .mq", timeout=10_000)
    card_in(page, "in_review", task_id).click()
    page.locator("#approve-btn", has_text="Approve and queue…").wait_for(timeout=10_000)
    page.click("#approve-btn")
    what = page.locator("dialog[open] #approve-what")
    what.wait_for(timeout=5_000)
    screenshot(page, "board-approve-queued-default-repository.png", tmp_path)
    assert what.inner_text().startswith("Approving puts it in"), what.inner_text()
    assert page.locator("#ask-ok").inner_text() == "Approve and queue"
