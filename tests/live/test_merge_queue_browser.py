"""The board shows a repository's merge queue in a real browser: who waits to land
and in which position, and the line emptying live as the queue's job lands them."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from core import registry, repositories
from executor import merge_queue
from tests.live.browsing import CHROMIUM, log_in
from tests.worktrees.queue_fixtures import GATE, Harness
from worktrees import queue, service

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def test_the_board_shows_the_merge_queue_and_its_positions(
    daphne, settings, monkeypatch, repo, tmp_path, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    log = tmp_path / "gates.log"
    command = GATE.format(pause="0", log=log)
    repositories.register(
        team="default", path=str(repo), id="app", landing_mode="queue", verify_cmd=command
    )
    registry.create_agent(
        id="builder", display_name="Builder", team="default", runtime="command",
        settings={"argv": ["true"]},
    )  # fmt: skip
    monkeypatch.setattr(queue, "kick", lambda repo_path: None)  # the test is the q2 worker
    harness = Harness(repo, log, command)
    first = harness.in_review("First to land", {"one.txt": "1\n"})
    second = harness.in_review("Second to land", {"two.txt": "2\n"})
    service.approve(first, by="op")
    service.approve(second, by="op")
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    line = page.locator("#merge-queue .mq-line li")
    line.first.wait_for(timeout=30_000)
    assert "2 waiting to land" in page.locator("#merge-queue").inner_text()
    assert [line.nth(i).get_attribute("data-position") for i in range(2)] == ["1", "2"]
    assert "First to land" in line.nth(0).inner_text()
    # The queue's job lands both: the line empties live, the bisect-free batch shown.
    merge_queue.drain(str(repo))
    page.wait_for_function(
        "() => document.querySelector('#merge-queue').innerText.includes('0 waiting')",
        timeout=30_000,
    )


def test_approving_says_queued_until_the_queue_lands_it_then_no_longer(
    daphne, settings, monkeypatch, repo, tmp_path, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    log = tmp_path / "gates.log"
    command = GATE.format(pause="0", log=log)
    repositories.register(
        team="default", path=str(repo), id="app", landing_mode="queue", verify_cmd=command
    )
    registry.create_agent(
        id="builder", display_name="Builder", team="default", runtime="command",
        settings={"argv": ["true"]},
    )  # fmt: skip
    monkeypatch.setattr(queue, "kick", lambda repo_path: None)  # the test is the q2 worker
    task_id = Harness(repo, log, command).in_review("Land me", {"one.txt": "1\n"})
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    page.locator(f"[data-status=in_review] [data-task-id='{task_id}']").click()
    page.click("#approve-btn")
    page.click("#ask-ok")
    note = page.locator("#review-note")
    page.locator("#review-note", has_text="Queued to land").wait_for(timeout=15_000)
    merge_queue.drain(str(repo))
    page.locator(f"[data-status=done] [data-task-id='{task_id}']").wait_for(timeout=15_000)
    # Landed: "Queued to land" no longer stands on the task (its comment says it landed).
    page.locator("#comments li", has_text="landed commit").wait_for(timeout=15_000)
    assert "Queued" not in note.inner_text()
