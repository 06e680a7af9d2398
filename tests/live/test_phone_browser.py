"""The board on a phone (390x844), a tablet (768x1024) and a laptop (1440x900), in a real
browser, measured: New task's Create and the editor's Save stay in view while the fields
scroll, the filters read whole, a tool call's Allow and Deny stay under what they answer,
and long titles, labels and toasts (200 characters with no space, right-to-left text,
emoji) wrap or end in "…" instead of pushing a card, a dialog or the page sideways.

``CLAWBOO_SCREENSHOTS=DIR`` writes the pictures there (see ``browsing.screenshot``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
from tests.live.test_board_browser import PHONE, WIDE, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator
TABLET = {"width": 768, "height": 1024}
SMALL_PHONE = {"width": 375, "height": 667}
SIZES = [SMALL_PHONE, PHONE, TABLET, WIDE]

# Whole inside the window and the topmost thing at its centre: a person can see and press it.
IN_REACH_JS = """e => {
  const r = e.getBoundingClientRect();
  const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2);
  return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth
    && (hit === e || e.contains(hit));
}"""
# Nothing in the box reaches past its right edge (the page's own box: no sideways scroll).
FITS_JS = "e => e.scrollWidth <= e.clientWidth"
PAGE_FITS_JS = "() => document.scrollingElement.scrollWidth <= innerWidth"

LONG = "B" * 200
RTL = "שלום עולם " * 8 + "مرحبا بالعالم"
EMOJI = "🚀" * 80 + "👩‍👩‍👧‍👦" * 20


def show_todo(page) -> None:
    """A phone shows one column: pick Todo (elsewhere every column shows)."""
    tab = page.locator("#column-tabs [data-tab=todo]")
    if tab.is_visible():
        tab.click()


def in_reach(locator) -> bool:
    return bool(locator.evaluate(IN_REACH_JS))


def test_new_tasks_create_button_stays_in_reach_while_its_fields_scroll(
    daphne, operator, tmp_path, browser
):
    base = daphne()
    for viewport in SIZES:
        page = open_board(browser, base, viewport)
        page.click("#new-task-btn")
        dialog = page.locator("#new-task[open]")
        dialog.wait_for()
        # A 375x667 phone has the fields scroll; Create was below them, out of sight.
        assert in_reach(page.locator("#create-task")), viewport
        assert in_reach(page.locator("#new-task button[value=cancel]")), viewport
        assert dialog.evaluate(FITS_JS), viewport
        screenshot(page, f"board-new-task-{viewport['width']}.png", tmp_path)
        page.close()


def test_the_editors_save_stays_in_reach_while_the_task_panel_scrolls(
    daphne, operator, tmp_path, browser
):
    task = store.create_task(title="Fix login", description="It says 500.").task
    base = daphne()
    for viewport in (PHONE, TABLET, WIDE):
        page = open_board(browser, base, viewport)
        show_todo(page)
        page.locator(f"[data-task-id='{task.id}']").click()
        page.click("#edit-task")
        page.locator("#edit-form").wait_for()
        # The form is taller than the panel: Save was at its end, under the fold.
        assert in_reach(page.locator("#edit-save")), viewport
        assert in_reach(page.locator("#edit-cancel")), viewport
        screenshot(page, f"board-edit-{viewport['width']}.png", tmp_path)
        page.close()


def test_the_filters_read_whole_on_a_phone(daphne, operator, tmp_path, browser):
    base = daphne()
    page = open_board(browser, base, PHONE)
    # The room each menu has for its words (its box less padding and the arrow) holds
    # each of its choices: three to a row cut "Any verification" to "Any verificati".
    short = page.evaluate(
        """() => {
          const ctx = document.createElement('canvas').getContext('2d');
          const out = [];
          for (const menu of document.querySelectorAll('#filters select')) {
            if (!menu.offsetParent) continue;  // a menu not shown (no routines yet)
            const s = getComputedStyle(menu);
            ctx.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
            const pad = parseFloat(s.paddingLeft) + parseFloat(s.paddingRight);
            const room = menu.clientWidth - pad - 20;
            for (const o of menu.options) {
              if (ctx.measureText(o.text).width > room) out.push(o.text);
            }
          }
          return out;
        }"""
    )
    assert short == []
    for control in page.locator("#filters input:visible, #filters select:visible").all():
        assert in_reach(control)
    screenshot(page, "board-filters-phone.png", tmp_path)


def test_a_tool_calls_allow_and_deny_stay_under_a_long_command(daphne, operator, tmp_path, browser):
    task = store.create_task(title="Migrate the data").task
    script = "psql <<'SQL'\n" + "update rows set done = true where id in (1, 2, 3);\n" * 40 + "SQL"
    asked = store.ask_tool_call(task.id, "builder", "Bash", {"command": script})
    assert asked is not None
    base = daphne()
    for viewport in (PHONE, TABLET, WIDE):
        page = open_board(browser, base, viewport)
        show_todo(page)
        ask = page.locator(f"[data-tool-approval='{asked.id}']")
        ask.wait_for(timeout=10_000)
        # The 2000-character command pushed the buttons a screen or more down.
        for decision in ("allow_once", "allow_always", "deny"):
            button = ask.locator(f"[data-tool-decision={decision}]")
            assert in_reach(button), (viewport, decision)
        screenshot(page, f"board-tool-ask-{viewport['width']}.png", tmp_path)
        page.close()


def test_long_unicode_titles_and_labels_stay_inside_their_card_panel_and_page(
    daphne, operator, tmp_path, browser
):
    tasks = [
        store.create_task(title=LONG, labels=["L" * 64]).task,
        store.create_task(title=RTL, route={"agent": "builder", "labels": ["g" * 60]}).task,
        store.create_task(title=EMOJI).task,
    ]
    base = daphne()
    for viewport in (PHONE, TABLET, WIDE):
        page = open_board(browser, base, viewport)
        show_todo(page)
        for task in tasks:
            page.locator(f"[data-task-id='{task.id}']").wait_for(timeout=10_000)
        # A 64-character label's pill made the phone's page 582 px wide.
        assert page.evaluate(PAGE_FITS_JS), viewport
        for card in page.locator(".column[data-status=todo] .card").all():
            assert card.evaluate(FITS_JS), (viewport, card.get_attribute("data-task-id"))
        screenshot(page, f"board-long-titles-{viewport['width']}.png", tmp_path)
        for task in tasks:
            page.locator(f"[data-task-id='{task.id}']").click()
            page.wait_for_function(
                "id => document.querySelector('#detail-title') && "
                "document.querySelector('.card.selected')?.dataset.taskId === id",
                arg=task.id,
            )
            assert page.locator("#detail").evaluate(FITS_JS), (viewport, task.title[:10])
            assert page.evaluate(PAGE_FITS_JS), viewport
            page.locator("#detail .close").click()
        page.close()


def test_a_question_and_a_toast_about_a_long_title_wrap_inside_the_window(
    daphne, operator, tmp_path, browser
):
    waiting = store.create_task(title=LONG, created_by_agent_id="planner").task
    base = daphne()
    page = open_board(browser, base, PHONE)
    card = page.locator(f"[data-task-id='{waiting.id}']")
    page.locator("#column-tabs [data-tab=needs_approval]").click()
    card.locator("[data-approval=deny]").click()
    dialog = page.locator("#ask[open]")
    dialog.wait_for()
    # 'Deny "BBBB…"?' ran out of the dialog, which scrolled sideways.
    assert dialog.evaluate(FITS_JS)
    assert in_reach(page.locator("#ask-ok"))
    screenshot(page, "board-ask-long-title.png", tmp_path)
    page.click("#ask-cancel")

    # Created with the filters on: the toast names the title, and wraps it.
    page.fill("#filter-q", "nothing matches this")
    page.click("#new-task-btn")
    page.fill("#new-task input[name=title]", "C" * 200)
    page.click("#create-task")
    toast = page.locator(".toast[data-kind=ok]", has_text="the filters hide it")
    toast.wait_for(timeout=10_000)
    assert toast.locator("p").evaluate(FITS_JS)
    assert in_reach(toast.locator("button"))
    assert page.evaluate(PAGE_FITS_JS)
    screenshot(page, "board-toast-long-title.png", tmp_path)
