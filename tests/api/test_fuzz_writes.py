"""A property run over every write endpoint (issue 22): bodies built from each
endpoint's own field names with unicode edge cases, NULs, lone surrogates, huge and
deeply nested values and non-JSON bytes. Not one answer is a 5xx, every error body
under /api/ is the JSON envelope, and afterwards the team's task list, its event
replay and the admin's task list still answer 200. Runs on whichever database the
suite runs on (SQLite, and PostgreSQL with CLAWBOO_TEST_DATABASE_URL)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from board import store
from core import registry

pytestmark = pytest.mark.django_db

TASK = "fuzz-task"
OTHER = "fuzz-other"

# (method, path, the fields the endpoint knows)
WRITES: list[tuple[str, str, tuple[str, ...]]] = [
    ("post", "/api/board/tasks", ("title", "description", "team", "status", "priority", "labels",
     "metadata", "input", "parent_task_id", "file_mutating", "max_attempts", "id", "depends_on",
     "created_by_agent_id", "goal", "context")),
    ("patch", f"/api/board/tasks/{TASK}", ("title", "description", "priority", "labels",
     "metadata", "assignee_agent_id")),
    ("post", f"/api/board/tasks/{TASK}/transition", ("to", "human_override")),
    ("post", f"/api/board/tasks/{TASK}/claim", ("agent_id", "runtime", "lease_ms")),
    ("post", "/api/board/claim-next", ("agent_id", "runtime", "dispatcher", "label", "team",
     "lease_ms")),
    ("post", f"/api/board/tasks/{TASK}/heartbeat", ("ticket", "lease_ms")),
    ("post", f"/api/board/tasks/{TASK}/release", ("ticket",)),
    ("post", f"/api/board/tasks/{TASK}/complete", ("output", "ticket", "if_allowed",
     "refuse_when_parked", "human_override")),
    ("post", f"/api/board/tasks/{TASK}/fail", ("error", "ticket", "if_allowed",
     "refuse_when_parked")),
    ("post", f"/api/board/tasks/{TASK}/verdict", ("verdict", "evidence")),
    ("post", f"/api/board/tasks/{TASK}/deps", ("depends_on",)),
    ("delete", f"/api/board/tasks/{TASK}/deps/{OTHER}", ()),
    ("post", f"/api/board/tasks/{TASK}/cancel-dependents", ()),
    ("post", f"/api/board/tasks/{TASK}/comments", ("body", "author")),
    ("post", f"/api/board/tasks/{TASK}/workspace", ("repo_path", "base_ref", "base_sha")),
    ("post", f"/api/board/tasks/{TASK}/workspace/handoff", ("runtime", "done", "next")),
    ("post", "/api/board/reconcile", ("pass",)),
    ("post", "/api/teams", ("id", "name")),
    ("post", "/api/teams/default/chat", ("body",)),
    ("post", "/api/agents", ("id", "display_name", "team", "runtime", "participant_kind",
     "settings", "owner")),
    ("patch", "/api/agents/fuzz-bot", ("display_name", "team", "runtime", "settings", "owner")),
    ("post", "/api/routines", ("agent_id", "team", "cron_spec", "timezone", "task_template",
     "catch_up")),
    ("post", "/api/schedules", ("source", "agent_id", "team", "cron_spec", "timezone")),
    ("post", "/api/worktrees/gc", ("max_age_hours", "keep")),
]  # fmt: skip

EDGE_TEXT = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud83d",
    "\udfff",
    "x\ud800y",
    "\u202e\u200b\ufeff",
    "😀",
    "ǅ\u0301",
    "../../etc/passwd",
    "todo",
    "done",
    "fuzz-bot",
    TASK,
    "default",
    "x" * 70_000,
    "'; DROP TABLE tasks; --",
    "0 * * * *",
    "Europe/" + "x" * 300,
]
text = st.one_of(st.sampled_from(EDGE_TEXT), st.text(max_size=40))
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30]),
)
leaves = st.one_of(st.none(), st.booleans(), numbers, text)
values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(text, children, max_size=4)
    ),
    max_leaves=12,
)


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


RAW = st.sampled_from(
    [
        b"",
        b"null",
        b"[]",
        b'"just a string"',
        b"{",
        b'{"x": NaN}',
        b'{"x": -Infinity}',
        b'{"x": 1e999}',
        b"\xff\xfe\x00",
        deep(50_000).encode(),
        ('{"metadata": ' + deep(64) + "}").encode(),
        b'{"title": "' + b"\\u0000" + b'"}',
        b'{"title": "' + b"\\ud83d" + b'"}',
    ]
)


# A body each endpoint accepts, so a run also reaches past the first check: one or
# two of its fields are then replaced by edge values.
VALID: dict[str, dict[str, Any]] = {
    "/api/board/tasks": {"title": "t"},
    "/transition": {"to": "backlog"},
    "/claim": {"agent_id": "fuzz-bot"},
    "/api/board/claim-next": {"agent_id": "fuzz-bot"},
    "/fail": {"error": "x"},
    "/verdict": {"verdict": "pass"},
    "/deps": {"depends_on": OTHER},
    "/comments": {"body": "hi"},
    "/api/teams": {"id": "fz", "name": "Fz"},
    "/chat": {"body": "hi"},
    "/api/agents": {"id": "fz", "display_name": "F", "team": "default", "runtime": "human"},
    "/api/routines": {"agent_id": "fuzz-bot", "team": "default", "cron_spec": "0 * * * *"},
}


def bodies(path: str, fields: tuple[str, ...]) -> st.SearchStrategy[Any]:
    known = st.sampled_from(fields) if fields else text
    anything = st.dictionaries(st.one_of(known, known, text), values, max_size=5)
    base = next((body for end, body in VALID.items() if path.endswith(end)), None)
    if base is None or not fields:
        return anything
    edits = st.dictionaries(known, values, min_size=1, max_size=2)
    return st.one_of(anything, edits.map(lambda change: {**base, **change}))


@pytest.fixture
def client(db):
    from django.core.cache import cache

    from tests.api.conftest import make_client

    cache.clear()
    api = make_client("fuzzer")
    registry.create_agent(
        id="fuzz-bot", display_name="F", team="default", runtime="human", owner=api.user
    )
    store.create_task(title="target", id=TASK)
    store.create_task(title="other", id=OTHER)
    from django.contrib.auth import get_user_model
    from django.test import Client

    api.admin = Client()
    api.admin.force_login(get_user_model().objects.create_superuser("fuzz-op", "f@x", "pw"))
    return api


def check(response: Any) -> None:
    assert response.status_code < 500, response.content[:400]
    if response.status_code >= 400:
        assert response["Content-Type"].startswith("application/json"), response.content[:200]
        body = response.json()
        assert isinstance(body.get("error"), str) and isinstance(body.get("detail"), str)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(data=st.data())
def test_no_write_endpoint_answers_5xx_or_a_non_json_error(client, data):
    from django.core.cache import cache

    cache.clear()  # the rate limit is not what is under test
    method, path, fields = data.draw(st.sampled_from(WRITES), label="endpoint")
    if data.draw(st.integers(0, 5), label="raw?") == 0:
        payload: bytes = data.draw(RAW, label="raw body")
    else:
        payload = json.dumps(data.draw(bodies(path, fields), label="body")).encode()
    headers = {}
    if data.draw(st.booleans(), label="idempotent?"):
        headers["HTTP_IDEMPOTENCY_KEY"] = data.draw(text, label="key")[:300]
    response = client.generic(
        method.upper(), path, payload, content_type="application/json", **headers
    )
    check(response)
    # The board stays readable after every single write, not only at the end.
    assert client.get("/api/board/tasks?team=default&limit=500").status_code == 200
    assert client.get("/api/teams/default/events?since=0").status_code == 200
    if response.status_code < 300:  # something was written: the admin must render it
        assert client.admin.get("/admin/board/task/").status_code == 200
        assert client.admin.get(f"/admin/board/task/{TASK}/change/").status_code == 200
