"""Pull requests on GitHub and Gitea, end to end against a stand-in forge that checks
every request and answer against the vendor's published API document: review opens
the pull request, a failing required check is a fix round with the check's output in
the builder's context, green checks and an approval merge it through the API."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from board import store
from board.models import TaskComment
from executor.runner import Executor
from ops.transfer import export_lines
from tests.fixtures.gitrepos import git
from tests.forges.conftest import HOOK_SECRET, TOKEN, Setup
from worktrees import pull_requests
from worktrees.scaffold import SOR_FILES

pytestmark = pytest.mark.django_db


def _to_review(setup: Setup) -> str:
    task = store.create_task(title="Add the feature", repository="app").task
    report = Executor("builder").work_once()
    assert report.task_id == task.id and report.worktree == "retained"
    assert store.get_task(task.id).status == "in_review"
    return task.id


def _push_onto_the_pull_request(setup: Setup, task_id: str, tmp_path: Path, name: str) -> str:
    """A commit pushed onto the task's pull request branch past the judge (by an agent
    side's push, or a person's "Update branch"): the pull request's new head."""
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(setup.bare), str(clone))
    git(clone, "checkout", "-q", f"clawboo/task-{task_id}")
    (clone / name).write_text("unjudged\n")
    git(clone, "add", name)
    git(clone, "commit", "-qm", "after the judge")
    git(clone, "push", "-q", "origin", f"clawboo/task-{task_id}")
    return setup.forge.head_of(1)


def test_review_check_fix_green_approve_merges_through_the_forge(forge_repo: Setup, api, caplog):
    caplog.set_level(logging.DEBUG)
    forge = forge_repo.forge
    task_id = _to_review(forge_repo)

    # 1. Review opened one pull request for clawboo/task-<id>: the work alone.
    pr = store.get_task(task_id).pull_request
    assert pr["number"] == 1 and pr["state"] == "open" and pr["draft"] is False
    assert pr["branch"] == f"clawboo/task-{task_id}" and pr["base"] == "main"
    assert pr["checks"]["state"] == "pending"
    opened = forge.prs[1]
    assert "Verdict:** pass" in opened.body and "Cost:" in opened.body
    head = forge.head_of(1)
    assert pr["head_sha"] == head
    shown = git(forge_repo.bare, "ls-tree", "-r", "--name-only", head).splitlines()
    assert "feature.txt" in shown and not set(SOR_FILES) & set(shown)
    assert git(forge_repo.bare, "show", f"{head}:feature.txt") == "broken"

    # The REST body and the board card carry it.
    body = api.get(f"/api/board/tasks/{task_id}").json()
    assert body["pull_request"]["url"].endswith("/pull/1")

    # Approving while the checks run changes nothing.
    refused = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "checks_running"
    assert store.get_task(task_id).status == "in_review"

    # 2. The required check fails: a fix round, its output in the builder's context.
    forge.set_check(head, "ci", "failure", "FAIL test_feature: feature.txt says broken")
    pull_requests.poll()
    sent = store.get_task(task_id)
    assert sent.status == "in_progress" and sent.assignee_agent_id == "builder"
    assert "forge check 'ci' concluded failure" in sent.feedback
    assert "feature.txt says broken" in sent.feedback
    assert sent.pull_request["fix_rounds"] == 1
    assert sent.pull_request["checks"]["state"] == "failure"
    # The failed check is a round of the verdict, and the rerun's judge passes it again.
    assert sent.verdict == "fail" and "forge check(s) failed: ci" in sent.verdict_evidence
    assert sent.verification_detail["attempts"][-1]["forge_checks"][0]["name"] == "ci"

    report = Executor("builder").work_once()
    assert report.task_id == task_id and report.outcome == "succeeded"
    again = store.get_task(task_id)
    assert again.status == "in_review" and again.verdict == "pass"
    pr = again.pull_request
    new_head = forge.head_of(1)
    assert pr["number"] == 1 and pr["head_sha"] == new_head != head  # the same PR, updated
    assert git(forge_repo.bare, "show", f"{new_head}:feature.txt") == "ok"
    assert len(forge.prs) == 1

    # 3. Green: approve merges through the API; the base has the change; done.
    forge.set_check(new_head, "ci", "success", "all good")
    merged = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert merged.status_code == 200, merged.json()
    assert merged.json()["result"] == "merging"
    done = store.get_task(task_id)
    assert done.status == "done" and done.pull_request["state"] == "merged"
    assert forge.prs[1].merged
    assert git(forge_repo.bare, "show", "main:feature.txt") == "ok"
    # The local base followed the forge's (the user's checkout of main too).
    assert git(forge_repo.repo, "show", "main:feature.txt") == "ok"
    assert (forge_repo.repo / "feature.txt").read_text() == "ok\n"
    assert store.live_workspace(task_id) is None
    merge_ops = [r for r in forge.requests if r[0] in ("pulls/merge", "repoMergePullRequest")]
    assert len(merge_ops) == 1

    # The token never appears: API answers, export, logs, the runs' environment.
    seen = [
        api.get(f"/api/board/tasks/{task_id}").content.decode(),
        api.get("/api/repositories/app").content.decode(),
        api.get(f"/api/board/tasks/{task_id}/review").content.decode(),
        "".join(export_lines()),
        caplog.text,
        forge_repo.env_dump.read_text(),
    ]
    for text in seen:
        assert TOKEN not in text and HOOK_SECRET not in text


