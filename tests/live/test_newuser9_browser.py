"""What a new user missed in the browser (newuser9): a task's panel named no
repository, and a task naming none works in its agent's default one."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from core import registry, repositories
from tests.fixtures.gitrepos import make_repo
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
from tests.live.test_board_browser import WIDE, card_in, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator


def test_a_tasks_panel_names_the_repository_its_run_works_in(
    daphne, operator, settings, tmp_path, browser
):
    root = (tmp_path / "repos").resolve()
    settings.CLAWBOO_REPO_ROOTS = [root]
    repositories.register(team="default", path=str(make_repo(root / "app")), id="app")
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "app"},
    )
    task = store.create_task(title="Works in the default").task
    store.update_task(task.id, {"assignee_agent_id": "far-bot"})
    own = store.create_task(title="Names its own", repository="app").task
    base = daphne()
    page = open_board(browser, base, WIDE)
    line = page.locator("#detail-repository")
    card_in(page, "todo", task.id).click()
    page.wait_for_function(
        "() => document.querySelector('#detail-repository').textContent.includes('default')",
        timeout=10_000,
    )
    assert line.inner_text() == "app (its agent's default)"
    screenshot(page, "board-detail-repository.png", tmp_path)
    card_in(page, "todo", own.id).click()
    page.wait_for_function(
        "() => document.querySelector('#detail-title').textContent === 'Names its own'",
        timeout=10_000,
    )
    assert line.inner_text() == "app"
