"""What new users tripped on, fixed and shown in a real browser at 1440 px: the columns
fit (or a hint points at the ones off screen) and a tool-approval card keeps its Deny
button; the agents are one press away and a pause is said in the team chat; a card
shows failed attempts and its error, and "no verify command" for what nothing could
verify; a fix round's runs carry one numbering and round one's feedback says it is
round one's; the run log reads (WCAG AA); only people and agents are @-mentionable;
New task has the editor's Repository field.

``CLAWBOO_SCREENSHOTS=docs/img`` writes the pictures there (see ``browsing.screenshot``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from board import store
from board.models import Task
from core import machines, registry, repositories
from core.models import Agent
from executor.runner import Executor
from tests.fixtures.gitrepos import make_repo
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, eventually, screenshot
from tests.live.test_board_browser import WIDE, card_in, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
# The board tests' staff member of the default team, with the agent "builder".
operator = test_board_browser.operator

# WCAG 2 relative luminance and contrast of two computed CSS colours.
CONTRAST_JS = """([fg, bg]) => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const lin = (v) => (v / 255 <= 0.03928 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
    const [r, g, b] = rgb(c).map(lin);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""

# A builder whose first round writes "meh" (the gate wants "ok") and whose fix round,
# finding its own first try in the checkout, writes "ok".
FIXER = """
import pathlib
here = pathlib.Path.cwd()
mine = here / "feature.txt"
mine.write_text("ok\\n" if mine.exists() else "meh\\n")
print("round", "two" if mine.read_text() == "ok\\n" else "one", flush=True)
"""


def box(locator) -> dict:
    found = locator.bounding_box()
    assert found is not None, "not laid out"
    return found


def test_at_1440_px_the_columns_fit_a_hint_shows_the_hidden_ones_and_deny_is_not_clipped(
    daphne, operator, tmp_path, browser
):
    # A task waiting for approval: the eighth column (Needs approval) shows.
    waiting = store.create_task(title="Drop the old table", labels=["risk"]).task
    assert store.get_task(waiting.id).as_dict()["approval"]["state"] == "required"
    asking = store.create_task(title="Migrate the data").task
    asked = store.ask_tool_call(asking.id, "builder", "Bash", {"command": "psql -c 'select 1'"})
    assert asked is not None
    base = daphne()
    page = open_board(browser, base, WIDE)
    card_in(page, "needs_approval", waiting.id).wait_for(timeout=10_000)
    ask = page.locator(f"[data-tool-approval='{asked.id}']")
    ask.wait_for(timeout=10_000)

    # The header is one row: every control in it, no template text.
    header = page.locator("header.top")
    assert "{#" not in header.inner_text()
    assert box(header)["height"] < 60
    columns = page.locator(".column:visible")
    assert columns.count() == 8
    area = box(page.locator("#columns"))
    for i in range(8):
        right = box(columns.nth(i))["x"] + box(columns.nth(i))["width"]
        assert right <= area["x"] + area["width"] + 1, f"column {i} is off screen"
    assert page.locator("#scroll-hint").is_hidden()

    # The tool-approval card keeps every button inside the card and the window.
    card = box(card_in(page, "todo", asking.id))
    for decision in ("allow_once", "allow_always", "deny"):
        button = box(ask.locator(f"[data-tool-decision={decision}]"))
        assert button["x"] >= card["x"] - 0.5, decision
        assert button["x"] + button["width"] <= card["x"] + card["width"] + 0.5, decision
        assert button["x"] + button["width"] <= WIDE["width"], decision
    screenshot(page, "board-1440.png", tmp_path)

    # The side panel open, Cancelled no longer fits: a hint names what is off to
    # the right, and takes you there.
    page.click("#chat-toggle")
    hint = page.locator("#scroll-hint")
    hint.wait_for(timeout=3_000)
    assert "Cancelled" in hint.inner_text()
    screenshot(page, "board-scroll-hint.png", tmp_path)
    hint.click()
    cancelled = page.locator(".column[data-status=cancelled]")
    eventually(
        lambda: (
            box(cancelled)["x"] + box(cancelled)["width"]
            <= box(page.locator("#columns"))["x"] + box(page.locator("#columns"))["width"] + 1
        ),
        "the hint scrolled to Cancelled",
    )
    hint.wait_for(state="hidden", timeout=3_000)


def test_at_1280_px_the_board_fits_the_window_under_a_wrapped_toolbar_and_its_hint_shows(
    daphne, operator, repo, tmp_path, browser
):
    # What a new user's demo shows: a merge-queue line under the filters (which wrap
    # to two rows at 1280 px) and eight columns, Cancelled off to the right.
    repositories.register(team="default", path=str(repo), id="app", landing_mode="queue")
    waiting = store.create_task(title="Drop the old table", labels=["risk"]).task
    base = daphne()
    size = {"width": 1280, "height": 900}
    page = open_board(browser, base, size)
    card_in(page, "needs_approval", waiting.id).wait_for(timeout=10_000)
    page.locator("#merge-queue", has_text="waiting to land").wait_for(timeout=10_000)
    # The columns end inside the window: no page scroll below the board.
    layout = box(page.locator(".layout"))
    assert layout["y"] + layout["height"] <= size["height"] + 1, layout
    assert page.evaluate("document.documentElement.scrollHeight") <= size["height"] + 1
    # So the hint to the columns off to the right is on screen.
    hint = page.locator("#scroll-hint")
    hint.wait_for(timeout=3_000)
    assert "Cancelled" in hint.inner_text()
    assert box(hint)["y"] + box(hint)["height"] <= size["height"], box(hint)
    screenshot(page, "board-1280.png", tmp_path)


def test_the_agents_show_while_their_button_is_pressed_not_whenever_the_side_is_open(
    daphne, operator, tmp_path, browser
):
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.click("#chat-toggle")
    page.locator("#chat-panel").wait_for(timeout=5_000)
    # The chat alone: the Agents button is not pressed, so no agents under it.
    assert page.locator("#agents-toggle").get_attribute("aria-pressed") == "false"
    assert page.locator("#agents-panel").is_hidden()
    page.click("#agents-toggle")
    page.locator("#agents-panel [data-agent=builder]").wait_for(timeout=5_000)
    # Pressed again, they fold away and the chat stays.
    page.click("#agents-toggle")
    page.locator("#agents-panel").wait_for(state="hidden", timeout=3_000)
    assert page.locator("#chat-panel").is_visible()


def test_the_agents_button_pauses_an_agent_without_the_chat_and_the_chat_says_so(
    daphne, operator, tmp_path, browser
):
    base = daphne()
    page = open_board(browser, base, WIDE)
    # At 1440 px the chat starts folded away; the Agents control is in the header.
    assert page.evaluate("document.body.dataset.chat") == "closed"
    assert page.locator("#agents-panel").is_hidden()
    page.click("#agents-toggle")
    agent = page.locator("#agents-panel [data-agent=builder]")
    agent.wait_for(timeout=5_000)
    assert agent.locator(".agent-host").count() == 0  # the server's workers run it
    agent.locator("button", has_text="Pause").click()
    eventually(lambda: Agent.objects.get(pk="builder").state == "paused", "paused", 10)
    page.locator("#agents-summary", has_text="1 paused").wait_for(timeout=5_000)
    agent.locator("button", has_text="Resume").wait_for(timeout=5_000)
    # Why it is paused reads under it (it was a tooltip only).
    assert agent.locator(".agent-why").inner_text() == "paused from the board"
    screenshot(page, "board-agents.png", tmp_path)
    # The team chat says it, live.
    page.click("#chat-toggle")
    page.locator("#chat li", has_text="agent paused: builder").wait_for(timeout=5_000)


def test_an_agent_left_to_a_host_with_no_worker_says_so_and_counts_as_not_at_work(
    daphne, operator, tmp_path, browser
):
    # Its tasks would sit in todo while the panel said "active" and nothing said why.
    machines.mint("gpu-1", ["builder"])
    stuck = store.create_task(title="Build the wheels", route={"agent": "builder"}).task
    base = daphne()
    page = open_board(browser, base, WIDE)
    page.locator("#agents-summary", has_text="1 with no worker").wait_for(timeout=5_000)
    # The waiting card says why it waits, as the header does (not only the header).
    card = card_in(page, "todo", stuck.id)
    card.locator(".agent-wait", has_text="waits: Builder has no worker").wait_for(timeout=5_000)
    assert "runs on gpu-1: no worker has connected" in card.locator(".agent-wait").get_attribute(
        "title"
    )
    # Whole, not cut to "waits: Builder ha…" in a 160 px column.
    pill = card.locator(".agent-wait")
    assert pill.evaluate("p => p.scrollWidth <= p.clientWidth")
    card.click()
    assert pill.evaluate("p => p.scrollWidth <= p.clientWidth")  # the side panel open
    waits = page.locator("#detail-waits")
    waits.wait_for(timeout=5_000)
    assert "Builder has no worker (runs on gpu-1: no worker has connected)" in waits.inner_text()
    screenshot(page, "board-card-no-worker.png", tmp_path)
    page.locator("#detail .close").click()
    page.click("#agents-toggle")
    host = page.locator("#agents-panel [data-agent=builder] .agent-host")
    host.wait_for(timeout=5_000)
    assert host.inner_text() == "runs on gpu-1: no worker has connected"
    # An unhealthy agent says why in words, not in a tooltip a phone never shows.
    registry.record_health("builder", False, "builder-cli: not found on PATH")
    page.reload()
    page.locator("#agents-summary", has_text="1 unhealthy").wait_for(timeout=5_000)
    card.locator(".agent-wait", has_text="waits: Builder is unhealthy").wait_for(timeout=5_000)
    if page.locator("#agents-panel").is_hidden():
        page.click("#agents-toggle")
    why = page.locator("#agents-panel [data-agent=builder] .agent-why")
    why.wait_for(timeout=5_000)
    assert why.inner_text() == "builder-cli: not found on PATH"
    screenshot(page, "board-agent-host.png", tmp_path)


def test_a_card_shows_failed_attempts_with_the_error_and_no_verify_command_as_such(
    daphne, operator, command_agent, tmp_path, browser
):
    command_agent("maker")  # writes a file; the task names no verify command
    unverified = store.create_task(title="Add feature").task
    report = Executor("maker").work_once()
    assert report.verdict == "fail"
    assert store.get_task(unverified.id).as_dict()["verification"]["evidence"] == (
        "(none configured)"
    )
    failing = store.create_task(title="Flaky job", max_attempts=3, file_mutating=False).task
    claimed = store.claim(failing.id, "builder")
    assert claimed.outcome == "ok"
    store.fail(failing.id, "exit 1: connection reset", ticket=claimed.ticket)
    assert store.get_task(failing.id).status == "todo"
    base = daphne()
    page = open_board(browser, base, WIDE)
    card = card_in(page, "in_review", unverified.id)
    card.wait_for(timeout=10_000)
    assert card.locator(".verdict").inner_text() == "no verify command"
    assert "verify failed" not in card.inner_text()
    flaky = card_in(page, "todo", failing.id)
    flaky.wait_for(timeout=5_000)
    assert flaky.locator(".attempts").inner_text() == "↻ 1/3 attempt"
    assert "exit 1: connection reset" in flaky.locator(".error").get_attribute("title")
    screenshot(page, "board-card-attempts.png", tmp_path)


def test_a_fix_round_numbers_its_runs_once_and_says_whose_feedback_it_shows(
    daphne, operator, repo, state_dir, settings, tmp_path, browser
):
    settings.CLAWBOO_MAX_FIX_CYCLES = 1
    script = tmp_path / "fixer.py"
    script.write_text(FIXER)
    registry.create_agent(
        id="fixer",
        display_name="Fixer",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, str(script)], "repo_path": str(repo)},
    )
    task = store.create_task(
        title="Say ok", metadata={"verify_cmd": "grep -qx ok feature.txt"}
    ).task
    assert Executor("fixer").work_once().verdict == "fail"
    assert Executor("fixer").work_once().verdict == "pass"
    done = store.get_task(task.id)
    assert done.status == "in_review" and done.feedback
    base = daphne()
    page = open_board(browser, base, WIDE, f"/board/?task={task.id}")
    page.locator("#detail-title").wait_for(timeout=10_000)
    feedback = page.locator("#detail-feedback")
    assert feedback.inner_text().startswith("from round 1 (round 2 passed): ")
    runs = page.locator(".review .runs summary")
    runs.first.wait_for(timeout=10_000)
    numbers = [text.split(" ", 1)[0] for text in runs.all_inner_texts()]
    assert numbers == ["#2", "#1"]  # newest first, each run its own number
    # The output panel names the newest run by the same number.
    page.locator("#run-output-state", has_text="run #2").wait_for(timeout=10_000)
    log = page.locator("#run-log")
    log.filter(has_text="round two").wait_for(timeout=5_000)
    colours = log.evaluate("n => [getComputedStyle(n).color, getComputedStyle(n).backgroundColor]")
    assert page.evaluate(CONTRAST_JS, colours) >= 4.5, colours
    # The run's log links read as links on the panel, not as the dark header's
    # pale links (which looked disabled there).
    panel = page.locator("#detail").evaluate("n => getComputedStyle(n).backgroundColor")
    for link in (page.locator("#run-log-download"), page.locator("#detail .trace-log").first):
        link.wait_for(timeout=5_000)
        ink = link.evaluate("n => getComputedStyle(n).color")
        assert page.evaluate(CONTRAST_JS, [ink, panel]) >= 4.5, (ink, panel)
    screenshot(page, "board-fix-round.png", tmp_path)


