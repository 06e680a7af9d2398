"""What the fifth new user's hour found on the board, in a real browser: at 1280 px
the "In progress" header wrapped onto two lines and the keyboard hint took a row of
its own (at 1440 px too once the Routine filter shows); the Routine filter named two
routines of one title alike; a remote host's comments and chat lines read
"machine-<hash>".

``CLAWBOO_SCREENSHOTS=DIR`` writes the pictures there (see ``browsing.screenshot``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from routines import store as routines_store
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
from tests.live.test_board_browser import WIDE, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator
LAPTOP = {"width": 1280, "height": 800}

# Each visible column header's name, and whether it reads whole on one line (its
# height is the shortest name's, "Done" never wraps, and nothing of it is cut off).
HEADERS_JS = """() => {
  const names = [...document.querySelectorAll('.column:not([hidden]) h2 .name')];
  const least = Math.min(...names.map((n) => n.getBoundingClientRect().height));
  return names.map((n) => [n.textContent,
    n.getBoundingClientRect().height <= least + 1 && n.scrollWidth <= n.clientWidth]);
}"""
# The toolbar is one row: every shown filter and the hint start above the search
# box's bottom edge (the hint had a row of its own, or pushed the filters to one).
HINT_JS = """() => {
  const bottom = document.querySelector('#filter-q').getBoundingClientRect().bottom;
  const shown = [...document.querySelectorAll('#filters > :not([hidden]), .toolbar .keys')];
  const below = shown.filter((e) => e.getBoundingClientRect().top >= bottom);
  return below.map((e) => e.id || e.className);
}"""


def routine(title: str, cron: str):
    return routines_store.create_routine(
        agent_id="builder", team="default", cron_spec=cron, task_template={"title": title}
    )


@pytest.mark.parametrize(("viewport", "routines"), [(LAPTOP, False), (LAPTOP, True), (WIDE, True)])
def test_column_headers_are_one_line_and_the_hint_shares_the_filters_row(
    daphne, operator, tmp_path, viewport, routines, browser
):
    if routines:
        routine("Sweep the stale branches of every repository", "0 9 * * 1-5")
    base = daphne()
    page = open_board(browser, base, viewport)
    if routines:
        page.wait_for_selector("#filter-routine:not([hidden])", timeout=10_000)
    headers = page.evaluate(HEADERS_JS)
    screenshot(page, f"board-{viewport['width']}-{routines}.png", tmp_path)
    assert all(one_line for _, one_line in headers), headers
    assert page.evaluate(HINT_JS) == [], "the toolbar took a second row"


def test_two_routines_of_one_title_tell_apart_in_the_routine_filter(
    daphne, operator, tmp_path, browser
):
    daily = routine("Tidy the notes", "0 9 * * *")
    hourly = routine("Tidy the notes", "0 * * * *")
    twin = routine("Tidy the notes", "0 * * * *")
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.wait_for_selector("#filter-routine:not([hidden])", timeout=10_000)
    options = dict(
        page.locator("#filter-routine option").evaluate_all(
            "os => os.map((o) => [o.value, o.textContent])"
        )
    )
    # All three read "Tidy the notes".
    assert options[daily.id].startswith("Tidy the notes · 0 9 * * *"), options
    assert options[hourly.id].startswith("Tidy the notes · 0 * * * *"), options
    assert len(set(options.values())) == len(options), options
    assert hourly.id[:6] in options[hourly.id] and twin.id[:6] in options[twin.id]


def test_a_hosts_comment_and_chat_line_read_as_its_host_on_the_board(
    daphne, operator, tmp_path, browser
):
    # Both were signed, and shown, as "machine-<16 hex digits>".
    from board import store
    from core import chat, machines

    token, _ = machines.mint("laptop", ["builder"])
    signed = token.user.username
    task = store.create_task(title="Ship it").task
    store.add_comment(task.id, "on it", signed)
    chat.post("default", "hello from the host", author=signed)
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.locator(f"[data-task-id='{task.id}']").click()
    head = page.locator("#comments li .comment-head strong")
    head.wait_for(timeout=10_000)
    assert head.inner_text() == "laptop (host)" and head.get_attribute("title") == signed
    page.click("#chat-toggle")
    line = page.locator("#chat li", has_text="hello from the host")
    line.wait_for(timeout=10_000)
    assert line.locator(".actor").inner_text().strip() == "laptop (host):"
    assert line.locator(".avatar").get_attribute("title") == "laptop (host)"
    assert signed not in line.inner_text()
    screenshot(page, "board-host-author.png", tmp_path)


# With a side panel open (Agents, Chat, a task) the columns narrow to their least
# width: "In progress" read "IN PROGRE…" at 1280 and 1440 px.
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
