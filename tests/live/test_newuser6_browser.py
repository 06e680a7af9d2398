"""What the sixth new user's hour found on the board, in a real browser: at 1280 px the
demo team's filters took two rows (its agent reads "Demo coder (demo-coder)" in the
assignee filter, and the routine filter and "Clear filters" wrapped under the search);
an assignee set by the URL read by its bare id in the filter; a routine's fire chip
named its routine by its id; an empty merge queue ("shop · 0 waiting to land") took two
lines' height, a blank band above the columns; approving a task of that queue said it
landed and moved to Done at once, where it is queued and stays in review.

``CLAWBOO_SCREENSHOTS=DIR`` writes the pictures there (see ``browsing.screenshot``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from core import registry, repositories
from routines import store as routines_store
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
from tests.live.test_board_browser import WIDE, open_board
from tests.live.test_newuser5_browser import HINT_JS, LAPTOP
from tests.worktrees.queue_fixtures import GATE, Harness
from worktrees import queue

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator

# The hint is shown whole inside the window, beside the filters.
HINT_SHOWN_JS = """() => {
  const r = document.querySelector('.toolbar .keys').getBoundingClientRect();
  return r.width > 0 && r.right <= window.innerWidth && r.left >= 0;
}"""


def routine(title: str, cron: str):
    return routines_store.create_routine(
        agent_id="builder", team="default", cron_spec=cron, task_template={"title": title}
    )


@pytest.mark.parametrize("viewport", [LAPTOP, WIDE])
def test_every_filter_and_clear_filters_share_one_row_with_the_hint_at_1280_px(
    daphne, operator, tmp_path, viewport, browser
):
    # As in `clawboo demo`: an agent with a display name, and a routine.
    registry.create_agent(
        id="demo-coder", display_name="Demo coder", team="default", runtime="human"
    )
    routine("Tidy the notes", "*/5 * * * *")
    base = daphne()
    # A filter set: "Clear filters" shows.
    page = open_board(browser, base, viewport, "/board/?assignee=demo-coder")
    page.wait_for_selector("#filter-routine:not([hidden])", timeout=10_000)
    page.wait_for_selector("#clear-filters:not([hidden])", timeout=10_000)
    # The filter set by the URL names its agent as the menu does (it read "demo-coder").
    page.wait_for_function(
        "() => document.querySelector('#filter-assignee').selectedOptions[0].textContent"
        " === 'Demo coder (demo-coder)'",
        timeout=10_000,
    )
    screenshot(page, f"board-filters-{viewport['width']}.png", tmp_path)
    # At 1280 px the routine filter and "Clear filters" had a row of their own.
    assert page.evaluate(HINT_JS) == [], "the toolbar took a second row"
    assert page.evaluate(HINT_SHOWN_JS), "the keyboard hint is cut off"


def test_a_routines_fire_chip_names_its_routine_not_its_id(daphne, operator, tmp_path, browser):
    tidy = routine("Tidy the notes", "0 9 * * *")
    fire = store.create_task(
        title="Tidy the notes",
        metadata={"routine_id": tidy.id, "slot_at": 1_796_584_800_000},
    ).task
    base = daphne()
    page = open_board(browser, base, WIDE)
    chip = page.locator(f"[data-task-id='{fire.id}'] .routine-fire")
    chip.wait_for(timeout=10_000)
    # It read "routine <16 hex digits>'s fire for …".
    page.wait_for_function(
        "id => (document.querySelector(`[data-task-id='${id}'] .routine-fire`).title || '')"
        ".includes('Tidy the notes')",
        arg=fire.id,
        timeout=10_000,
    )
    title = chip.get_attribute("title")
    assert title.startswith("routine “Tidy the notes · 0 9 * * * · "), title
    assert tidy.id not in title, title
    screenshot(page, "board-routine-fire-name.png", tmp_path)


def test_an_empty_merge_queue_is_one_line_high(daphne, operator, repo, tmp_path, browser):
    # As in `clawboo demo`, whose repository lands through a queue.
    repositories.register(team="default", path=str(repo), id="shop", landing_mode="queue")
    base = daphne()
    page = open_board(browser, base, LAPTOP)
    page.wait_for_selector("#merge-queue:not([hidden]) .mq", timeout=10_000)
    assert "shop · 0 waiting to land" in page.locator("#merge-queue").inner_text()
    box = page.locator("#merge-queue").bounding_box()
    line = page.locator("#merge-queue .mq p").bounding_box()
    screenshot(page, "board-merge-queue-empty.png", tmp_path)
    # The empty list of who waits took a line of its own: 50 px for a 19 px line.
    assert box["height"] <= line["height"] + 14, (box, line)


def test_approving_a_task_of_a_queued_repository_says_it_is_queued_not_landed(
    daphne, operator, repo, tmp_path, monkeypatch, browser
):
    log = tmp_path / "gates.log"
    command = GATE.format(pause="0", log=log)
    repositories.register(
        team="default", path=str(repo), id="shop", landing_mode="queue", verify_cmd=command
    )
    monkeypatch.setattr(queue, "kick", lambda repo_path: None)  # nothing lands here
    task_id = Harness(repo, log, command).in_review(
        "Add divide()", {"calc.py": "pass\n"}, repository="shop"
    )
    base = daphne()
    page = open_board(browser, base, LAPTOP)
    page.wait_for_selector("#merge-queue:not([hidden]) .mq", timeout=10_000)
    page.locator(f"[data-status=in_review] [data-task-id='{task_id}']").click()
    # The panel's button said "Approve and land…" too.
    page.locator("#approve-btn", has_text="Approve and queue…").wait_for(timeout=10_000)
    page.click("#approve-btn")
    what = page.locator("dialog[open] #approve-what")
    what.wait_for(timeout=5_000)
    screenshot(page, "board-approve-queued.png", tmp_path)
    # It said "Approving lands the task's change on its base branch and moves it to
    # Done." under "Approve and land"; the task stayed in review, queued.
    assert what.inner_text().startswith("Approving puts it in shop's merge queue"), (
        what.inner_text()
    )
    assert page.locator("#ask-ok").inner_text() == "Approve and queue"
