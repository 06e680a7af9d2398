"""A query parameter an endpoint does not declare in its OpenAPI schema is refused
(400, the JSON envelope naming it), not ignored into an answer that reads as filtered;
what the board's page and the ``clawboo`` CLI send is declared."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from core import registry
from core.api.query import declared
from tests.api.conftest import fingerprint

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


def test_a_misspelt_filter_is_refused_naming_it_and_what_the_list_takes(api):
    answer = api.get("/api/agents?teem=demo")
    assert answer.status_code == 400
    body = answer.json()
    assert body["error"] == "validation_error"
    assert body["field"] == "teem"
    assert body["allowed"] == ["team"]
    assert "GET /api/agents" in body["detail"] and "team" in body["detail"]


def test_the_declared_filter_filters(api, agent):
    registry.create_team("other", "Other")
    registry.create_agent(id="far", display_name="Far", team="other", runtime="command")
    answer = api.get("/api/agents?team=default")
    assert answer.status_code == 200
    assert [a["id"] for a in answer.json()] == ["ada-bot"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/board/tasks?team=default&sort=priority",
        "/api/board/columns?team=default&foo=1",
        "/api/board/counts?team=default&status=todo",
        "/api/teams?team=default",
        "/api/repositories?bogus=1",
        "/api/routines?agent=x",
        "/api/budgets?window=day",
        "/api/approvals?agent=x",
        "/api/board/tasks/nope?expand=1",
    ],
)
def test_every_read_refuses_a_parameter_it_does_not_declare(api, path):
    answer = api.get(path)
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"] == "validation_error"
    assert answer.json()["field"] == path.rsplit("&", 1)[-1].rsplit("?", 1)[-1].split("=")[0]


def test_a_write_with_an_undeclared_parameter_is_refused_and_writes_nothing(api):
    before = fingerprint()
    answer = api.post("/api/board/tasks?team=other", {"title": "t"}, format="json")
    assert answer.status_code == 400
    assert answer.json()["field"] == "team"
    assert fingerprint() == before


def test_an_anonymous_caller_is_told_to_sign_in_first(db, client):
    answer = client.get("/api/agents?teem=demo")
    assert answer.status_code == 401
    assert answer.json()["error"] == "unauthenticated"


def test_format_is_taken_everywhere_and_the_schema_view_keeps_its_own(api):
    assert api.get("/api/agents?format=json").status_code == 200
    assert api.get("/api/schema/?format=json").status_code == 200


def test_the_chat_limit_and_the_event_replay_are_declared(api):
    assert api.get("/api/teams/default/chat?limit=50").status_code == 200
    assert api.get("/api/teams/default/events?since=0").status_code == 200


# What the page and the CLI put in a query string, read from their source: every
# literal ``/api/...?name=`` and the names the board's filters and columns set.
_LITERAL = re.compile(r"/api/([a-z/${}().\-_A-Za-z]+?)\?([a-z_]+)=")


def _operation(url: str) -> str:
    """The GET operation of a literal URL: ``teams/${enc(team)}/chat`` is
    ``GET /api/teams/{team_id}/chat`` (each placeholder matches one segment)."""
    shape = re.sub(r"\$\{[^}]*\}", "{}", "/api/" + url)
    for key in declared():
        method, path = key.split(" ", 1)
        if method == "GET" and re.sub(r"\{[^}]+\}", "{}", path) == shape:
            return key
    raise AssertionError(f"no GET operation for /api/{url}")


def test_the_board_page_and_the_cli_send_only_declared_parameters():
    sources = [*sorted((ROOT / "board" / "static").rglob("*.js")), ROOT / "clawboo" / "people.py"]
    seen = 0
    for source in sources:
        for url, name in _LITERAL.findall(source.read_text()):
            assert name in declared()[_operation(url)], (source.name, url, name)
            seen += 1
    assert seen >= 8
    # Built with URLSearchParams: the filters (state.js FILTER_KEYS), team and dropped,
    # on /counts and /columns, and the columns' page sizes.
    state = (ROOT / "board" / "static" / "board" / "state.js").read_text()
    keys = re.search(r"FILTER_KEYS = \[([^\]]*)\]", state)
    assert keys is not None
    filters = {*re.findall(r'"([a-z_]+)"', keys.group(1)), "team", "dropped"}
    assert filters <= declared()["GET /api/board/counts"]
    assert filters | {"limit", "terminal_limit", "counts"} <= declared()["GET /api/board/columns"]
    # `clawboo task list` and `clawboo approvals`.
    assert {"team", "status", "assignee", "label", "limit", "ready", "approval"} <= declared()[
        "GET /api/board/tasks"
    ]
    assert {"team"} <= declared()["GET /api/approvals"]
    assert {"path"} <= declared()["GET /api/board/tasks/{task_id}/review"]


def test_every_operation_documents_the_refusal_of_an_undeclared_parameter():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            refusal = operation["responses"].get("400", {}).get("description", "")
            assert "validation_error" in refusal, (method, path)


def test_the_first_requests_at_once_after_start_all_answer(monkeypatch):
    # The board's first load after `clawboo up` asks for its columns, chat and budgets
    # at once, each in its own thread; each built the query table (the OpenAPI schema)
    # at the same time, and drf-spectacular's first look at an absent package's
    # extension (django-oauth-toolkit's) is not safe across threads: two of the three
    # answered 500 and the board said "Could not load the board".
    import threading
    import time

    from drf_spectacular import plumbing
    from drf_spectacular.contrib.django_oauth_toolkit import DjangoOAuthToolkitScheme

    from core.api import query

    monkeypatch.setattr(
        DjangoOAuthToolkitScheme,
        "target_class",
        "oauth2_provider.contrib.rest_framework.OAuth2Authentication",
    )
    real = plumbing.import_string

    def slow(path):  # the window between a thread's look and its write, made wide
        if "oauth2_provider" in str(path):
            time.sleep(0.2)
        return real(path)

    monkeypatch.setattr(plumbing, "import_string", slow)
    query._table.cache_clear()  # as at a process's start
    start = threading.Barrier(6)
    tables, schemas, errors = [], [], []

    def first_request() -> None:
        start.wait()
        try:
            tables.append(declared())
        except Exception as exc:  # noqa: BLE001 - what the request would have answered 500 with
            errors.append(exc)

    def schema_page() -> None:  # /api/docs/ opened at the same moment
        start.wait()
        try:
            schemas.append(Client().get("/api/schema/?format=json").status_code)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=first_request) for _ in range(4)]
    threads += [threading.Thread(target=schema_page) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [], errors
    assert len(tables) == 4 and all(table == tables[0] for table in tables)
    assert "GET /api/agents" in tables[0]
    assert schemas == [200, 200]
