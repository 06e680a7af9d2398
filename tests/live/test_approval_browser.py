"""The "Needs approval" column in a real browser (issue 34): it appears with a
waiting task, approving the card moves it to todo, and the column disappears when
nothing waits any more."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from board.models import ToolApproval
from core import registry
from tests.live.browsing import CHROMIUM, log_in, screenshot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def test_the_needs_approval_column_shows_waiting_work_and_empties_on_approval(
    daphne, settings, tmp_path, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_user("ada", "ada@example.com", "pw-ada-123")
    user.is_staff = True  # the admin login page admits staff; the board any member
    user.save()
    registry.add_member("default", user)
    store.create_task(title="Plain work")
    base = daphne()
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    log_in(page, base, "ada", "pw-ada-123")
    needs = page.locator(".column[data-status=needs_approval]")
    page.locator("[data-status=todo] .card").first.wait_for(timeout=10_000)
    assert needs.is_hidden()  # nothing waits: no column

    # An agent files work: it arrives live, in the column, which appears.
    waiting = store.create_task(title="Drop the old tables", created_by_agent_id="planner").task
    card = needs.locator(f"[data-task-id='{waiting.id}']")
    card.wait_for(timeout=10_000)
    assert needs.is_visible()
    assert page.locator(".column").first.get_attribute("data-status") == "needs_approval"
    assert page.locator(f"[data-status=todo] [data-task-id='{waiting.id}']").count() == 0
    screenshot(page, "board-needs-approval.png", tmp_path)

    card.locator("[data-approval=approve]").click()

    page.locator(f"[data-status=todo] [data-task-id='{waiting.id}']").wait_for(timeout=10_000)
    needs.wait_for(state="hidden", timeout=10_000)
    deadline = time.monotonic() + 5
    while store.get_task(waiting.id).approval["state"] != "approved":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert store.get_task(waiting.id).approval["by"] == "ada"


def test_a_tool_call_waiting_for_a_person_shows_live_on_its_card(
    daphne, settings, tmp_path, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_user("ada", "ada@example.com", "pw-ada-123")
    user.is_staff = True
    user.save()
    registry.add_member("default", user)
    task = store.create_task(title="Migrate the data").task
    base = daphne()
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    log_in(page, base, "ada", "pw-ada-123")
    card = page.locator(f"[data-status=todo] [data-task-id='{task.id}']")
    card.wait_for(timeout=10_000)

    # What the run's permission prompt records (boardmcp.tools.permission_prompt).
    asked = store.ask_tool_call(
        task.id, "builder", "Bash", {"command": "psql -c 'drop table x' PGPASSWORD=hunter2"}
    )
    assert asked is not None
    ask = card.locator(f"[data-tool-approval='{asked.id}']")
    ask.wait_for(timeout=10_000)
    assert "builder wants to run Bash" in ask.inner_text()
    assert "drop table x" in ask.inner_text() and "hunter2" not in ask.inner_text()
    screenshot(page, "board-tool-approval.png", tmp_path)

    ask.locator("[data-tool-decision=allow_once]").click()

    ask.wait_for(state="detached", timeout=10_000)
    row = ToolApproval.objects.get(pk=asked.id)
    assert (row.state, row.decision, row.decided_by) == ("allowed", "allow_once", "ada")
