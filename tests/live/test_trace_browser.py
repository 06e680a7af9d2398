"""The trace view, in a real browser: a task worked twice (its first run failed at a
command) shows both runs' steps on a waterfall with the failing step marked, a
step's click downloads its run's log, and a step written while a second browser
watches appears there within a second."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from board import store
from board.store import steps as steps_store
from core import registry
from core.runlogs import RunLog
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, screenshot
from tests.live.test_board_browser import WIDE, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator

FIRST = [
    {"kind": "model_turn", "name": "model", "tokens_in": 1200, "tokens_out": 30,
     "duration_ms": 400},
    {"kind": "file_change", "name": "Write", "arguments": {"file_path": "a.txt"},
     "duration_ms": 20},
    {"kind": "command", "name": "Bash", "status": "error", "arguments": {"command": "pytest -q"},
     "detail": "exit code 1: 2 failed", "duration_ms": 900},
]  # fmt: skip
SECOND = [
    {
        "kind": "model_turn",
        "name": "model",
        "tokens_in": 1500,
        "tokens_out": 40,
        "duration_ms": 300,
    },
    {"kind": "file_change", "name": "Edit", "arguments": {"file_path": "a.txt"}, "duration_ms": 15},
]


def two_attempts(state_dir: Path) -> tuple[str, int]:
    """A task whose first run failed at a command and whose second is running; the
    second run's execution id."""
    registry.create_agent(id="tracer", display_name="Tracer", team="default", runtime="command")
    task = store.create_task(
        title="Fix the failing tests", file_mutating=False, max_attempts=3
    ).task
    runs = []
    for steps in (FIRST, SECOND):
        claimed = store.claim(task.id, "tracer")
        assert claimed.ok, claimed
        run = store.open_execution(task.id, claimed.ticket, runtime="command")
        log = RunLog(task.team_id, task.id, run.id)
        log.write("stdout", f"run {run.id} printed this")
        log.close()
        steps_store.record_steps(run.id, steps)
        runs.append(run.id)
        if steps is FIRST:
            store.close_execution(run.id, "failed", error="exit code 1: 2 failed", exit_code=1)
            store.fail(task.id, "2 tests failed", ticket=claimed.ticket)
    return task.id, runs[-1]


@pytest.mark.timing
def test_the_trace_marks_the_failing_step_and_a_second_browser_sees_a_new_step_live(
    daphne, operator, state_dir, tmp_path, browser
):
    task_id, running = two_attempts(state_dir)
    base = daphne()
    first = open_board(browser, base, WIDE, f"/board/?task={task_id}")
    second = open_board(browser, base, WIDE, f"/board/?task={task_id}")
    for page in (first, second):
        page.locator("#trace .trace-run").nth(1).wait_for(timeout=10_000)
    runs = first.locator("#trace .trace-run")
    assert runs.count() == 2
    assert "run #1" in runs.nth(0).inner_text() and "failed" in runs.nth(0).inner_text()
    assert "run #2" in runs.nth(1).inner_text() and "running" in runs.nth(1).inner_text()
    steps = first.locator("#trace .trace-step")
    assert [steps.nth(i).get_attribute("data-status") for i in range(steps.count())] == [
        "ok", "ok", "error", "ok", "ok",
    ]  # fmt: skip
    failing = first.locator("#trace .trace-step.failed")
    assert failing.count() == 1
    assert "✗" in failing.inner_text() and "Bash" in failing.inner_text()
    assert "1 failed" in first.locator("#trace-summary").inner_text().lower()
    screenshot(first, "trace-view.png", tmp_path, full_page=True)

    # The run's log, one click from its step.
    with first.expect_download() as download:
        failing.locator("a").click()
    assert "printed this" in Path(download.value.path()).read_text()

    # A step the running run reports reaches the second browser within a second.
    before = second.locator("#trace .trace-step").count()
    written = time.monotonic()
    steps_store.record_steps(running, [{"kind": "command", "name": "pytest -q"}])
    second.locator("#trace .trace-step").nth(before).wait_for(timeout=5_000)
    took = time.monotonic() - written
    assert took < 1.0, f"the new step showed after {took:.2f} s"
    assert "pytest -q" in second.locator("#trace .trace-step").nth(before).inner_text()
