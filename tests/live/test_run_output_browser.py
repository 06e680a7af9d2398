"""Watching a run live, in a real browser: a ``command`` agent printing a line every
200 ms shows its lines on the open task's detail while it runs, and the full log
downloaded afterwards is exactly what it printed."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from board import store
from core import registry
from executor.runner import Executor
from tests.live import test_board_browser
from tests.live.browsing import CHROMIUM, eventually
from tests.live.test_board_browser import WIDE, open_board

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
operator = test_board_browser.operator
LINES = 15
TICKER = (
    "import sys, time\n"
    f"for i in range({LINES}):\n"
    "    print(f'line {i} at {time.time():.3f}', flush=True)\n"
    "    time.sleep(0.2)\n"
)


@pytest.mark.timing
def test_a_running_agents_lines_stream_to_the_open_card_and_its_log_downloads_whole(
    daphne,
    operator,
    state_dir,
    browser,
):
    registry.create_agent(
        id="ticker",
        display_name="Ticker",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", TICKER]},
    )
    task = store.create_task(title="Tick", file_mutating=False).task
    base = daphne()
    page = open_board(browser, base, WIDE, f"/board/?task={task.id}")
    page.locator("#detail-title").wait_for()
    reports = []
    worker = threading.Thread(target=lambda: reports.append(Executor("ticker").work_once()))
    worker.start()
    try:
        log = page.locator("#run-log")
        log.filter(has_text="line 0 at").wait_for(timeout=10_000)
        seen_at = time.time()
        first = log.inner_text().splitlines()[0]
        printed_at = float(first.rsplit(" ", 1)[1])
        assert seen_at - printed_at < 1.0, f"first line after {seen_at - printed_at:.2f} s"
        # While it runs, more lines arrive on the open card.
        log.filter(has_text="line 3 at").wait_for(timeout=3_000)
        assert worker.is_alive(), "the run was over before its lines were shown"
    finally:
        worker.join(timeout=30)
    assert reports and reports[0].execution_id is not None
    execution = reports[0].execution_id
    log.filter(has_text=f"line {LINES - 1} at").wait_for(timeout=3_000)

    response = page.request.get(f"{base}/api/board/tasks/{task.id}/executions/{execution}/log")
    assert response.status == 200
    text = response.text()
    lines = text.splitlines()
    assert [line.rsplit(" at ", 1)[0] for line in lines] == [f"line {i}" for i in range(LINES)]
    assert text == log.inner_text() + ("" if log.inner_text().endswith("\n") else "\n")
    eventually(lambda: store.get_task(task.id).status != "in_progress", "the run settled")