def test_mentions_offer_people_and_agents_and_new_task_takes_a_repository(
    daphne, operator, settings, tmp_path, browser
):
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [roots]
    repositories.register(team="default", path=str(make_repo(roots / "web")), id="web")
    token, _key = machines.mint("build-host", ["builder"])
    task = store.create_task(title="Fix login").task
    base = daphne()
    page = open_board(browser, base, WIDE, f"/board/?task={task.id}")
    chips = page.locator("#comment-form .mention-chips .chip")
    chips.first.wait_for(timeout=10_000)
    offered = chips.all_inner_texts()
    assert "@op" in offered and "@builder" in offered
    assert f"@{token.user.username}" not in offered
    assert not [name for name in offered if name.startswith("@machine-")]

    # New task has the editor's Repository (and Depends on) fields.
    page.click("#new-task-btn")
    page.fill("#new-task-form [name=title]", "Ship the web fix")
    page.locator("#new-task-repository[data-ready=true]").wait_for(timeout=5_000)
    page.select_option("#new-task-repository", "web")
    page.fill("#new-task-depends", task.id)
    screenshot(page, "board-new-task.png", tmp_path)
    page.click("#create-task")
    page.locator(".card", has_text="Ship the web fix").wait_for(timeout=5_000)
    created = Task.objects.get(title="Ship the web fix")
    assert created.repository_id == "web"
    assert list(created.dep_links.values_list("depends_on_id", flat=True)) == [task.id]


