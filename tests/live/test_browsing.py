"""The browser fixtures (``tests/live/browsing.py``): one Chromium serves a whole
module, each test's pages start with no cookies and are closed when it ends, the ORM
stays usable (teardown flushes included) while Playwright's loop runs, and the next
module runs with neither the loop nor the permission."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.browsing import CHROMIUM

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed")
ROOT = Path(__file__).resolve().parents[2]

# pytest-django's flush at the end of a transactional test is a guarded ORM call made
# after the test's own monkeypatch is undone: ``guarded`` stands in for it.
BROWSER_MODULE = """
import asyncio

import pytest
from django.utils.asyncio import async_unsafe

seen = []


@async_unsafe
def guarded():
    return "ran"


@pytest.fixture
def flush_at_teardown():
    yield
    assert guarded() == "ran"


def test_a_page_leaves_a_cookie(browser):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.context.add_cookies([{"name": "left", "value": "behind", "url": "http://127.0.0.1/"}])
    assert page.viewport_size == {"width": 390, "height": 844}
    seen.append(browser)


def test_the_next_test_has_the_same_chromium_and_none_of_it(flush_at_teardown, browser):
    assert browser is seen[0]
    assert browser.contexts == []
    page = browser.new_page()
    assert page.context.cookies() == []
    asyncio.get_running_loop()  # Playwright's, which is why the guard needs telling
    assert guarded() == "ran"
"""

NEXT_MODULE = """
import asyncio
import os

import pytest


def test_the_next_module_runs_without_the_loop_or_the_permission():
    assert "DJANGO_ALLOW_ASYNC_UNSAFE" not in os.environ
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
"""


def test_one_chromium_serves_a_module_and_each_test_starts_clean(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    pytester.makeconftest('pytest_plugins = ["tests.live.browsing"]')
    pytester.makepyfile(test_a_browser=BROWSER_MODULE, test_b_after=NEXT_MODULE)
    result = pytester.runpytest_subprocess("-p", "no:django", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
