"""Input that cannot be stored is refused before anything is written, on both
databases (issue 22): every refusal is the JSON envelope, and the team's task list,
its event replay and the admin's task list still answer 200 afterwards."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from board import store
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db

LONE = "\ud83d"  # the first half of a UTF-16 pair, alone


def raw_post(client, path: str, text: str | bytes, **headers):
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return client.generic("POST", path, data, content_type="application/json", **headers)


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    body = response.json()
    assert body["error"] == code, body
    return body


def board_still_reads(api) -> None:
    from django.contrib.auth import get_user_model

    assert api.get("/api/board/tasks?team=default").status_code == 200
    replay = api.get("/api/teams/default/events?since=0")
    assert replay.status_code == 200
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("op-check", "o@x", "pw"))
    assert admin.get("/admin/board/task/").status_code == 200


BAD_CREATES = {
    "lone surrogate in labels": {"title": "t", "labels": [LONE]},
    "lone surrogate in metadata": {"title": "t", "metadata": {"note": "a" + LONE}},
    "lone surrogate in a metadata key": {"title": "t", "metadata": {LONE: 1}},
    "lone surrogate in the title": {"title": "x" + LONE},
    "NUL in the title": {"title": "a\x00b"},
    "NUL in metadata": {"title": "t", "metadata": {"k": "\x00"}},
    "NUL in input": {"title": "t", "input": ["\x00"]},
    "NUL in a label": {"title": "t", "labels": ["a\x00"]},
    "nesting 40 deep": {"title": "t", "metadata": json.loads('{"a":' * 40 + "1" + "}" * 40)},
}


@pytest.mark.parametrize("case", list(BAD_CREATES))
def test_unstorable_values_are_400_naming_the_field_and_write_nothing(api, unchanged, case):
    with unchanged():
        body = refused(
            api.post("/api/board/tasks", BAD_CREATES[case], format="json"), 400, "validation_error"
        )
    assert body["field"].split(".")[0].split("[")[0] in {"labels", "metadata", "title", "input"}
    board_still_reads(api)


RAW_BODIES = {
    "nesting 100,000 deep": '{"title": "t", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "NaN": '{"title": "t", "metadata": {"x": NaN}}',
    "Infinity": '{"title": "t", "priority": Infinity}',
    "a float that overflows": '{"title": "t", "metadata": {"x": 1e400}}',
    "an integer of 5,000 digits": '{"title": "t", "metadata": {"x": ' + "9" * 5000 + "}}",
    "invalid UTF-8": b'{"title": "\xff\xfe"}',
    "not JSON": "title=t",
}


@pytest.mark.parametrize("case", list(RAW_BODIES))
def test_bodies_no_database_could_hold_are_400_json(api, unchanged, case):
    with unchanged():
        refused(raw_post(api, "/api/board/tasks", RAW_BODIES[case]), 400, "validation_error")
    board_still_reads(api)


def test_every_write_path_refuses_a_lone_surrogate(api, agent, unchanged):
    task = store.create_task(title="t").task
    ticket = store.claim(task.id, "ada-bot").ticket
    writes = [
        ("post", f"/api/board/tasks/{task.id}/complete", {"ticket": ticket, "output": LONE}),
        ("post", f"/api/board/tasks/{task.id}/fail", {"ticket": ticket, "error": LONE}),
        ("post", f"/api/board/tasks/{task.id}/comments", {"body": LONE}),
        ("post", f"/api/board/tasks/{task.id}/verdict", {"verdict": "pass", "evidence": LONE}),
        ("patch", f"/api/board/tasks/{task.id}", {"labels": [LONE]}),
        ("post", "/api/teams", {"id": "t1", "name": LONE}),
        ("post", "/api/teams/default/chat", {"body": LONE}),
        (
            "post",
            "/api/agents",
            {"id": "h", "display_name": LONE, "team": "default", "runtime": "human"},
        ),
        ("patch", "/api/agents/ada-bot", {"display_name": "x\x00"}),
        (
            "post",
            "/api/routines",
            {
                "agent_id": "ada-bot",
                "team": "default",
                "cron_spec": "0 * * * *",
                "task_template": {"title": LONE},
            },
        ),
    ]
    with unchanged():
        for method, path, body in writes:
            refused(getattr(api, method)(path, body, format="json"), 400, "validation_error")
    board_still_reads(api)


def test_a_body_over_the_limit_is_a_json_413_before_it_is_read(api, settings, unchanged):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    big = json.dumps({"title": "t", "description": "x" * 2000})
    with unchanged():
        body = refused(raw_post(api, "/api/board/tasks", big), 413, "payload_too_large")
        # Also with an Idempotency-Key, whose hash once read the body first (HTML 400).
        refused(
            raw_post(api, "/api/board/tasks", big, HTTP_IDEMPOTENCY_KEY="k"),
            413,
            "payload_too_large",
        )
    assert body["limit"] == 1024


def test_a_body_with_a_content_coding_is_415_and_never_read_as_plain(api, unchanged):
    """The API reads no content coding: a body sent ``Content-Encoding: gzip`` (or
    any coding) is refused ``415 unsupported_media_type`` before it is read, never
    parsed as if it were plain JSON -- whether it is really compressed or not."""
    import gzip

    plain = json.dumps({"title": "coded"}).encode()
    with unchanged():
        for coding, data in (
            ("gzip", plain),  # says gzip, reads as JSON: taken as plain, it wrote a task
            ("gzip", gzip.compress(plain)),
            ("br", plain),
            ("deflate, gzip", plain),
            ("x-anything", plain),
        ):
            answer = raw_post(api, "/api/board/tasks", data, HTTP_CONTENT_ENCODING=coding)
            body = refused(answer, 415, "unsupported_media_type")
            assert "Content-Encoding" in body["detail"], body
    named = raw_post(api, "/api/board/tasks", plain, HTTP_CONTENT_ENCODING="identity")
    assert named.status_code == 201, named.content[:200]


def test_forged_cursors_and_unstorable_query_strings_are_400(api, unchanged):
    store.create_task(title="t")
    forged = [
        base64.b64encode(b"p=abc").decode(),
        base64.b64encode(b"p=1e9&o=1").decode(),
        base64.b64encode(b"p=\x00").decode(),
        "!!!not-base64!!!",
        "A" * 5000,
    ]
    with unchanged():
        for cursor in forged:
            refused(api.get(f"/api/board/tasks?cursor={cursor}"), 400, "validation_error")
        refused(api.get("/api/board/tasks?label=%00"), 400, "validation_error")
        refused(api.get("/api/board/tasks/a%00b"), 400, "validation_error")
        refused(
            api.post("/api/board/tasks/a%00b/claim", {"agent_id": "x"}, format="json"),
            400,
            "validation_error",
        )
    first = api.get("/api/board/tasks?limit=1")
    assert first.status_code == 200


def test_bad_timezones_are_400(api, agent, unchanged):
    body = {"agent_id": "ada-bot", "team": "default", "cron_spec": "0 * * * *"}
    with unchanged():
        for zone in ("a" * 300, "Europe", "zone.tab", "../../etc/passwd", "Mars/Olympus"):
            refused(
                api.post("/api/routines", {**body, "timezone": zone}, format="json"),
                400,
                "validation_error",
            )


def test_a_nul_in_a_page_path_or_query_is_400_not_a_server_error(db, unchanged):
    """Outside /api/ too: the admin's filters and object ids reach a query, which
    PostgreSQL refuses for a NUL (a 500 there); refused first, as the API's door does."""
    from django.contrib.auth import get_user_model

    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("op-nul", "o@x", "pw"))
    with unchanged():
        for path in (
            "/admin/board/task/?status__exact=%00",
            "/admin/board/task/%00/change/",
            "/admin/board/task/?q=a%00b",
        ):
            response = admin.get(path)
            assert response.status_code == 400, (path, response.status_code)
    assert admin.get("/admin/board/task/?q=%F0%9F%98%80").status_code == 200


