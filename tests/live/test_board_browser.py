"""The board as people use it, in a real browser: dragging cards (legal columns take
them, everyone sees the move, a refused one snaps back and says why), moving from
the keyboard, filters and search kept in the URL, history paged on demand, and a
phone switching columns with tabs.

Set ``CLAWBOO_SCREENSHOTS=1`` to refresh the pictures in ``docs/img/``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from core import registry
from tests.live.browsing import CHROMIUM, api_post, eventually, log_in, screenshot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def operator(settings, monkeypatch):
    """A staff member of the default team with an agent to claim for, and a token."""
    # Playwright's sync API runs an event loop in this thread; the test's own ORM
    # reads are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    # The server checks passwords with the product's hashers, not the tests' fast one.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    registry.create_agent(
        id="builder",
        display_name="Builder",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=user,
        max_concurrent=5,  # the board's cases hold a few tasks as one agent
    )
    return Token.objects.create(user=user).key


def open_board(browser, base: str, viewport: dict = WIDE, path: str = "/board/"):
    page = browser.new_page(viewport=viewport)
    log_in(page, base, "op", "pw-op-123")
    if path != "/board/":
        page.goto(base + path)
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    return page


def card_in(page, status: str, task_id: str):
    return page.locator(f".column[data-status={status}] [data-task-id='{task_id}']")


def shown_ids(page, status: str) -> list[str]:
    return page.locator(f".column[data-status={status}] .card").evaluate_all(
        "cards => cards.map(c => c.dataset.taskId)"
    )


def wait_count(page, status: str, text: str) -> None:
    page.wait_for_function(
        "([status, text]) => document.querySelector("
        "`.column[data-status=${status}] [data-count]`).textContent === text",
        arg=[status, text],
        timeout=3_000,
    )


def finished(title: str, **fields) -> str:
    task = store.create_task(title=title, **fields).task
    assert store.claim(task.id, "builder").ok
    store.complete(task.id)
    return task.id


def test_a_dragged_card_moves_for_everyone_and_a_refused_drop_snaps_back_saying_why(
    daphne, operator, tmp_path, browser
):
    fix = store.create_task(title="Fix login", labels=["auth"], priority=2).task
    schema = store.create_task(title="Write the schema").task
    form = store.create_task(title="Wire the form", depends_on=[schema.id]).task
    flaky = store.create_task(title="Flaky suite").task
    assert store.claim(flaky.id, "builder").ok
    store.set_verdict(flaky.id, "fail", "2 of 40 tests failed")
    base = daphne()
    page = open_board(browser, base)
    watcher = open_board(browser, base)
    card_in(page, "todo", fix.id).wait_for()

    # While a card is dragged, the columns it may move to light up; the rest step back.
    card_in(page, "todo", fix.id).hover()
    page.mouse.down()
    page.locator(".column[data-status=blocked] h2").hover()
    page.locator(".column[data-status=blocked]").hover()
    lit = page.locator(".column.drop-ok").evaluate_all("cs => cs.map(c => c.dataset.status)")
    dim = page.locator(".column.drop-no").evaluate_all("cs => cs.map(c => c.dataset.status)")
    assert lit == ["backlog", "in_progress", "blocked", "cancelled"]
    assert dim == ["in_review", "done"]
    page.mouse.up()
    eventually(lambda: store.get_task(fix.id).status == "blocked", "the drop reached the API")
    card_in(page, "blocked", fix.id).wait_for(timeout=2_000)
    card_in(watcher, "blocked", fix.id).wait_for(timeout=3_000)  # the other open page
    wait_count(page, "blocked", "1")
    wait_count(watcher, "todo", "2")
    screenshot(page, "board-drag.png", tmp_path)

    # An illegal column takes no drop: the card stays and the toast says why.
    card_in(page, "todo", schema.id).drag_to(page.locator(".column[data-status=done]"))
    toast = page.locator(".toast[data-kind=bad]").last
    toast.wait_for(timeout=2_000)
    assert "cannot move from Todo to Done" in toast.inner_text()
    assert "In Progress, Blocked, Backlog, Cancelled" in toast.inner_text()
    assert card_in(page, "todo", schema.id).count() == 1
    assert store.get_task(schema.id).status == "todo"
    screenshot(page, "board-illegal-drop.png", tmp_path)

    # A legal move the server refuses (its dependency is not done) snaps back with
    # the API's reason; the claim it needed was asked for in the page's dialog.
    card_in(page, "todo", form.id).drag_to(page.locator(".column[data-status=in_progress]"))
    page.locator("#ask[open] #claim-agent").wait_for(timeout=2_000)
    assert page.locator("#claim-agent").input_value() == "builder"
    page.click("#ask-ok")
    refused = page.locator(".toast[data-kind=bad]", has_text="Wire the form")
    refused.wait_for(timeout=3_000)
    assert "waits on its dependencies" in refused.inner_text()
    card_in(page, "todo", form.id).wait_for(timeout=2_000)
    assert card_in(page, "in_progress", form.id).count() == 0
    assert store.get_task(form.id).status == "todo"
    # Its card says what the runner knows: the failed gate, the lease left, who has it.
    badges = card_in(page, "in_progress", flaky.id).inner_text()
    assert "verify failed" in badges and "builder" in badges
    assert re.search(r"lease \d+m( \d+s)? left", badges), badges
    assert re.search(r"beat \d+s ago", badges), badges
    # Done over a failing verdict asks for an override, with a reason, in a dialog.
    card_in(page, "in_progress", flaky.id).drag_to(page.locator(".column[data-status=done]"))
    page.locator("#ask[open] #override-reason").fill("the flake is tracked upstream")
    page.click("#ask-ok")
    eventually(lambda: store.get_task(flaky.id).status == "done", "the override landed")
    card_in(page, "done", flaky.id).wait_for(timeout=3_000)
    override = store.get_task(flaky.id).human_override
    assert override["by"] == "op" and override["reason"] == "the flake is tracked upstream"
    # A cancelled card waits on nothing: no "blocked by" on it.
    assert "blocked by 1" in card_in(page, "todo", form.id).inner_text()
    store.transition(form.id, "cancelled")
    # A change made outside the page arrives by the live path (on PostgreSQL:
    # LISTEN/NOTIFY, then Redis): a wider deadline than a click's own answer.
    card_in(page, "cancelled", form.id).wait_for(timeout=10_000)
    assert "blocked by" not in card_in(page, "cancelled", form.id).inner_text()


def test_filters_and_search_live_in_the_url_apply_to_live_changes_and_keyboard_moves(
    daphne, operator, tmp_path, browser
):
    header = store.create_task(title="Polish the header", labels=["ui"]).task
    parser = store.create_task(
        title="Fix the parser", labels=["backend"], description="the tokenizer drops tabs"
    ).task
    docs = store.create_task(title="Parser docs", labels=["docs"]).task
    base = daphne()
    page = open_board(browser, base)
    card_in(page, "todo", docs.id).wait_for()

    page.fill("#filter-label", "ui")
    page.wait_for_url(lambda url: "label=ui" in url, timeout=3_000)
    page.wait_for_function("document.querySelectorAll('.card').length === 1")
    assert shown_ids(page, "todo") == [header.id]
    wait_count(page, "todo", "1")

    # A live change is filtered like the pages: the matching one shows, the other not.
    unseen = api_post(base, operator, "/api/board/tasks", {"title": "Unlabelled"})
    seen = api_post(base, operator, "/api/board/tasks", {"title": "Ui too", "labels": ["ui"]})
    card_in(page, "todo", seen["id"]).wait_for(timeout=3_000)
    assert card_in(page, "todo", unseen["id"]).count() == 0

    page.reload()
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    assert page.locator("#filter-label").input_value() == "ui"
    page.wait_for_function("document.querySelectorAll('.card').length === 2")

    # Search: title or description, any case; the URL keeps it across a reload.
    page.click("#clear-filters")
    page.wait_for_url(lambda url: "label=" not in url, timeout=3_000)
    page.fill("#filter-q", "PARSER")
    page.wait_for_url(lambda url: "q=PARSER" in url, timeout=3_000)
    page.wait_for_function("document.querySelectorAll('.card').length === 2")
    assert set(shown_ids(page, "todo")) == {parser.id, docs.id}
    page.fill("#filter-q", "tokenizer")
    page.wait_for_url(lambda url: "q=tokenizer" in url, timeout=3_000)
    page.wait_for_function("document.querySelectorAll('.card').length === 1")
    screenshot(page, "board-filters.png", tmp_path)
    page.reload()
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    assert page.locator("#filter-q").input_value() == "tokenizer"
    page.wait_for_function("document.querySelectorAll('.card').length === 1")
    assert shown_ids(page, "todo") == [parser.id]
    # Back goes to the filters before the search began.
    page.go_back()
    page.wait_for_url(lambda url: "q=" not in url, timeout=3_000)
    page.wait_for_function("document.querySelectorAll('.card').length === 5")
    assert page.locator("#filter-q").input_value() == ""

    # From the keyboard: focus a card, "m" opens the move menu, arrows pick, Enter moves.
    card_in(page, "todo", parser.id).focus()
    page.keyboard.press("m")
    page.locator("#move-choices").wait_for(timeout=2_000)
    choices = page.locator("#move-choices button").evaluate_all(
        "bs => bs.map(b => b.dataset.moveTo)"
    )
    assert choices == ["in_progress", "blocked", "backlog", "cancelled"]
    screenshot(page, "board-keyboard-move.png", tmp_path)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    eventually(lambda: store.get_task(parser.id).status == "blocked", "the key move landed")
    card_in(page, "blocked", parser.id).wait_for(timeout=2_000)


def test_history_pages_on_demand_and_a_phone_switches_columns_with_tabs(
    daphne, operator, tmp_path, browser
):
    done = [finished(f"Shipped {i}", labels=["ui"] if i % 2 else []) for i in range(60)]
    plan = store.create_task(title="Plan the sprint").task
    base = daphne()
    page = open_board(browser, base)
    card_in(page, "todo", plan.id).wait_for()
    column = page.locator(".column[data-status=done]")
    more = column.locator("[data-load-more]")
    # The most recent first, a page of them; the header counts them all.
    page.wait_for_function(
        "document.querySelectorAll('.column[data-status=done] .card').length === 25"
    )
    assert shown_ids(page, "done") == done[::-1][:25]
    wait_count(page, "done", "60")
    assert more.inner_text() == "Load 25 more (35 left)"
    more.click()
    page.wait_for_function(
        "document.querySelectorAll('.column[data-status=done] .card').length === 50"
    )
    more.click()
    page.wait_for_function(
        "document.querySelectorAll('.column[data-status=done] .card').length === 60"
    )
    assert more.is_hidden()
    assert shown_ids(page, "done") == done[::-1]
    # Something finishing now leads the column, and its count.
    fresh = finished("Shipped just now")
    page.wait_for_function(
        f"document.querySelector('.column[data-status=done] .card').dataset.taskId === '{fresh}'"
    )
    wait_count(page, "done", "61")
    column.locator(".cards").evaluate("cards => cards.scrollTop = 400")
    screenshot(page, "board-load-more.png", tmp_path)

    phone = open_board(browser, base, PHONE)
    # The backlog is empty: the first column shown is the first with cards.
    phone.locator("[data-tab=todo][aria-selected=true]").wait_for(timeout=3_000)
    assert phone.locator("#column-tabs").is_visible()
    card_in(phone, "todo", plan.id).wait_for()
    assert phone.locator(".column[data-status=done]").is_hidden()
    phone.click("[data-tab=done]")
    assert phone.locator(".column[data-status=todo]").is_hidden()
    card_in(phone, "done", fresh).wait_for()
    assert phone.locator("[data-tab=done] [data-tab-count]").inner_text() == "61"
    screenshot(phone, "board-phone.png", tmp_path)


def test_a_link_to_one_task_opens_it_even_past_the_first_page_and_selecting_keeps_the_link(
    daphne, operator, browser
):
    old = finished("Shipped long ago")
    for i in range(30):  # 30 done since: the old one is past the done column's first page
        finished(f"Shipped {i}")
    registry.create_team("elsewhere")
    other_team = store.create_task(title="Not ours", team="elsewhere").task
    plan = store.create_task(title="Plan the sprint").task
    base = daphne()
    link = store.get_task(old).get_absolute_url()
    assert link == f"/board/?team=default&task={old}"
    page = open_board(browser, base, path=link)
    page.locator("#detail h2", has_text="Shipped long ago").wait_for(timeout=5_000)
    assert card_in(page, "done", old).is_visible()
    assert "selected" in card_in(page, "done", old).get_attribute("class")
    # Choosing another card puts it in the address; closing takes it out.
    card_in(page, "todo", plan.id).click()
    page.locator("#detail h2", has_text="Plan the sprint").wait_for()
    assert f"task={plan.id}" in page.url and "team=default" in page.url
    page.click("#detail .close")
    page.wait_for_function("!location.search.includes('task=')")
    # The link survives a reload; a task of another team's board says so.
    page.goto(base + f"/board/?team=default&task={plan.id}")
    page.locator("#detail h2", has_text="Plan the sprint").wait_for(timeout=5_000)
    page.goto(base + f"/board/?team=default&task={other_team.id}")
    page.locator(".toast", has_text="on the board of team elsewhere").wait_for(timeout=5_000)
    assert page.locator("#detail").is_hidden()


def test_a_drop_ends_the_drag_and_a_blocked_card_sent_to_backlog_shows_no_old_error(
    daphne, operator, browser
):
    stuck = store.create_task(title="Stuck on a key").task
    assert store.claim(stuck.id, "builder").ok
    store.fail(stuck.id, "the key expired")
    base = daphne()
    page = open_board(browser, base)
    card_in(page, "blocked", stuck.id).locator(".badge.error").wait_for()
    card_in(page, "blocked", stuck.id).drag_to(page.locator(".column[data-status=backlog]"))
    card_in(page, "backlog", stuck.id).wait_for(timeout=3_000)
    eventually(lambda: store.get_task(stuck.id).status == "backlog", "the drop reached the API")
    # Re-rendered on its way, the card never saw dragend: nothing of the drag is left.
    page.wait_for_function("() => !document.querySelector('.card.pending')", timeout=3_000)
    assert not page.evaluate("document.body.classList.contains('dragging')")
    left = ".column.drop-ok, .column.drop-no, .column.drop-hover, .card.drag-source"
    assert page.locator(left).count() == 0
    assert store.get_task(stuck.id).error is None
    assert card_in(page, "backlog", stuck.id).locator(".badge.error").count() == 0


def test_the_keyboard_reaches_the_first_card_in_two_presses_and_search_follows_typing(
    daphne, operator, browser
):
    first = store.create_task(title="Tokenizer", priority=5).task
    store.create_task(title="Parser")
    base = daphne()
    page = open_board(browser, base)
    card_in(page, "todo", first.id).wait_for()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.dataset.taskId") == first.id
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.taskId") != first.id

    # Typed key by key, never Enter: the address follows.
    page.locator("#filter-q").press_sequentially("pars", delay=40)
    page.wait_for_url(lambda url: "q=pars" in url, timeout=3_000)

    # The person is named once in the header (staff: the name opens the admin).
    header = page.locator("header.top").inner_text()
    assert header.count("op") == 1, header


def test_a_link_to_a_team_the_person_is_not_in_says_so(daphne, operator, settings, browser):
    registry.create_team("secret", "Secret")
    member = get_user_model().objects.create_user("ada", "ada@example.com", "pw-ada-123")
    registry.add_member("default", member)
    base = daphne()
    page = browser.new_page(viewport=WIDE)
    page.goto(f"{base}/board/login/?next=/board/%3Fteam%3Dsecret")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-123")
    page.click("#login")
    notice = page.locator("#team-refused")
    notice.wait_for(timeout=5_000)
    assert "secret" in notice.inner_text() and "default" in notice.inner_text()
    assert page.locator("select[name=team]").input_value() == "default"
    # Its own team's board shows no such notice.
    page.goto(f"{base}/board/?team=default")
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
    assert page.locator("#team-refused").count() == 0


# "Trojan Source" in a title: the override and the isolates make the card read
# "approve me" where the title holds "em evorppa" and a hidden isolate.
BIDI_TITLE = "Fix login \u202eem evorppa\u202c \u2066x\u2069"
BIDI_SHOWN = "Fix login [U+202E]em evorppa[U+202C] [U+2066]x[U+2069]"


def test_a_title_shows_its_bidi_controls_on_the_card_and_in_the_detail_as_the_diff_does(
    daphne, operator, tmp_path, browser
):
    """A title is an agent's text too: a bidi override or isolate in it would make
    the card (and the detail's heading) read otherwise than the title is. Each shows
    as the review diff's marker naming it, on a card the board loads and on one a
    live change re-renders."""
    loaded = store.create_task(title=BIDI_TITLE).task
    renamed = store.create_task(title="Plain for now").task
    base = daphne()
    page = open_board(browser, base)
    title = card_in(page, "todo", loaded.id).locator(".title")
    title.wait_for()
    assert title.inner_text() == BIDI_SHOWN
    assert title.locator(".bidi").count() == 4
    store.update_task(renamed.id, {"title": BIDI_TITLE})
    live = card_in(page, "todo", renamed.id).locator(".title", has_text="[U+202E]")
    live.wait_for(timeout=5_000)
    assert live.inner_text() == BIDI_SHOWN
    card_in(page, "todo", loaded.id).click()
    heading = page.locator("#detail h2")
    heading.locator(".bidi").first.wait_for(timeout=5_000)
    assert heading.inner_text() == BIDI_SHOWN
    screenshot(page, "board-bidi-title.png", tmp_path)
    # Where a title is named besides: another task's "depends on" list.
    store.link(renamed.id, loaded.id)
    card_in(page, "todo", renamed.id).click()
    waits_on = page.locator("#detail dd", has_text="[U+202E]em evorppa")
    waits_on.wait_for(timeout=5_000)
    assert waits_on.locator(".bidi").count() == 4
    shown = page.evaluate(
        "[...document.querySelectorAll('.card .title, #detail h2, #detail dd')]"
        ".map(n => n.textContent)"
    )
    controls = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    assert not set("".join(shown)) & controls
