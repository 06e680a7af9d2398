"""What the tenth new user's hour found on the board, in a real browser: with a side
panel open (Agents, Chat, a task's detail) the columns narrow to their least width,
and the "In progress" header read "IN PROGRE…" at 1280 and 1440 px.

``CLAWBOO_SCREENSHOTS=DIR`` writes the pictures there (see ``browsing.screenshot``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
from tests.live.test_board_browser import WIDE, open_board
from tests.live.test_newuser5_browser import HEADERS_JS, LAPTOP

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator


@pytest.mark.parametrize("viewport", [LAPTOP, WIDE], ids=["1280", "1440"])
def test_column_headers_read_whole_beside_an_open_side_panel(
    daphne, operator, tmp_path, viewport, browser
):
    base = daphne()
    page = open_board(browser, base, viewport)
    page.click("#agents-toggle")
    page.wait_for_selector("#agents-panel:visible", timeout=10_000)
    headers = page.evaluate(HEADERS_JS)
    screenshot(page, f"board-side-{viewport['width']}.png", tmp_path)
    assert ["In Progress", True] in headers, headers
    assert all(whole for _, whole in headers), headers