def test_an_error_asked_for_as_a_web_page_is_still_the_json_envelope(db, unchanged):
    """A browser sends ``Accept: text/html``: a success may render as the browsable
    API's page, an error is the envelope, and an ``Accept`` the API cannot satisfy is
    ``406 not_acceptable``, named like every other refusal."""
    api = make_client("html")
    page = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,*/*;q=0.8"}
    with unchanged():
        refused(api.get("/api/board/tasks/nope", **page), 404, "not_found")
        refused(api.post("/api/board/tasks", [], format="json", **page), 400, "validation_error")
        refused(api.delete("/api/board/tasks", **page), 405, "method_not_allowed")
        refused(Client().get("/api/board/tasks", **page), 401, "unauthenticated")
        body = refused(
            api.get("/api/board/tasks", HTTP_ACCEPT="application/xml"), 406, "not_acceptable"
        )
        assert "Accept" in body["detail"]
    assert api.get("/api/whoami", **page)["Content-Type"].startswith("text/html")


def test_a_format_the_api_does_not_offer_is_406_not_acceptable_not_a_missing_path(db, unchanged):
    """``?format=`` picks a renderer as ``Accept`` does: one the API has not (DRF's
    404, as if the path did not exist) is refused as an unsatisfiable ``Accept`` is,
    reads and writes alike, before the body is read."""
    api = make_client("fmt")
    with unchanged():
        for answer in (
            api.get("/api/board/tasks?format=xyz"),
            api.get("/api/board/tasks/nope?format=xml"),
            api.post("/api/board/tasks?format=yaml", {"title": "t"}, format="json"),
        ):
            body = refused(answer, 406, "not_acceptable")
            assert "format" in body["detail"] and "json" in body["detail"], body
    assert api.get("/api/board/tasks?format=json").status_code == 200
    assert api.get("/api/whoami?format=api")["Content-Type"].startswith("text/html")


def test_the_schemas_refusals_are_the_json_envelope_not_yaml(db, unchanged):
    """The OpenAPI schema is written in YAML or JSON; its refusals are the envelope,
    in JSON, as every other view's are -- each format it offers named once."""
    with unchanged():
        body = refused(Client().get("/api/schema/?format=openapi"), 406, "not_acceptable")
        assert body["detail"].endswith(": yaml, json"), body
        refused(Client().get("/api/schema/", HTTP_ACCEPT="application/xml"), 406, "not_acceptable")
    assert Client().get("/api/schema/?format=yaml").status_code == 200


def test_every_error_under_api_is_the_json_envelope(db, unchanged):
    user = make_client("sess").user
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(user)
    with unchanged():
        refused(browser.post("/api/nowhere", {"a": 1}), 404, "not_found")
        refused(browser.post("/api/board/tasks/x/nowhere/else", {}), 404, "not_found")
        body = refused(
            browser.post(
                "/api/board/tasks", json.dumps({"title": "t"}), content_type="application/json"
            ),
            403,
            "forbidden",
        )
        assert "CSRF" in body["detail"]
        refused(browser.get("/api/whoami", HTTP_AUTHORIZATION="Token \x7f"), 401, "unauthenticated")
    api = make_client("idem")
    with unchanged():
        refused(api.put("/api/board/tasks", {}, format="json"), 405, "method_not_allowed")
        refused(
            api.post(
                "/api/board/tasks", {"title": "t"}, format="json", HTTP_IDEMPOTENCY_KEY="k\x01"
            ),
            400,
            "validation_error",
        )


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("title=t", "The request body is not valid JSON: expected a value at line 1, column 1."),
        (
            '{"title": "t",\n }',
            "The request body is not valid JSON: expected a name in double quotes"
            " at line 2, column 2.",
        ),
        (
            '{"title": "t"} x',
            "The request body is not valid JSON: unexpected text after the"
            " end of the JSON at line 1, column 16.",
        ),
    ],
)
def test_a_malformed_body_is_refused_in_words_a_person_reads(api, unchanged, text, detail):
    # It read "body: JSON parse error - Expecting value: line 1 column 1 (char 0)".
    with unchanged():
        body = refused(raw_post(api, "/api/board/tasks", text), 400, "validation_error")
    assert body["detail"] == detail
    assert body["field"] == "body"
