"""GOVERNANCE §4, §6: builder is not judge, for work made in the server's own
checkout too. An agent working through the API in its task's checkout on the server
(a registered repository with no remote) could move that work to review unjudged
(``…/workspace/complete``, a move to ``in_review``) -- a person's approve then landed
it with no verdict -- or complete it to ``done``. It now hands the checkout in with
``…/submit`` (the ticket alone) and the server's judge decides: review, or back to
the builder to fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from board import store
from board.models import Task, Workspace
from core import machines, registry, repositories
from core.models import AgentToken

pytestmark = pytest.mark.django_db(transaction=True)


def written() -> list[Any]:
    return [
        list(Task.objects.order_by("pk").values_list("pk", "status", "revision", "verdict")),
        list(Workspace.objects.order_by("pk").values_list("pk", "status")),
    ]


@pytest.fixture
def builder(repo: Path) -> dict[str, Any]:
    """Agent b (bob's) holds a task of the registered repository ``app`` (no remote,
    verify command ``test -f feature.txt``) and works in its checkout on the server."""
    repositories.update("app", {"verify_cmd": "test -f feature.txt"})
    bob = get_user_model().objects.create_user(username="bob")
    registry.add_member("default", bob)
    registry.create_agent(id="b", display_name="b", team="default", runtime="human", owner=bob)
    api = APIClient()
    key = AgentToken.objects.create(key=machines.new_key(), agent_id="b", user=bob).key
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    task = store.create_task(title="Add the feature", repository="app").task
    claimed = api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "b"}, format="json")
    assert claimed.status_code == 200, claimed.content[:300]
    made = api.post(f"/api/board/tasks/{task.id}/workspace", {}, format="json")
    assert made.status_code in (200, 201), made.content[:300]
    return {
        "api": api,
        "task": task.id,
        "ticket": claimed.json()["ticket"],
        "checkout": Path(made.json()["worktree_path"]),
    }


def test_the_agent_side_cannot_take_its_checkouts_work_to_review_or_done_unjudged(builder):
    (builder["checkout"] / "feature.txt").write_text("broken on purpose\n")
    api, task, ticket = builder["api"], builder["task"], builder["ticket"]
    before = written()
    for path, body in (
        ("workspace/complete", {}),
        ("complete", {"ticket": ticket}),
        ("transition", {"to": "in_review"}),
        ("transition", {"to": "done"}),
    ):
        answer = api.post(f"/api/board/tasks/{task}/{path}", body, format="json")
        assert answer.status_code == 403, (path, answer.content[:300])
        # Done by a move is a person's (person_required); the rest name the way in.
        refusal = answer.json()
        assert refusal["error"] == "person_required" or "/submit" in refusal["detail"], refusal
    assert written() == before


def test_a_handed_in_checkout_is_judged_sent_back_to_fix_then_reaches_review(builder):
    api, task, ticket = builder["api"], builder["task"], builder["ticket"]
    (builder["checkout"] / "notes.txt").write_text("not the feature yet\n")
    sent = api.post(f"/api/board/tasks/{task}/submit", {"ticket": ticket}, format="json")
    assert sent.status_code == 202, sent.content[:300]
    # The intake ran on commit (tests run django-q2 in sync): the gate failed.
    judged = store.get_task(task)
    assert judged.status == "in_progress" and judged.verdict == "fail"
    assert "test -f feature.txt" in (judged.feedback or "")
    assert store.intake_of(judged)["state"] == "fix"
    # Still its claim: it fixes the work in the same checkout and hands it in again.
    (builder["checkout"] / "feature.txt").write_text("the feature\n")
    again = api.post(f"/api/board/tasks/{task}/submit", {"ticket": ticket}, format="json")
    assert again.status_code == 202, again.content[:300]
    done = store.get_task(task)
    assert done.status == "in_review" and done.verdict == "pass"
    assert store.intake_of(done)["state"] == "review"


def test_submit_without_a_branch_needs_a_checkout_on_the_server(repo, builder):
    api = builder["api"]
    other = store.create_task(title="elsewhere", repository="app").task
    store.release(builder["task"], ticket=builder["ticket"])
    claimed = api.post(f"/api/board/tasks/{other.id}/claim", {"agent_id": "b"}, format="json")
    ticket = claimed.json()["ticket"]
    before = written()
    refused = api.post(f"/api/board/tasks/{other.id}/submit", {"ticket": ticket}, format="json")
    assert refused.status_code == 409 and "no checkout on the server" in refused.json()["detail"]
    assert written() == before
    # Nothing of it is on the server to judge or land: it is settled as any task.
    done = api.post(f"/api/board/tasks/{other.id}/complete", {"ticket": ticket}, format="json")
    assert done.status_code == 200 and done.json()["task"]["status"] == "done"


def test_a_person_still_moves_the_checkouts_work_to_review(builder):
    from rest_framework.authtoken.models import Token

    (builder["checkout"] / "feature.txt").write_text("the feature\n")
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    person = APIClient()
    person.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=ada).key}")
    task = builder["task"]
    answer = person.post(f"/api/board/tasks/{task}/workspace/complete", {}, format="json")
    assert answer.status_code == 200 and answer.json()["result"] == "retained"
    assert store.get_task(task).status == "in_review"


def test_a_handed_in_checkout_may_not_say_it_is_a_pushed_commit(builder):
    """Where the work is and how its intake goes are the server's to say: the agent's
    ``output`` naming a branch, a commit or an intake state for its checkout is
    refused (400, nothing written), not kept on the task as what it handed in."""
    api, task, ticket = builder["api"], builder["task"], builder["ticket"]
    (builder["checkout"] / "feature.txt").write_text("the feature\n")
    before = written()
    for said in ({"commit": "0" * 40}, {"branch": "main"}, {"intake": {"state": "review"}}):
        refused = api.post(
            f"/api/board/tasks/{task}/submit",
            {"ticket": ticket, "output": {"summary": "done", **said}},
            format="json",
        )
        assert refused.status_code == 400, refused.content[:300]
        assert refused.json()["field"] == f"output.{next(iter(said))}"
    assert written() == before
    sent = api.post(
        f"/api/board/tasks/{task}/submit",
        {"ticket": ticket, "output": {"summary": "done", "source": "checkout"}},
        format="json",
    )
    assert sent.status_code == 202, sent.content[:300]
    assert store.get_task(task).status == "in_review"
