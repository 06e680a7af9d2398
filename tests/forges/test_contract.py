"""The stand-in forge refuses what the real API would: its checks against the vendors'
documents are not a formality."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.gitrepos import git, make_repo
from tests.forges.standin import StandIn

TOKEN = "t0ken"  # noqa: S105


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path / "app")
    git(repo, "checkout", "-q", "-b", "clawboo/task-1")
    (repo / "new.txt").write_text("new\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "work")
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(tmp_path / "forge.git"))
    return tmp_path / "forge.git"


def _serve(standin: StandIn, method: str, path: str, body: object = None, token: str = TOKEN):
    scheme = "Bearer" if standin.kind == "github" else "token"
    raw = b"" if body is None else json.dumps(body).encode()
    return standin.serve(method, path, {"Authorization": f"{scheme} {token}"}, raw)


def test_github_refuses_a_body_its_document_does_not_accept(bare: Path):
    forge = StandIn("github", bare, token=TOKEN)
    status, _ = _serve(
        forge,
        "POST",
        "/repos/octo/app/pulls",
        {"title": "x", "head": "clawboo/task-1", "base": "main", "draft": "yes"},
    )
    assert status == 422 and any("draft" in v for v in forge.violations)
    forge.violations.clear()
    status, _ = _serve(
        forge,
        "POST",
        "/repos/octo/app/pulls",
        {"title": "x", "head": "clawboo/task-1", "base": "main", "draft": True},
    )
    assert status == 201 and forge.violations == []  # the same request, well formed
    status, _ = _serve(forge, "PUT", "/repos/octo/app/pulls/one/merge", {})
    assert status == 422 and any("pull_number" in v for v in forge.violations)
    forge.violations.clear()
    status, _ = _serve(forge, "POST", "/repos/octo/app/pulls/1/approve", {})
    assert status == 404 and "no such operation" in forge.violations[0]
    forge.violations.clear()
    status, _ = _serve(forge, "GET", "/repos/octo/app/pulls/1", token="wrong")  # noqa: S106
    assert status == 401


def test_gitea_refuses_a_merge_without_its_required_do(bare: Path):
    forge = StandIn("gitea", bare, token=TOKEN)
    status, _ = _serve(
        forge,
        "POST",
        "/api/v1/repos/octo/app/pulls",
        {"title": "x", "head": "clawboo/task-1", "base": "main"},
    )
    assert status == 201 and forge.violations == []
    status, _ = _serve(
        forge, "POST", "/api/v1/repos/octo/app/pulls/1/merge", {"merge_method": "merge"}
    )
    assert status == 422 and any("'Do' is a required property" in v for v in forge.violations)
    forge.violations.clear()
    status, _ = _serve(forge, "GET", "/api/v1/repos/octo/app/commits/abc/status", None)
    assert status == 200 and forge.violations == []
    status, _ = _serve(forge, "GET", "/api/v1/repos/octo/app/commits/abc/status?per_page=5")
    assert status == 422 and any("per_page" in v for v in forge.violations)  # GitHub's word


def test_branch_protection_refuses_a_merge_while_the_required_check_is_not_green(bare: Path):
    forge = StandIn("github", bare, token=TOKEN)
    forge.required = ["ci"]
    _serve(
        forge,
        "POST",
        "/repos/octo/app/pulls",
        {"title": "x", "head": "clawboo/task-1", "base": "main"},
    )
    head = forge.head_of(1)
    status, _ = _serve(forge, "PUT", "/repos/octo/app/pulls/1/merge", {"sha": head})
    assert status == 405
    forge.set_check(head, "ci", "success")
    status, _ = _serve(forge, "PUT", "/repos/octo/app/pulls/1/merge", {"sha": "0" * 40})
    assert status == 409
    status, body = _serve(forge, "PUT", "/repos/octo/app/pulls/1/merge", {"sha": head})
    assert status == 200 and body["merged"] is True
    assert git(bare, "show", "main:new.txt") == "new"
    assert forge.violations == []


def test_a_branch_is_deleted_by_each_vendors_own_path_and_no_other(bare: Path):
    github = StandIn("github", bare, token=TOKEN)
    # The branches path deletes nothing on GitHub: refs are deleted under git/refs.
    status, _ = _serve(github, "DELETE", "/repos/octo/app/branches/clawboo/task-1")
    assert status == 404 and "no such operation" in github.violations[0]
    github.violations.clear()
    status, _ = _serve(github, "DELETE", "/repos/octo/app/git/refs/heads/clawboo/task-1", {})
    assert status == 422 and any("body" in v for v in github.violations)  # it takes none
    github.violations.clear()
    status, _ = _serve(github, "DELETE", "/repos/octo/app/git/refs/heads/clawboo/task-1")
    assert status == 204 and github.violations == [] and not github.has_branch("clawboo/task-1")
    status, _ = _serve(github, "DELETE", "/repos/octo/app/git/refs/heads/clawboo/task-1")
    assert status == 422  # gone already: GitHub's "Reference does not exist"

    gitea = StandIn("gitea", bare, token=TOKEN)
    status, _ = _serve(gitea, "DELETE", "/api/v1/repos/octo/app/git/refs/heads/main")
    assert status == 404 and "no such operation" in gitea.violations[0]
    gitea.violations.clear()
    status, _ = _serve(gitea, "DELETE", "/api/v1/repos/octo/app/branches/main")
    assert status == 403 and gitea.violations == []  # the default branch stays
    status, _ = _serve(gitea, "GET", "/api/v1/repos/octo/app/branch_protections/main?x=1")
    assert status == 422 and any("'x'" in v for v in gitea.violations)


def test_listing_pull_requests_by_head_is_githubs_word_and_not_giteas(bare: Path):
    github = StandIn("github", bare, token=TOKEN)
    _serve(github, "POST", "/repos/octo/app/pulls", {"head": "clawboo/task-1", "base": "main"})
    status, listed = _serve(
        github, "GET", "/repos/octo/app/pulls?state=open&head=octo:clawboo/task-1&base=main"
    )
    assert status == 200 and [p["number"] for p in listed] == [1] and github.violations == []
    assert "merged" not in listed[0]  # a listed pull request says merged_at only
    status, listed = _serve(github, "GET", "/repos/octo/app/pulls?head=clawboo/task-1")
    assert status == 200 and listed == []  # a head without its owner matches nothing

    gitea = StandIn("gitea", bare, token=TOKEN)
    _serve(
        gitea, "POST", "/api/v1/repos/octo/app/pulls", {"head": "clawboo/task-1", "base": "main"}
    )
    status, listed = _serve(gitea, "GET", "/api/v1/repos/octo/app/pulls?state=open&page=1&limit=50")
    assert status == 200 and [p["head"]["ref"] for p in listed] == ["clawboo/task-1"]
    assert gitea.violations == []
    status, _ = _serve(gitea, "GET", "/api/v1/repos/octo/app/pulls?head=clawboo/task-1")
    assert status == 422 and any("'head'" in v for v in gitea.violations)  # no such filter
    gitea.violations.clear()
    status, _ = _serve(
        gitea, "POST", "/api/v1/repos/octo/app/pulls", {"head": "clawboo/task-1", "base": "main"}
    )
    assert status == 409 and gitea.violations == []  # one open per head and base