def test_a_failing_check_past_the_fix_rounds_blocks_with_the_debt(forge_repo: Setup, settings):
    settings.CLAWBOO_MAX_FIX_CYCLES = 0
    task_id = _to_review(forge_repo)
    forge_repo.forge.set_check(forge_repo.forge.head_of(1), "ci", "failure", "still red")
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    assert task.status == "blocked" and task.verdict == "completed_with_debt"
    assert "completed with debt" in task.feedback and "still red" in task.feedback


def test_review_comments_requesting_changes_come_back_at_their_lines(forge_repo: Setup):
    task_id = _to_review(forge_repo)
    forge_repo.forge.request_changes(
        1, "maria", "please rename", [{"file": "feature.txt", "line": 1, "body": "say ok"}]
    )
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    assert task.status == "in_progress"
    assert "maria on the forge: please rename" in task.feedback
    assert "- feature.txt:1: say ok" in task.feedback
    # Seen once: a later refresh does not send it back again.
    handoff = json.loads((Path(task.worktree_ref) / "AGENT_HANDOFF.json").read_text())
    assert "feature.txt:1: say ok" in json.dumps(handoff)


def test_a_failing_verdict_opens_a_draft_that_an_overriding_approval_makes_ready_and_merges(
    forge_repo: Setup, api
):
    from core import repositories

    repositories.update("app", {"verify_cmd": ""})  # no verify command: verdict fail
    task_id = _to_review(forge_repo)
    pr = store.get_task(task_id).pull_request
    assert store.get_task(task_id).verdict == "fail" and pr["draft"] is True
    if forge_repo.kind == "gitea":
        assert forge_repo.forge.prs[1].title.startswith("WIP: ")
    forge_repo.forge.set_check(forge_repo.forge.head_of(pr["number"]), "ci", "success")
    refused = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert refused.status_code == 409 and refused.json()["error"] == "verification_required"
    merged = api.post(
        f"/api/board/tasks/{task_id}/approve",
        {"human_override": {"by": "ada", "reason": "CI on the forge is the judge here"}},
        format="json",
    )
    assert merged.status_code == 200, merged.json()
    done = store.get_task(task_id)
    assert done.status == "done" and done.pull_request["state"] == "merged"
    assert done.pull_request["draft"] is False
    assert git(forge_repo.bare, "show", "main:feature.txt") == "broken"


@pytest.mark.parametrize("forge_repo", ["github"], indirect=True)
def test_on_github_a_failing_commit_status_decides_like_a_check_run(forge_repo: Setup):
    task_id = _to_review(forge_repo)
    head = forge_repo.forge.head_of(1)
    forge_repo.forge.set_check(head, "lint", "success", "clean")  # a check run, not required
    forge_repo.forge.set_check(head, "ci", "failure", "legacy CI: 3 tests failed", via="status")
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    runs = {r["name"]: r for r in task.pull_request["checks"]["runs"]}
    assert runs["ci"]["conclusion"] == "failure" and runs["lint"]["state"] == "success"
    assert task.status == "in_progress" and "legacy CI: 3 tests failed" in task.feedback