def test_a_title_of_500_characters_keeps_its_card_to_a_few_lines_and_is_read_whole_on_open(
    daphne, operator, tmp_path, browser
):
    """A title may be 500 characters with no space: its card was as tall as the screen
    and pushed the column's other cards out of sight (anyone on the team can file one).
    The card shows a few lines of it; the card's label, and the task opened, say it
    whole."""
    long = store.create_task(title="W" * 500, priority=1).task
    other = store.create_task(title="Below it").task
    base = daphne()
    page = open_board(browser, base, WIDE)
    card = card_in(page, "todo", long.id)
    card.wait_for(timeout=5_000)
    card_in(page, "todo", other.id).wait_for(timeout=5_000)
    assert box(card)["height"] < 200, box(card)
    assert box(card_in(page, "todo", other.id))["y"] < WIDE["height"]
    assert card.get_attribute("aria-label").startswith("W" * 500)
    screenshot(page, "board-long-title.png", tmp_path)
    card.click()
    assert page.locator("#detail h2, #detail .detail-title").first.inner_text() == "W" * 500


# What a header shows, page to page: the brand, its links (and which is marked), who is
# signed in, Log out; and where the brand and the links sit, so a link stays put.
HEADER_JS = """() => {
  const top = document.querySelector("header.top");
  const at = (el) => {
    const r = el.getBoundingClientRect();
    return [r.x, r.y, r.width, r.height].map(Math.round);
  };
  const href = (a) => new URL(a.href).pathname + new URL(a.href).search;
  const links = [...top.querySelectorAll(".top-nav a")];
  return {
    count: document.querySelectorAll("header.top").length,
    brand: top.querySelector(".brand").innerText.trim(),
    logo: Boolean(top.querySelector(".brand img")),
    links: links.map((a) => [a.innerText.trim(), href(a)]),
    current: links.filter((a) => a.getAttribute("aria-current") === "page")
      .map((a) => a.innerText.trim()),
    places: [top.querySelector(".brand"), ...links].map(at),
    who: top.querySelector("#who").innerText.trim(),
    logout: top.querySelector("form.logout button").innerText.trim(),
    look: [getComputedStyle(top).backgroundColor, getComputedStyle(top).fontSize,
      Math.round(top.getBoundingClientRect().height)],
  };
}"""


