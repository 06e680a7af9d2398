"""What a new user tripped on in an hour on the board, fixed and shown in a real browser:
the header's budget pill reads (its text was the header's light ink on a light chip), and
the trace's summary says how long a run took in its own case and under a second ("OVER
0S" before); a total over runs with no price says "cost unknown", not 0¢, and so does
the task's cost line; two fires of
one routine tell apart; approving unverified work says nothing verified it; a long task
panel scrolls by itself, the columns staying in view; New task and Edit task show their
fields in one order; the editor's field hints read whole at 1280 px; a routine's "N in
review" on the routines page opens the board filtered to its fires; a routed card's pill
is dark on the dark board.

``CLAWBOO_SCREENSHOTS=DIR`` writes the pictures there (see ``browsing.screenshot``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from board import store
from board.store import spend
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, log_in, screenshot
from tests.live.test_board_browser import WIDE, open_board
from tests.live.test_board_findings_browser import CONTRAST_JS

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator


def test_the_budget_pill_in_the_header_reads(daphne, operator, tmp_path, browser):
    team_day = {"scope": "team", "scope_id": "default", "window": "day", "mode": "warn"}
    spend.create_budget("default", {**team_day, "limit_cents": 500})
    base = daphne()
    page = open_board(browser, base, WIDE)
    pill = page.locator("#spend .budget")
    pill.wait_for(timeout=10_000)
    assert pill.inner_text().startswith("day 0¢ / $5.00")
    colors = pill.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
    screenshot(
        page,
        "board-budget-pill.png",
        tmp_path,
        clip={"x": 0, "y": 0, "width": 900, "height": 48},
    )
    assert page.evaluate(CONTRAST_JS, colors) >= 4.5, colors


def test_a_short_unpriced_run_reads_in_milliseconds_and_cost_unknown_not_0s_and_0_cents(
    daphne, operator, tmp_path, browser
):
    task = store.create_task(title="Say hello").task
    claimed = store.claim(task.id, "builder", "command")
    run = store.open_execution(task.id, claimed.ticket)
    store.close_execution(run.id, "succeeded")
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.locator(f"[data-task-id='{task.id}']").click()
    summary = page.locator("#trace-summary")
    summary.wait_for(timeout=10_000)
    page.wait_for_function("() => document.querySelector('#trace-summary').textContent")
    # It read "1 RUN, 0 STEPS OVER 0S": upper case, and a run that took no time.
    assert re.fullmatch(r"1 run, 0 steps in \d+ ms", summary.inner_text()), summary.inner_text()
    # Its total said "0 tokens, 0¢" under a run saying "cost unknown".
    assert page.locator("#detail .runs-total").inner_text() == "total: 0 tokens, cost unknown"
    # And the task's cost line above said "0 tokens, 0¢" beside that total.
    page.wait_for_function(
        "() => document.querySelector('#detail-cost').textContent.includes('unknown')",
        timeout=10_000,
    )
    assert page.locator("#detail-cost").inner_text() == "0 tokens, cost unknown"
    screenshot(page, "board-trace-summary.png", tmp_path)


def test_two_fires_of_one_routine_tell_apart_on_their_cards(daphne, operator, tmp_path, browser):
    # Each fire is titled as its routine and its id differs only in the tail the card
    # cuts off: four identical "Say hello" cards in review.
    slots = [1_796_584_800_000, 1_796_584_920_000]  # two minutes apart
    fires = [
        store.create_task(
            title="Say hello", metadata={"routine_id": "e20e65c35282fae5", "slot_at": slot}
        ).task
        for slot in slots
    ]
    base = daphne()
    page = open_board(browser, base, WIDE)
    shown = []
    for task in fires:
        chip = page.locator(f"[data-task-id='{task.id}'] .routine-fire")
        chip.wait_for(timeout=10_000)
        shown.append(chip.inner_text())
        assert "e20e65c35282fae5" in chip.get_attribute("title")
    assert shown[0] != shown[1] and all(text.startswith("⟳ fired ") for text in shown), shown
    screenshot(page, "board-routine-fires.png", tmp_path)


def test_approving_work_nothing_verified_says_so_not_fail_over_none_configured(
    daphne, operator, tmp_path, browser
):
    task = store.create_task(title="Say hello", file_mutating=False).task
    assert store.claim(task.id, "builder", "command").ok
    store.set_verdict(task.id, "fail", "(none configured)")
    store.await_review(task.id)
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.locator(f"[data-task-id='{task.id}']").click()
    page.click("#approve-btn")
    dialog = page.locator("dialog[open]")
    dialog.wait_for(timeout=5_000)
    # It read "Verification is fail." over the evidence "(none configured)".
    text = dialog.inner_text()
    assert "Nothing verified it: no verify command is configured" in text, text
    assert "(none configured)" not in text and "Verification is fail" not in text
    assert dialog.locator("#override-reason").is_visible()  # still an override
    # Worked in place: nothing lands, and the dialog said "lands the task's change".
    assert "there is no change to land" in dialog.locator("#approve-what").inner_text()
    assert page.locator("#ask-ok").inner_text() == "Approve"
    screenshot(page, "board-approve-unverified.png", tmp_path)


@pytest.mark.parametrize("viewport", [WIDE, {"width": 1280, "height": 720}])
def test_a_long_task_panel_scrolls_on_its_own_and_the_columns_stay_in_view(
    daphne, operator, tmp_path, viewport, browser
):
    """A task panel taller than the window scrolled the whole page, taking the columns
    out of view while a person read the review; the panel scrolls by itself now."""
    task = store.create_task(title="A long brief").task
    for n in range(40):
        store.add_comment(task.id, f"Round {n}: " + "a remark worth reading. " * 8, "op")
    base = daphne()
    page = open_board(browser, base, viewport, path=f"/board/?team=default&task={task.id}")
    page.locator("#detail h2", has_text="A long brief").wait_for(timeout=10_000)
    page.mouse.move(viewport["width"] - 80, viewport["height"] - 80)  # over the panel
    page.mouse.wheel(0, 4000)
    page.wait_for_function("document.querySelector('#detail').scrollTop > 0", timeout=5_000)
    screenshot(page, "board-long-panel.png", tmp_path)
    fits = page.evaluate(
        "() => [document.scrollingElement.scrollHeight <= innerHeight + 1,"
        " document.scrollingElement.scrollTop,"
        " document.querySelector('#columns').getBoundingClientRect().top >= 0]"
    )
    assert fits == [True, 0, True], fits


# Every field a person fills in, in the order a form shows it (the route's three as one).
FIELD_ORDER_JS = """form => {
  const names = [];
  for (const f of form.querySelectorAll('input[name], textarea[name], select[name]')) {
    const name = f.name.startsWith('route_') ? 'route' : f.name;
    if (name !== 'backlog' && !names.includes(name)) names.push(name);
  }
  return names;
}"""


def test_new_task_and_edit_task_show_their_fields_in_one_order(daphne, operator, tmp_path, browser):
    task = store.create_task(title="Say hello").task
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.click("#new-task-btn")
    new = page.locator("#new-task-form")
    new.wait_for(timeout=5_000)
    new_order = new.evaluate(FIELD_ORDER_JS)
    screenshot(page, "board-new-task.png", tmp_path)
    page.keyboard.press("Escape")
    page.locator(f"[data-task-id='{task.id}']").click()
    page.click("#edit-task")
    edit = page.locator("#edit-form")
    edit.wait_for(timeout=5_000)
    edit_order = edit.evaluate(FIELD_ORDER_JS)
    screenshot(page, "board-edit-task.png", tmp_path)
    assert new_order == edit_order, (new_order, edit_order)
    assert new_order == [
        "title",
        "description",
        "priority",
        "labels",
        "depends_on",
        "repository",
        "touches",
        "verify_cmd",
        "route",
    ]


# What of a form's words a person cannot read: each placeholder wider than its box, each
# hint cut off or outside the panel (its text, the width it needs, the width it has).
CLIPPED_WORDS_JS = """form => {
  const panel = form.closest('#detail').getBoundingClientRect();
  const ruler = document.createElement('canvas').getContext('2d');
  const clipped = [];
  for (const input of form.querySelectorAll('input[placeholder]')) {
    const style = getComputedStyle(input);
    ruler.font = style.font;
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const needs = ruler.measureText(input.placeholder).width;
    if (needs > room) clipped.push([input.name, input.placeholder, needs, room]);
  }
  for (const hint of form.querySelectorAll('.field-hint')) {
    hint.scrollIntoView({ block: 'center' });
    const box = hint.getBoundingClientRect();
    const inside = box.left >= panel.left && box.right <= panel.right && box.right <= innerWidth;
    if (!hint.textContent.trim() || hint.scrollWidth > hint.clientWidth || !inside)
      clipped.push([hint.id, hint.textContent, box.left, box.right, panel.left, panel.right]);
  }
  return clipped;
}"""


def test_the_editors_touches_hint_reads_whole_at_1280_px_in_both_themes(
    daphne, operator, tmp_path, browser
):
    """At 1280 px the Touches field's hint, a placeholder, was cut off after "(no agent
    starts it" in the light and the dark theme; its hint is a line under the field."""
    task = store.create_task(title="Say hello").task
    base = daphne()
    page = open_board(browser, base, {"width": 1280, "height": 800})
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.locator(f"[data-task-id='{task.id}']").click()
        page.click("#edit-task")
        form = page.locator("#edit-form")
        form.wait_for(timeout=5_000)
        assert form.evaluate(CLIPPED_WORDS_JS) == [], scheme
        hint = page.locator("#edit-hint-touches")
        assert "no agent starts it while overlapping work" in hint.inner_text()
        hint.scroll_into_view_if_needed()
        assert hint.is_visible()
        screenshot(page, f"board-edit-touches-{scheme}.png", tmp_path)
        page.click("#edit-cancel")