def test_an_approval_never_merges_a_head_pushed_after_the_judge(forge_repo: Setup, api, tmp_path):
    """The agent side may push to ``clawboo/task-<id>`` on the remote (a remote worker
    submits there). A commit pushed onto the pull request after the server published
    the work it judged was what a person's approval merged -- the forge merges its
    head. Now the approval is refused (409, nothing merged) while the head is not the
    judged commit; the builder's next round publishes the judged work again."""
    forge = forge_repo.forge
    task_id = _to_review(forge_repo)
    judged = forge.head_of(1)
    base = git(forge_repo.bare, "rev-parse", "main")
    forge.set_check(judged, "ci", "success", "all good")
    # The agent side pushes its own commit onto the pull request's branch.
    sneaked = _push_onto_the_pull_request(forge_repo, task_id, tmp_path, "feature.txt")
    assert sneaked != judged
    forge.set_check(sneaked, "ci", "success", "all good")

    refused = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert refused.status_code == 409, refused.json()
    assert refused.json()["reason"] == "head_moved"
    assert not forge.prs[1].merged and store.get_task(task_id).status == "in_review"
    assert git(forge_repo.bare, "rev-parse", "main") == base

    # Sent back and handed in again, the judged work is published over the push.
    changes = api.post(
        f"/api/board/tasks/{task_id}/request-changes", {"feedback": "again"}, format="json"
    )
    assert changes.status_code == 200, changes.json()
    Executor("builder").work_once()
    assert store.get_task(task_id).status == "in_review"
    head = forge.head_of(1)
    assert git(forge_repo.bare, "show", f"{head}:feature.txt") != "unjudged"
    assert not pull_requests.head_moved(store.get_task(task_id).pull_request)


def test_a_forge_merge_of_a_head_the_judge_did_not_see_says_so_on_the_task(
    forge_repo: Setup, tmp_path
):
    """Someone merged the pull request on the forge after a commit was pushed onto it
    past the judge. The task is done (the change is on the base), and the task says
    what landed is not what the judge passed: the merged head beside the judged one."""
    forge = forge_repo.forge
    task_id = _to_review(forge_repo)
    judged = forge.head_of(1)
    sneaked = _push_onto_the_pull_request(forge_repo, task_id, tmp_path, "feature.txt")
    forge.merge_by_hand(1, by="mallory")
    pull_requests.poll()

    task = store.get_task(task_id)
    assert task.status == "done"
    assert task.pull_request["merged_head_sha"] == sneaked != judged
    assert task.pull_request["merged_by"] == "mallory"
    said = [c.body for c in TaskComment.objects.filter(task_id=task_id)]
    landed = [body for body in said if "which the judge did not see" in body]
    assert len(landed) == 1 and sneaked in landed[0] and judged in landed[0], said


def test_a_forge_merge_of_the_judged_head_keeps_the_judges_pass(forge_repo: Setup):
    forge = forge_repo.forge
    task_id = _to_review(forge_repo)
    forge.set_check(forge.head_of(1), "ci", "success", "green")
    forge.merge_by_hand(1, by="maria")
    pull_requests.poll()
    task = store.get_task(task_id)
    assert task.status == "done" and task.verdict == "pass"
    assert task.human_override is None
    assert task.pull_request["merged_head_sha"] == task.pull_request["published_sha"]


def test_a_person_merges_a_moved_head_only_by_saying_so(forge_repo: Setup, api, tmp_path):
    """A person pressed "Update branch" on the forge: the head is no longer the judged
    commit. A plain approval stays 409 ``head_moved``; an approval with a
    ``human_override`` merges the head as it is, by that person's decision."""
    forge = forge_repo.forge
    task_id = _to_review(forge_repo)
    judged = forge.head_of(1)
    moved = _push_onto_the_pull_request(forge_repo, task_id, tmp_path, "NOTES.md")
    forge.set_check(moved, "ci", "success", "green")

    plain = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert plain.status_code == 409 and plain.json()["reason"] == "head_moved"
    assert "human_override" in plain.json()["detail"]
    said = api.post(
        f"/api/board/tasks/{task_id}/approve",
        {"human_override": {"reason": "I updated the branch myself"}},
        format="json",
    )
    assert said.status_code == 200, said.json()
    task = store.get_task(task_id)
    assert task.status == "done" and forge.prs[1].merged
    assert task.pull_request["merged_head_sha"] == moved != judged
