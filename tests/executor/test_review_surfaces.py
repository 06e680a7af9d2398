"""The review loop over the API and in the admin: the same data-layer calls."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from executor.runner import Executor
from tests.api.conftest import fingerprint, make_client
from tests.fixtures.gitrepos import git
from tests.fixtures.runs import VERIFY_OK

pytestmark = pytest.mark.django_db


@pytest.fixture
def in_review(command_agent):
    command_agent("builder", "write")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().worktree == "retained"
    return store.get_task(task.id)


def test_the_review_endpoint_shows_the_work_paged_and_capped(in_review):
    api = make_client("ada")
    url = f"/api/board/tasks/{in_review.id}/review"
    body = api.get(url).json()
    assert body["diff"]["stat"]["files_changed"] == 1
    assert body["diff"]["files"][0]["path"] == "feature.txt"
    assert "+ok" in body["diff"]["files"][0]["patch"]
    assert body["verification"]["verdict"] == "pass"
    assert body["workspace"]["base_branch"] == "main"
    assert body["executions"][0]["log_tail"]
    capped = api.get(url, {"max_bytes": 5, "limit": 1}).json()["diff"]["files"][0]
    assert capped["truncated"] and len(capped["patch"]) == 5
    assert api.get(url, {"limit": 0}).status_code == 400
    assert api.get(url, {"path": "nope.txt"}).status_code == 404
    outsider = make_client("eve", teams=())
    assert outsider.get(url).status_code == 404


def test_approve_over_the_api_lands_and_names_the_reviewer(in_review, repo):
    api = make_client("ada")
    answer = api.post(f"/api/board/tasks/{in_review.id}/approve", {}, format="json")
    assert answer.status_code == 200, answer.json()
    body = answer.json()
    assert body["result"] == "landed" and body["task"]["status"] == "done"
    assert git(repo, "rev-parse", "main") == body["commit"]
    assert any(
        c.author == "ada" and "Approved by ada" in c.body for c in store.list_comments(in_review.id)
    )
    again = api.post(f"/api/board/tasks/{in_review.id}/approve", {}, format="json")
    assert again.status_code == 409 and again.json()["error"] == "illegal_transition"


def test_request_changes_over_the_api_and_its_refusals(in_review):
    api = make_client("ada")
    url = f"/api/board/tasks/{in_review.id}/request-changes"
    before = fingerprint()
    assert api.post(url, {}, format="json").status_code == 400
    assert api.post(url, {"feedback": "x", "agent_id": "ghost"}, format="json").status_code == 400
    assert fingerprint() == before
    sent = api.post(url, {"feedback": "rename it"}, format="json")
    assert sent.status_code == 200
    assert sent.json()["status"] == "in_progress" and sent.json()["feedback"] == "rename it"
    assert sent.json()["assignee_agent_id"] == "builder"
    refused = api.post(url, {"feedback": "again"}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "illegal_transition"


def test_a_transition_into_in_progress_needs_an_agent(command_agent):
    command_agent("builder", "none")
    api = make_client("ada", staff=True)  # an operator: builder is nobody else's
    task = store.create_task(title="Parked").task
    store.transition(task.id, "blocked")
    url = f"/api/board/tasks/{task.id}/transition"
    before = fingerprint()
    refused = api.post(url, {"to": "in_progress"}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "claim_required"
    assert fingerprint() == before
    moved = api.post(url, {"to": "in_progress", "agent_id": "builder"}, format="json")
    assert moved.status_code == 200 and moved.json()["assignee_agent_id"] == "builder"


def test_a_hard_fail_over_the_api_returns_the_cancelled_ids(db):
    api = make_client("ada", staff=True)  # the assignee is no registered agent: staff only
    blocker = store.create_task(title="Blocker").task
    child = store.create_task(title="Child", depends_on=[blocker.id]).task
    assert store.claim(blocker.id, "ada").ok
    answer = api.post(f"/api/board/tasks/{blocker.id}/fail", {"error": "boom"}, format="json")
    assert answer.status_code == 200 and answer.json()["cancelled"] == [child.id]


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def test_the_admin_shows_the_review_and_approves_through_the_data_layer(in_review, operator, repo):
    page = operator.get(f"/admin/board/task/{in_review.id}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "feature.txt" in html and "+ok" in html and f"clawboo/task-{in_review.id}" in html
    assert "did write" in html  # the run's log tail
    response = operator.post(
        "/admin/board/task/",
        {"action": "approve_tasks", "_selected_action": [in_review.id]},
        follow=True,
    )
    texts = [str(m) for m in response.context["messages"]]
    assert any(f"Approved {in_review.id}: landed" in t and "on main" in t for t in texts), texts
    assert store.get_task(in_review.id).status == "done"
    assert git(repo, "show", "--name-only", "--format=", "main") == "feature.txt"


def test_the_admin_requests_changes_with_feedback(in_review, operator):
    ask = operator.post(
        "/admin/board/task/", {"action": "request_changes", "_selected_action": [in_review.id]}
    )
    assert ask.status_code == 200 and b"What should change" in ask.content
    page = ask.content.decode()
    assert f"{in_review.id} — {in_review.title} (status: in_review, agent: " in page
    assert 'value="Send back"' in page
    done = operator.post(
        "/admin/board/task/",
        {
            "action": "request_changes",
            "_selected_action": [in_review.id],
            "apply": "1",
            "feedback": "use a constant",
        },
        follow=True,
    )
    texts = [str(m) for m in done.context["messages"]]
    assert any("sent back to builder" in t for t in texts), texts
    task = store.get_task(in_review.id)
    assert task.status == "in_progress" and task.feedback == "use a constant"
