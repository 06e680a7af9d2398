"""An execution's number in a path is ASCII digits a BIGINT holds; anything else
names no execution (404, or the body's own 400 first), never a 500. ``str.isdigit``
took ``²`` (which ``int`` refuses), ``١`` (Arabic-Indic one, which ``int`` reads as 1)
and 5,000 digits (past ``int``'s limit): a remote worker's log report answered 500."""

from __future__ import annotations

import pytest

from board import store
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db

ODD = ["²", "١", "9" * 5000, "9" * 19, "-1", " 1"]
ROUTES = ("log", "steps", "usage", "close", "stalled")


@pytest.mark.parametrize("number", ODD, ids=lambda n: f"{n[:3]!r}x{len(n)}")
def test_an_execution_number_that_is_not_ascii_digits_names_no_execution(number):
    api = make_client("ada")
    api.raise_request_exception = False
    task = store.create_task(title="t").task
    # Each route's own body, so the path's number is what is judged.
    bodies = [
        {"ticket": "x"},
        {"ticket": "x", "lines": ["a"], "offset": 0},
        {"ticket": "x", "steps": []},
        {"ticket": "x", "silent_s": 1},
    ]
    for route in ROUTES:
        url = f"/api/board/tasks/{task.id}/executions/{number}/{route}"
        answers = [api.get(url)] + [api.post(url, body, format="json") for body in bodies]
        for answer in answers:
            assert answer.status_code in (400, 404, 405, 409), (route, answer.content[:200])
            if answer.status_code == 404:
                assert answer.json()["error"] == "not_found"