def test_a_routines_in_review_count_opens_the_board_filtered_to_its_fires(
    daphne, operator, tmp_path, browser
):
    """A ``*/2`` routine filed 24 tasks into review unnoticed: the routines page says
    how many wait, and its link shows the board with only that routine's fires."""
    from routines import store as routines_store

    routine = routines_store.create_routine(
        agent_id="builder",
        team="default",
        cron_spec="*/2 * * * *",
        task_template={"title": "Tidy the notes"},
    )
    fires = []
    for slot in (1, 2):
        task = store.create_task(
            title="Tidy the notes",
            metadata={"routine_id": routine.id, "slot_at": slot},
            file_mutating=False,
        ).task
        assert store.claim(task.id, "builder", "command").ok
        store.await_review(task.id)
        fires.append(task.id)
    other = store.create_task(title="By hand", file_mutating=False).task
    assert store.claim(other.id, "builder", "command").ok
    store.await_review(other.id)
    base = daphne()
    page = browser.new_page(viewport=WIDE)
    log_in(page, base, "op", "pw-op-123", next_path="/board/routines/?team=default")
    link = page.locator(f"#in-review-{routine.id}")
    assert link.inner_text() == "2 in review"
    link.click()
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    picked = page.locator("#filter-routine")
    page.wait_for_function(
        "() => document.querySelector('#filter-routine').selectedOptions[0].text"
        ".startsWith('Tidy the notes · */2 * * * * · ')",
        timeout=10_000,
    )
    assert picked.is_visible()
    column = page.locator(".column[data-status=in_review] .card")
    page.wait_for_function(
        "() => document.querySelectorAll('.column[data-status=in_review] .card').length === 2",
        timeout=10_000,
    )
    assert sorted(column.evaluate_all("cs => cs.map(c => c.dataset.taskId)")) == sorted(fires)
    screenshot(page, "board-routine-filter.png", tmp_path)


def test_a_routed_cards_pill_is_dark_in_the_dark_theme_and_reads(
    daphne, operator, tmp_path, browser
):
    # "→ agent builder" was a white chip on the dark board's dark card.
    task = store.create_task(title="Say hello", route={"agent": "builder"}).task
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.emulate_media(color_scheme="dark")
    pill = page.locator(f"[data-task-id='{task.id}'] .pill.route")
    pill.wait_for(timeout=10_000)
    fg, bg = pill.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]")
    screenshot(page, "board-route-pill-dark.png", tmp_path)
    # Against black, a ground under 0.1 in luminance gives a contrast under 3.
    assert page.evaluate(CONTRAST_JS, [bg, "rgb(0, 0, 0)"]) < 3, bg
    assert page.evaluate(CONTRAST_JS, [fg, bg]) >= 4.5, (fg, bg)