@pytest.mark.parametrize("width", [1280, 1440])
def test_the_board_routines_and_usage_pages_share_one_header_and_its_links_go_there(
    daphne, operator, tmp_path, browser, width
):
    # Routines and Usage had a header of their own: no logo, other colours, plain links.
    base = daphne()
    page = open_board(browser, base, {"width": width, "height": 900})
    seen = {}
    pages = (("Board", "/board/"), ("Routines", "/board/routines/"), ("Usage", "/board/usage/"))
    for name, path in pages:
        if name != "Board":
            # Through the header's own link, as a person goes.
            page.locator("header.top .top-nav a", has_text=name).click()
            page.wait_for_url(lambda url, path=path: url.split("?")[0].endswith(path))
        seen[name] = page.evaluate(HEADER_JS)
        screenshot(page, f"header-{name.lower()}-{width}.png", tmp_path)
    board = seen["Board"]
    assert board["count"] == 1 and board["brand"] == "Clawboo" and board["logo"]
    assert [text for text, _ in board["links"]] == ["Board", "Routines", "Usage"]
    assert board["who"] == "op" and board["logout"] == "Log out"
    for name, header in seen.items():
        assert header["current"] == [name], name
        for key in ("count", "brand", "logo", "who", "logout", "look"):
            assert header[key] == board[key], (name, key, header[key], board[key])
        # The brand and each link where the board has them (to a pixel's rounding).
        for mine, theirs in zip(header["places"], board["places"], strict=True):
            near = all(abs(a - b) <= 1 for a, b in zip(mine, theirs, strict=True))
            assert near, (name, mine, theirs)
    # The board's team goes along with every link.
    assert all(href.endswith("?team=default") for _, href in seen["Usage"]["links"])
    page.locator("header.top .top-nav a", has_text="Board").click()
    page.wait_for_selector("#conn[data-state=live]", timeout=10_000)
