"""One test per board path and per error code of API.md, each refusal writing nothing."""

from __future__ import annotations

import pytest

from board import store

pytestmark = pytest.mark.django_db


def create(api, **body):
    response = api.post("/api/board/tasks", {"title": "Fix login", **body}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def claim(api, task_id, agent_id="ada-bot"):
    response = api.post(f"/api/board/tasks/{task_id}/claim", {"agent_id": agent_id}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def test_anonymous_calls_are_401_unauthenticated(unchanged):
    from rest_framework.test import APIClient

    with unchanged():
        response = APIClient().post("/api/board/tasks", {"title": "x"}, format="json")
    assert response.status_code == 401
    assert response.json()["error"] == "unauthenticated"


def test_create_returns_the_task_body(api):
    body = create(api, labels=["ui"], priority=3, description="d")
    for field in (
        "id",
        "title",
        "description",
        "team",
        "status",
        "priority",
        "labels",
        "metadata",
        "assignee_agent_id",
        "assignee_runtime",
        "parent_task_id",
        "attempts",
        "max_attempts",
        "abandonments",
        "lease_until",
        "worktree_ref",
        "branch_ref",
        "scheduled_by",
        "file_mutating",
        "verification",
        "error",
        "feedback",
        "output",
        "revision",
        "depends_on",
        "created_at",
        "updated_at",
    ):
        assert field in body
    assert body["status"] == "todo" and body["team"] == "default"


def test_create_with_a_used_client_id_is_409_unless_identical(api, unchanged):
    first = create(api, id="task-1")
    again = api.post("/api/board/tasks", {"title": "Fix login", "id": "task-1"}, format="json")
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    with unchanged():
        clash = api.post("/api/board/tasks", {"title": "Other", "id": "task-1"}, format="json")
    assert clash.status_code == 409 and clash.json()["error"] == "conflict"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "x" * 501}, "title"),
        ({"title": ""}, "title"),
        ({"description": "d"}, "title"),
        ({"title": "t", "priority": "high"}, "priority"),
        ({"title": "t", "priority": -10_000_000}, "priority"),
        ({"title": "t", "labels": "ui"}, "labels"),
        ({"title": "t", "bogus": 1}, "bogus"),
        ({"title": "t", "parent_task_id": "missing"}, "parent_task_id"),
        ({"title": "t", "depends_on": ["missing"]}, "depends_on"),
        ({"title": "t", "status": "done"}, "status"),
        ({"title": "t", "id": "-bad id"}, "id"),
        ({"title": "t", "max_attempts": 0}, "max_attempts"),
        ({"title": "t", "description": "x" * 1_000_000}, "description"),
    ],
)
def test_bad_create_input_is_400_naming_the_field(api, unchanged, body, field):
    with unchanged():
        response = api.post("/api/board/tasks", body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == "validation_error"
    assert response.json()["field"] == field


def test_malformed_json_is_400(api, unchanged):
    with unchanged():
        response = api.post("/api/board/tasks", data="{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "validation_error"
    assert response.json()["field"] == "body"


def test_a_json_array_body_is_400(api, unchanged):
    with unchanged():
        response = api.post("/api/board/tasks", [1, 2], format="json")
    assert response.status_code == 400 and response.json()["field"] == "body"


def test_list_filters_and_paginates(api):
    a = create(api, labels=["ui"], priority=1)
    b = create(api, priority=5)
    create(api, status="backlog")
    listed = api.get("/api/board/tasks?status=todo").json()
    assert [t["id"] for t in listed["results"]] == [b["id"], a["id"]]
    assert api.get("/api/board/tasks?label=ui").json()["results"][0]["id"] == a["id"]
    page = api.get("/api/board/tasks?limit=1").json()
    assert len(page["results"]) == 1 and page["next"]
    second = api.get(page["next"]).json()
    assert len(second["results"]) == 1
    ready = api.get("/api/board/tasks?ready=true").json()["results"]
    assert {t["id"] for t in ready} == {a["id"], b["id"]}


def test_get_unknown_task_is_404(api):
    response = api.get("/api/board/tasks/nope")
    assert response.status_code == 404 and response.json()["error"] == "not_found"


def test_other_teams_tasks_are_invisible(api, unchanged):
    from core import registry

    registry.create_team("red", "Red")
    task = store.create_task(title="secret", team="red").task
    assert api.get(f"/api/board/tasks/{task.id}").status_code == 404
    assert api.get("/api/board/tasks").json()["results"] == []
    with unchanged():
        response = api.post("/api/board/tasks", {"title": "x", "team": "red"}, format="json")
    # A team the caller is not in answers like one that does not exist.
    assert response.status_code == 400 and response.json()["detail"] == "team: no team 'red'"


def test_patch_edits_fields_and_refuses_assignee_on_locked(api, agent, unchanged):
    task = create(api)
    patched = api.patch(
        f"/api/board/tasks/{task['id']}", {"priority": 9, "title": "New"}, format="json"
    ).json()
    assert patched["priority"] == 9 and patched["title"] == "New"
    claim(api, task["id"])
    with unchanged():
        response = api.patch(
            f"/api/board/tasks/{task['id']}", {"assignee_agent_id": "ada-bot"}, format="json"
        )
    assert response.status_code == 200  # same assignee: no change
    from core import registry

    registry.create_agent(
        id="bob", display_name="Bob", team="default", runtime="codex", owner=api.user
    )
    with unchanged():
        response = api.patch(
            f"/api/board/tasks/{task['id']}", {"assignee_agent_id": "bob"}, format="json"
        )
    assert response.status_code == 409 and response.json()["error"] == "conflict"


def test_an_edit_that_lost_a_race_is_409_with_the_task_as_it_is_now(api, unchanged):
    task = create(api)
    seen = task["revision"]
    first = api.patch(
        f"/api/board/tasks/{task['id']}", {"title": "Mine", "if_revision": seen}, format="json"
    )
    assert first.status_code == 200 and first.json()["title"] == "Mine"
    with unchanged():
        late = api.patch(
            f"/api/board/tasks/{task['id']}",
            {"title": "Theirs", "if_revision": seen},
            format="json",
        )
    body = late.json()
    assert late.status_code == 409 and body["error"] == "conflict"
    assert body["reason"] == "stale_revision" and body["revision"] == first.json()["revision"]
    assert body["task"]["title"] == "Mine"
    again = api.patch(
        f"/api/board/tasks/{task['id']}",
        {"title": "Theirs", "if_revision": body["revision"]},
        format="json",
    )
    assert again.status_code == 200 and again.json()["title"] == "Theirs"
    with unchanged():
        bad = api.patch(f"/api/board/tasks/{task['id']}", {"if_revision": "x"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "if_revision"


def test_transition_and_illegal_transition(api, unchanged):
    task = create(api)
    moved = api.post(f"/api/board/tasks/{task['id']}/transition", {"to": "backlog"}, format="json")
    assert moved.status_code == 200 and moved.json()["status"] == "backlog"
    with unchanged():
        response = api.post(
            f"/api/board/tasks/{task['id']}/transition", {"to": "done"}, format="json"
        )
    body = response.json()
    assert response.status_code == 409 and body["error"] == "illegal_transition"
    assert body["from"] == "backlog" and body["to"] == "done"
    assert body["allowed"] == ["todo", "blocked", "cancelled"]


def test_transition_to_an_unknown_status_is_400(api, unchanged):
    task = create(api)
    with unchanged():
        response = api.post(
            f"/api/board/tasks/{task['id']}/transition", {"to": "nowhere"}, format="json"
        )
    assert response.status_code == 400 and response.json()["field"] == "to"


def test_verification_required_and_override(api, agent, unchanged):
    task = create(api)
    claim(api, task["id"])
    api.post(
        f"/api/board/tasks/{task['id']}/verdict",
        {"verdict": "fail", "evidence": "red"},
        format="json",
    )
    with unchanged():
        response = api.post(
            f"/api/board/tasks/{task['id']}/transition", {"to": "done"}, format="json"
        )
    assert response.status_code == 409 and response.json()["error"] == "verification_required"
    done = api.post(
        f"/api/board/tasks/{task['id']}/transition",
        {"to": "done", "human_override": {"by": "ada", "reason": "flaky CI"}},
        format="json",
    )
    assert done.status_code == 200 and done.json()["status"] == "done"
    comments = api.get(f"/api/board/tasks/{task['id']}/comments").json()
    assert "flaky CI" in comments[0]["body"]


def test_claim_conflict_and_not_found(api, agent, unchanged):
    task = create(api)
    claimed = claim(api, task["id"])
    assert claimed["ticket"] and claimed["task"]["status"] == "in_progress"
    with unchanged():
        again = api.post(
            f"/api/board/tasks/{task['id']}/claim", {"agent_id": "ada-bot"}, format="json"
        )
    assert again.status_code == 409 and again.json()["error"] == "conflict"
    with unchanged():
        missing = api.post("/api/board/tasks/nope/claim", {"agent_id": "ada-bot"}, format="json")
    assert missing.status_code == 404


def test_claim_with_unmet_deps_is_409(api, agent, unchanged):
    first = create(api)
    second = create(api, depends_on=[first["id"]])
    with unchanged():
        response = api.post(
            f"/api/board/tasks/{second['id']}/claim", {"agent_id": "ada-bot"}, format="json"
        )
    assert response.status_code == 409


def test_claim_by_an_unknown_agent_is_400(api, unchanged):
    task = create(api)
    with unchanged():
        response = api.post(
            f"/api/board/tasks/{task['id']}/claim", {"agent_id": "ghost"}, format="json"
        )
    assert response.status_code == 400 and response.json()["field"] == "agent_id"


def test_claim_next_and_204_when_nothing_ready(api, agent):
    low = create(api, priority=1)
    high = create(api, priority=7)
    first = api.post(
        "/api/board/claim-next", {"agent_id": "ada-bot", "dispatcher": "priority"}, format="json"
    )
    assert first.status_code == 200 and first.json()["task"]["id"] == high["id"]
    second = api.post("/api/board/claim-next", {"agent_id": "ada-bot"}, format="json")
    assert second.json()["task"]["id"] == low["id"]
    assert (
        api.post("/api/board/claim-next", {"agent_id": "ada-bot"}, format="json").status_code == 204
    )


def test_claim_next_filters_by_the_label_in_its_body(api, agent):
    create(api, priority=9)
    tagged = create(api, labels=["backend"])
    body = {"agent_id": "ada-bot", "dispatcher": "priority", "label": " backend "}
    first = api.post("/api/board/claim-next", body, format="json")
    assert first.status_code == 200 and first.json()["task"]["id"] == tagged["id"]
    assert api.post("/api/board/claim-next", body, format="json").status_code == 204


def test_heartbeat_renews_and_refuses_a_foreign_ticket(api, agent, unchanged):
    a, b = create(api), create(api)
    ticket_a = claim(api, a["id"])["ticket"]
    claim(api, b["id"])
    beat = api.post(f"/api/board/tasks/{a['id']}/heartbeat", {"ticket": ticket_a}, format="json")
    assert beat.status_code == 200 and beat.json()["lease_until"]
    response = api.post(
        f"/api/board/tasks/{b['id']}/heartbeat", {"ticket": ticket_a}, format="json"
    )
    assert response.status_code == 409 and response.json()["reason"] == "not-my-task"
    forged = api.post(f"/api/board/tasks/{a['id']}/heartbeat", {"ticket": "forged"}, format="json")
    assert forged.status_code == 400 and forged.json()["field"] == "ticket"


def test_release_returns_todo(api, agent):
    task = create(api)
    ticket = claim(api, task["id"])["ticket"]
    released = api.post(f"/api/board/tasks/{task['id']}/release", {"ticket": ticket}, format="json")
    assert released.status_code == 200
    assert released.json()["status"] == "todo" and released.json()["assignee_agent_id"] is None


def test_complete_and_fail_report_outcomes(api, agent):
    task = create(api)
    ticket = claim(api, task["id"])["ticket"]
    done = api.post(
        f"/api/board/tasks/{task['id']}/complete",
        {"output": {"pr": 1}, "ticket": ticket},
        format="json",
    ).json()
    assert done["outcome"] == "recorded" and done["task"]["status"] == "done"
    again = api.post(
        f"/api/board/tasks/{task['id']}/complete",
        {"ticket": ticket, "if_allowed": True},
        format="json",
    ).json()
    assert again == {**again, "outcome": "declined", "reason": "terminal", "status": "done"}
    soft = create(api, max_attempts=2)
    ticket = claim(api, soft["id"])["ticket"]
    failed = api.post(
        f"/api/board/tasks/{soft['id']}/fail", {"error": "boom", "ticket": ticket}, format="json"
    ).json()
    assert failed["outcome"] == "recorded" and failed["task"]["status"] == "todo"
    assert failed["task"]["feedback"] == "boom"


def test_fail_without_error_is_400(api, agent, unchanged):
    task = create(api)
    claim(api, task["id"])
    with unchanged():
        response = api.post(f"/api/board/tasks/{task['id']}/fail", {}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "error"


def test_deps_link_cycle_and_unlink(api, unchanged):
    a, b = create(api), create(api)
    linked = api.post(f"/api/board/tasks/{b['id']}/deps", {"depends_on": a["id"]}, format="json")
    assert linked.status_code == 201 and linked.json()["depends_on"] == [a["id"]]
    assert (
        api.post(
            f"/api/board/tasks/{b['id']}/deps", {"depends_on": a["id"]}, format="json"
        ).status_code
        == 200
    )
    with unchanged():
        cycle = api.post(f"/api/board/tasks/{a['id']}/deps", {"depends_on": b["id"]}, format="json")
    assert cycle.status_code == 409 and cycle.json()["error"] == "cycle"
    with unchanged():
        missing = api.post(
            f"/api/board/tasks/{a['id']}/deps", {"depends_on": "nope"}, format="json"
        )
    assert missing.status_code == 404
    assert api.delete(f"/api/board/tasks/{b['id']}/deps/{a['id']}").status_code == 204
    assert store.get_task(b["id"]) and not store.depends_on_map([b["id"]])[b["id"]]


def test_cancel_dependents(api, agent):
    a = create(api)
    b = create(api, depends_on=[a["id"]])
    cancelled = api.post(f"/api/board/tasks/{a['id']}/cancel-dependents").json()["cancelled"]
    assert [t["id"] for t in cancelled] == [b["id"]]


def test_comments_and_executions(api, agent):
    task = create(api)
    posted = api.post(f"/api/board/tasks/{task['id']}/comments", {"body": "hello"}, format="json")
    assert posted.status_code == 201 and posted.json()["author"] == "ada"
    assert len(api.get(f"/api/board/tasks/{task['id']}/comments").json()) == 1
    ticket = claim(api, task["id"])["ticket"]
    store.open_execution(task["id"], ticket, runtime="command")
    executions = api.get(f"/api/board/tasks/{task['id']}/executions").json()
    assert executions[0]["status"] == "running"


def test_reconcile_is_staff_only(api, staff_api, unchanged):
    with unchanged():
        response = api.post("/api/board/reconcile", {"pass": "stale"}, format="json")
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    ok = staff_api.post("/api/board/reconcile", {"pass": "orphans"}, format="json")
    assert ok.status_code == 200 and ok.json() == {"released": []}


def test_reconcile_runs_the_lapse_pass_by_name(staff_api):
    ok = staff_api.post("/api/board/reconcile", {"pass": "lapsed"}, format="json")
    assert ok.status_code == 200 and ok.json() == {"released": []}


def test_reconcile_refuses_a_pass_that_is_not_a_name(staff_api, unchanged):
    with unchanged():
        response = staff_api.post("/api/board/reconcile", {"pass": ["orphans"]}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "pass"


def test_depth_and_children_caps_are_409(api, unchanged, monkeypatch):
    root = create(api)
    child = create(api, parent_task_id=root["id"])
    grandchild = create(api, parent_task_id=child["id"])
    with unchanged():
        deep = api.post(
            "/api/board/tasks", {"title": "t", "parent_task_id": grandchild["id"]}, format="json"
        )
    assert deep.status_code == 409 and deep.json()["error"] == "depth_exceeded"
    monkeypatch.setattr("board.ceilings.MAX_LIVE_CHILDREN", 1)
    with unchanged():
        many = api.post(
            "/api/board/tasks", {"title": "t", "parent_task_id": root["id"]}, format="json"
        )
    assert many.status_code == 409 and many.json()["error"] == "too_many_children"


def test_agent_root_creates_are_rate_limited_429(api, agent, unchanged, monkeypatch):
    monkeypatch.setattr("board.ceilings.ROOT_RATE_LIMIT", 2)
    for _ in range(2):
        create(api, created_by_agent_id="ada-bot")
    with unchanged():
        response = api.post(
            "/api/board/tasks", {"title": "t", "created_by_agent_id": "ada-bot"}, format="json"
        )
    assert response.status_code == 429 and response.json()["error"] == "rate_limited"
    create(api)  # an operator creating by hand is not capped


def test_idempotency_key_replays_and_refuses_a_different_body(api):
    headers = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    first = api.post("/api/board/tasks", {"title": "Once"}, format="json", **headers)
    again = api.post("/api/board/tasks", {"title": "Once"}, format="json", **headers)
    assert first.status_code == again.status_code == 201
    assert first.json()["id"] == again.json()["id"]
    assert store.list_tasks().count() == 1
    other = api.post("/api/board/tasks", {"title": "Twice"}, format="json", **headers)
    assert other.status_code == 409 and other.json()["error"] == "conflict"
    assert store.list_tasks().count() == 1


def test_rate_limit_answers_429(api, settings):
    from django.core.cache import cache

    cache.clear()
    settings.CLAWBOO_HTTP_RATE_LIMIT = 3
    codes = [api.get("/api/board/tasks").status_code for _ in range(4)]
    cache.clear()
    assert codes[:3] == [200, 200, 200] and codes[3] == 429


def test_unknown_api_paths_answer_in_the_error_envelope(api):
    response = api.get("/api/board/nothing-here")
    assert response.status_code == 404 and response.json()["error"] == "not_found"
