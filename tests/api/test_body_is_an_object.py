"""A write's body is a JSON object or nothing at all: a literal ``null`` (or any other
non-object) is a wrong type, ``400 validation_error`` on ``body``, and writes nothing
(API.md). It used to read as an empty body. An absent body still works where the
operation needs none."""

from __future__ import annotations

import pytest

from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db

NOT_OBJECTS = ["null", "[]", '"resume"', "3", "true"]


def refused_as_no_object(answer) -> None:
    assert answer.status_code == 400, answer.content[:300]
    body = answer.json()
    assert (body["error"], body["field"]) == ("validation_error", "body")


@pytest.mark.parametrize("raw", NOT_OBJECTS)
def test_a_body_that_is_no_json_object_is_refused_and_writes_nothing(api, staff_api, agent, raw):
    task = api.post("/api/board/tasks", {"title": "t"}, format="json").json()
    writes = [
        (api, f"/api/agents/{agent.id}/pause"),
        (api, f"/api/agents/{agent.id}/resume"),
        (api, "/api/board/tasks"),
        (api, f"/api/board/tasks/{task['id']}/comments"),
        (staff_api, "/api/worktrees/gc"),
    ]
    before = fingerprint()
    for client, path in writes:
        answer = client.post(path, raw, content_type="application/json")
        refused_as_no_object(answer)
    assert fingerprint() == before


def test_an_absent_body_still_works_where_none_is_needed(api, staff_api, agent):
    for path in (f"/api/agents/{agent.id}/pause", f"/api/agents/{agent.id}/resume"):
        for client_kwargs in ({}, {"content_type": "application/json"}):
            answer = api.post(path, **client_kwargs)
            assert answer.status_code == 200, (path, answer.content[:300])
    assert staff_api.post("/api/worktrees/gc").status_code == 200
