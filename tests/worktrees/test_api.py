"""The Workspaces paths of API.md over a real git repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from tests.api.conftest import fingerprint, make_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(db):
    return make_client("ada")


def claimed_task(**fields):
    task = store.create_task(title="Fix login", **fields).task
    store.claim(task.id, "ada")
    return task


def test_provision_get_and_complete(api, repo: Path):
    task = claimed_task()
    made = api.post(
        f"/api/board/tasks/{task.id}/workspace", {"repo_path": str(repo)}, format="json"
    )
    assert made.status_code == 201, made.json()
    assert made.json()["branch"] == f"clawboo/task-{task.id}"
    state = api.get(f"/api/board/tasks/{task.id}/workspace").json()
    assert state["present"] is True and "resume_state" in state
    worktree = Path(state["worktree_path"])
    (worktree / "feature.txt").write_text("work\n")
    done = api.post(f"/api/board/tasks/{task.id}/workspace/complete")
    assert done.status_code == 200, done.json()
    assert done.json()["result"] == "retained" and done.json()["diffstat"]
    assert store.get_task(task.id).status == "in_review"


def test_handoff_pause_resume_review(api, repo: Path):
    task = claimed_task()
    api.post(f"/api/board/tasks/{task.id}/workspace", {"repo_path": str(repo)}, format="json")
    handoff = {
        "handoffFrom": "ada",
        "runtime": "human",
        "completedSubtasks": ["read code"],
        "brokenOrUnverified": [],
        "nextBestStep": "write the fix",
    }
    wrote = api.post(f"/api/board/tasks/{task.id}/workspace/handoff", handoff, format="json")
    assert wrote.status_code == 200, wrote.json()
    state = api.get(f"/api/board/tasks/{task.id}/workspace").json()
    assert state["resume_state"]["next"] == "write the fix"
    assert api.post(f"/api/board/tasks/{task.id}/workspace/pause").status_code == 200
    assert api.post(f"/api/board/tasks/{task.id}/workspace/resume").status_code == 200
    review = api.post(f"/api/board/tasks/{task.id}/workspace/review")
    assert review.status_code == 200 and review.json()["sha"]


def test_refusals_write_nothing(api, repo: Path, tmp_path: Path):
    research = store.create_task(title="Read papers", file_mutating=False).task
    before = fingerprint()
    refused = api.post(
        f"/api/board/tasks/{research.id}/workspace", {"repo_path": str(repo)}, format="json"
    )
    assert refused.status_code == 422 and refused.json()["error"] == "not_file_mutating"
    task = claimed_task()
    before = fingerprint()
    bad = api.post(
        f"/api/board/tasks/{task.id}/workspace",
        {"repo_path": str(tmp_path / "not-a-repo")},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "repo_path"
    assert fingerprint() == before
    assert api.get(f"/api/board/tasks/{task.id}/workspace").status_code == 404


def test_gc_is_staff_only(api, state_dir):
    assert api.post("/api/worktrees/gc", {}, format="json").status_code == 403
    staff = make_client("root", staff=True)
    swept = staff.post("/api/worktrees/gc", {"max_age_hours": 1, "keep": 5}, format="json")
    assert swept.status_code == 200
    assert set(swept.json()) == {"reaped", "skipped", "failures"}
