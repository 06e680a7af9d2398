"""The board's first view in a real browser: two requests (the columns, whose answer
carries the side reads, and the counts) show a card's scope wait, a stalled run's
marker and the merge-queue panel -- the member's team's only, with another team's
of each on the same server -- and a run that stalls afterwards is marked live."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.store import steps as steps_store
from core import registry
from tests.api.test_board_first_view import side_data
from tests.live.browsing import CHROMIUM
from worktrees import queue

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def test_the_first_view_shows_scope_waits_stalled_runs_and_the_merge_queue_from_two_requests(
    daphne, default_team, settings, monkeypatch, tmp_path, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    monkeypatch.setattr(queue, "kick", lambda repo_path: None)  # no queue job here
    ada = get_user_model().objects.create_user("ada", "ada@example.com", "pw-ada-123")
    registry.add_member("default", ada)  # a member, not staff: default's, not red's
    registry.ensure_team("red")
    mine = side_data("default", tmp_path)
    theirs = side_data("red", tmp_path)
    later = store.create_task(title="Stalls later", team="default").task
    claim = store.claim(later.id, "default-bot")
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{base}/board/login/?next=/board/%3Fteam%3Ddefault")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-123")
    board_reads: list[str] = []
    page.on(
        "request",
        lambda r: (
            board_reads.append(r.url.removeprefix(base).split("?")[0])
            if "/api/board/" in r.url
            else None
        ),
    )
    page.click("#login")
    page.wait_for_selector("#conn[data-state=live]", timeout=15_000)

    held = page.locator(f".column[data-status=todo] [data-task-id='{mine['held'][0]}']")
    assert "waiting: touches src/0/a.py" in held.locator(".pill.scope-wait").inner_text()
    stalled = page.locator(
        f".column[data-status=in_progress] [data-task-id='{mine['stalled'][0]}']"
    )
    assert stalled.locator(".badge.stalled").count() == 1
    panel = page.locator("#merge-queue")
    assert panel.is_visible() and "1 waiting to land" in panel.inner_text()
    assert "approved 0" in panel.locator(".mq-line li").inner_text()
    page.wait_for_load_state("networkidle")
    assert sorted(board_reads) == ["/api/board/columns", "/api/board/counts"]
    shown = page.content()
    assert not any(task_id in shown for ids in theirs.values() for task_id in ids)
    assert "red-app-0" not in panel.inner_text()

    # A run that stalls now is marked live, as before.
    run = store.open_execution(later.id, claim.ticket, runtime="command")
    steps_store.mark_stalled(run.id, 1.0)
    late = page.locator(f".column[data-status=in_progress] [data-task-id='{later.id}']")
    late.locator(".badge.stalled").wait_for(timeout=15_000)
