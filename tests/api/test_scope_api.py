"""A task's scope over REST (issue 43): ``touches`` on create, PATCH and the task
body; a claim of an overlapping task answers ``409 scope_busy``; claim-next passes
over it."""

from __future__ import annotations

import pytest

from core import registry

pytestmark = pytest.mark.django_db


def _create(api, title, touches):
    created = api.post("/api/board/tasks", {"title": title, "touches": touches}, format="json")
    assert created.status_code == 201, created.json()
    return created.json()


def test_touches_are_set_on_create_read_in_the_body_and_changed_with_patch(api):
    task = _create(api, "t", ["src/**", "./docs/"])
    assert (task["touches"], task["scope"]) == (["src/**", "docs"], ["src/**", "docs"])
    patched = api.patch(f"/api/board/tasks/{task['id']}", {"touches": ["lib/*.py"]}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["touches"] == ["lib/*.py"]
    read = api.get(f"/api/board/tasks/{task['id']}").json()
    assert (read["touches"], read["scope"]) == (["lib/*.py"], ["lib/*.py"])


@pytest.mark.parametrize(
    ("touches", "field"),
    [
        (["/etc/passwd"], "touches[0]"),
        (["src/../.."], "touches[0]"),
        ("src/**", "touches"),
        (["ok", "a[b"], "touches[1]"),
        ([f"f{i}" for i in range(65)], "touches"),
    ],
)
def test_a_bad_glob_is_400_naming_it_and_writes_nothing(api, unchanged, touches, field):
    with unchanged():
        refused = api.post("/api/board/tasks", {"title": "t", "touches": touches}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"] == "validation_error"
    assert refused.json()["field"] == field


def test_an_overlapping_claim_is_409_scope_busy_and_claim_next_passes_it_over(
    api, agent, unchanged
):
    other = registry.create_agent(
        id="other-bot", display_name="O", team="default", runtime="command", owner=api.user
    )
    first = _create(api, "first", ["src/**"])
    held = _create(api, "held", ["src/app.py"])
    taken = api.post(f"/api/board/tasks/{first['id']}/claim", {"agent_id": agent.id}, format="json")
    assert taken.status_code == 200, taken.json()

    with unchanged():
        refused = api.post(
            f"/api/board/tasks/{held['id']}/claim", {"agent_id": other.id}, format="json"
        )
    assert refused.status_code == 409
    body = refused.json()
    assert body["error"] == "scope_busy"
    assert body["held_by"]["task"] == first["id"]
    assert body["held_by"]["status"] == "in_progress"
    assert "touches src/app.py" in body["detail"]
    with unchanged():
        nothing = api.post("/api/board/claim-next", {"agent_id": other.id}, format="json")
    assert nothing.status_code == 204


def test_the_board_reads_why_each_ready_task_waits_for_its_paths(api, agent):
    first = _create(api, "first", ["docs"])
    held = _create(api, "held", ["docs/index.md"])
    _create(api, "free", ["src/**"])
    api.post(f"/api/board/tasks/{first['id']}/claim", {"agent_id": agent.id}, format="json")

    waits = api.get("/api/board/scope-waits?team=default")

    assert waits.status_code == 200
    assert waits.json() == {
        "team": "default",
        "waits": {
            held["id"]: {
                "task": first["id"],
                "status": "in_progress",
                "touches": "docs/index.md",
                "theirs": "docs",
                "detail": f"waiting: touches docs/index.md (it touches docs) like task "
                f"{first['id']!r} in progress",
            }
        },
    }
    assert api.get("/api/board/scope-waits?team=nope").status_code == 400
