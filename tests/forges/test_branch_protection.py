"""Which checks decide when the repository's ``forge.required_checks`` names none:
those the forge's branch protection of the base branch requires (GitHub's required
status checks, Gitea's status check contexts). Unprotected, or a token that may not
read the protection (403, one log line): every reported check counts. Explicit
``required_checks`` still win, and the protection is not even asked then."""

from __future__ import annotations

import logging

import pytest

from board import store
from core import repositories
from core.repositories import MASK
from executor.runner import Executor
from tests.forges.conftest import TOKEN, Setup
from worktrees import pull_requests

pytestmark = pytest.mark.django_db

PROTECTION_READS = (
    "repos/get-status-checks-protection",
    "repoGetBranchProtection",
    "repoListBranchProtection",
)


def _no_explicit_required_checks(setup: Setup) -> None:
    forge = repositories.forge_as_dict(repositories.registered("app", "default"))
    assert forge is not None
    keep = {k: forge[k] for k in repositories.FORGE_KEYS if k in forge}
    repositories.update("app", {"forge": {**keep, "token": MASK, "required_checks": []}})
    setup.forge.required = []


def _in_review_with(setup: Setup, checks: dict[str, str]) -> str:
    task = store.create_task(title="Add the feature", repository="app").task
    assert Executor("builder").work_once().task_id == task.id
    head = setup.forge.head_of(1)
    for name, state in checks.items():
        setup.forge.set_check(head, name, state, f"{name} says {state}")
    return task.id


def _protection_reads(setup: Setup) -> int:
    return sum(1 for r in setup.forge.requests if r[0] in PROTECTION_READS)


def test_the_base_branch_protection_names_the_checks_that_decide(forge_repo: Setup, api):
    _no_explicit_required_checks(forge_repo)
    forge_repo.forge.protected = {"main": ["ci"]}
    task_id = _in_review_with(forge_repo, {"lint": "failure", "ci": "pending"})
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    # lint is not required by the protection: its failure sends nothing back.
    assert task.status == "in_review" and task.pull_request["checks"]["state"] == "pending"
    assert _protection_reads(forge_repo) == 1

    forge_repo.forge.set_check(forge_repo.forge.head_of(1), "ci", "success")
    answer = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert answer.status_code == 200, answer.json()
    assert store.get_task(task_id).status == "done"


@pytest.mark.parametrize("protection", ["none", "forbidden"])
def test_unprotected_or_unreadable_protection_lets_every_reported_check_count(
    forge_repo: Setup, protection: str, caplog
):
    caplog.set_level(logging.INFO)
    _no_explicit_required_checks(forge_repo)
    forge_repo.forge.protection_forbidden = protection == "forbidden"
    task_id = _in_review_with(forge_repo, {"lint": "failure", "ci": "success"})
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    assert task.status == "in_progress" and "lint says failure" in task.feedback
    assert task.pull_request["checks"]["state"] == "failure"
    warned = [
        r.getMessage() for r in caplog.records if "may not read the protection" in r.getMessage()
    ]
    assert len(warned) == (1 if protection == "forbidden" else 0)
    assert TOKEN not in caplog.text


def test_explicit_required_checks_win_over_the_protection(forge_repo: Setup):
    forge_repo.forge.protected = {"main": ["lint"]}  # the fixture's required_checks: ["ci"]
    task_id = _in_review_with(forge_repo, {"lint": "failure", "ci": "success"})
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    assert task.status == "in_review" and task.pull_request["checks"]["state"] == "success"
    assert _protection_reads(forge_repo) == 0


@pytest.mark.parametrize("forge_repo", ["gitea"], indirect=True)
@pytest.mark.parametrize(
    ("rules", "decides"),
    [
        # A rule named by a glob protects every branch it matches.
        ({"release/*": ["lint"], "ma*": ["ci"]}, "ci"),
        ({"**": ["ci"]}, "ci"),
        ({"{main,trunk}": ["ci"]}, "ci"),
        # A rule named like the branch wins over a glob, even one made before it.
        ({"m*": ["lint"], "main": ["ci"]}, "ci"),
    ],
)
def test_a_gitea_rule_named_by_a_glob_names_the_checks_of_the_branches_it_matches(
    forge_repo: Setup, api, rules: dict[str, list[str]], decides: str
):
    _no_explicit_required_checks(forge_repo)
    forge_repo.forge.protected = rules
    other = "lint" if decides == "ci" else "ci"
    task_id = _in_review_with(forge_repo, {other: "failure", decides: "pending"})
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    # Only the rule that applies to main decides: the other check's failure does not.
    assert task.status == "in_review" and task.pull_request["checks"]["state"] == "pending"
    assert _protection_reads(forge_repo) == 1

    forge_repo.forge.set_check(forge_repo.forge.head_of(1), decides, "success")
    answer = api.post(f"/api/board/tasks/{task_id}/approve", {}, format="json")
    assert answer.status_code == 200, answer.json()
    assert store.get_task(task_id).status == "done"


@pytest.mark.parametrize("forge_repo", ["gitea"], indirect=True)
def test_a_gitea_rule_of_another_branch_leaves_main_unprotected(forge_repo: Setup):
    _no_explicit_required_checks(forge_repo)
    forge_repo.forge.protected = {"release/*": ["ci"], "mainline": ["ci"]}
    task_id = _in_review_with(forge_repo, {"lint": "failure", "ci": "success"})
    pull_requests.refresh(task_id)
    task = store.get_task(task_id)
    assert task.status == "in_progress" and "lint says failure" in task.feedback
