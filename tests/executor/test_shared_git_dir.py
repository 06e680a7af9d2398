"""A task's worktree shares its repository's git directory with the server's own
checkout: what a builder plants there (a replace ref, a graft, config that runs a
command or retargets a push) neither changes what a person reviews or what lands,
nor runs anything in the server's git."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from board import store
from core.models import Repository
from executor.runner import Executor
from tests.api.conftest import make_client
from tests.fixtures.gitrepos import git
from tests.fixtures.runs import VERIFY_OK
from worktrees import intake, review, service
from worktrees.git import UnsafeRepositoryConfig, run_git, unsafe_key

pytestmark = pytest.mark.django_db


def real(repo: Path, *args: str) -> str:
    """git as the objects really are (no replace refs, no grafts): the check's eye."""
    env = {**os.environ, "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": "/dev/null/none"}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


@pytest.fixture
def in_review(command_agent):
    command_agent("builder", "write")
    task = store.create_task(title="Add feature", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("builder").work_once().worktree == "retained"
    return store.get_task(task.id)


@pytest.fixture
def checkout(in_review) -> Path:
    return Path(store.get_workspace(in_review.id).worktree_path)


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ran"


@pytest.fixture
def program(tmp_path: Path, marker: Path) -> str:
    """A command a builder would have the server's git run: it leaves ``marker``."""
    path = tmp_path / "planted.sh"
    path.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_planted_replace_ref_changes_neither_the_review_nor_what_lands(in_review, checkout, repo):
    # The builder wrote feature.txt = "ok"; from its worktree it has git show an
    # innocent blob in its place (refs/replace/* is in the shared git directory).
    (checkout / "shown.tmp").write_text("harmless\n")
    shown = git(checkout, "hash-object", "-w", "shown.tmp")
    (checkout / "shown.tmp").unlink()
    ok_blob = git(checkout, "hash-object", "feature.txt")
    git(checkout, "replace", ok_blob, shown)
    api = make_client("ada")
    body = api.get(f"/api/board/tasks/{in_review.id}/review").json()
    patch = body["diff"]["files"][0]["patch"]
    assert "+ok" in patch and "harmless" not in patch
    answer = api.post(f"/api/board/tasks/{in_review.id}/approve", {}, format="json")
    assert answer.status_code == 200, answer.json()
    # What landed is what the reviewer saw: in the commit and in the server's checkout.
    assert real(repo, "show", "main:feature.txt") == "ok\n"
    assert (repo / "feature.txt").read_text() == "ok\n"
    landed = api.get(f"/api/board/tasks/{in_review.id}/review").json()
    assert "+ok" in landed["diff"]["files"][0]["patch"]


def test_a_planted_graft_does_not_rewrite_the_history_the_server_reads(repo):
    first = git(repo, "rev-parse", "HEAD")
    (repo / "more.txt").write_text("more\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    second = git(repo, "rev-parse", "HEAD")
    orphan = git(repo, "commit-tree", f"{first}^{{tree}}", "-m", "elsewhere")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "grafts").write_text(f"{second} {orphan}\n")
    assert run_git(["rev-parse", f"{second}^1"], cwd=repo).stdout.strip() == first


# Keys a builder writes with ``git config`` in its worktree (the common .git/config),
# with the attributes it commits, that make the server's review diff run a program.
REVIEW_PLANTS = [
    ({"diff.external": "{program}"}, ""),
    ({"diff.planted.textconv": "{program}"}, "feature.txt diff=planted\n"),
    ({"diff.planted.command": "{program}"}, "feature.txt diff=planted\n"),
    ({"include.path": "{included}"}, ""),
]


def plant(checkout: Path, keys: dict[str, str], attributes: str, **names: str) -> None:
    for key, value in keys.items():
        git(checkout, "config", key.format(**names), value.format(**names))
    if attributes:
        (checkout / ".gitattributes").write_text(attributes)


@pytest.mark.parametrize(("keys", "attributes"), REVIEW_PLANTS)
def test_config_a_builder_plants_runs_nothing_in_the_review_and_is_named(
    in_review, checkout, program, marker, tmp_path, keys, attributes
):
    included = tmp_path / "included.cfg"
    included.write_text(f"[diff]\n\texternal = {program}\n")
    plant(checkout, keys, attributes, program=program, included=str(included))
    with pytest.raises(UnsafeRepositoryConfig) as refused:
        review.review_of(in_review)
    assert next(iter(keys)).lower() in refused.value.detail
    assert not marker.exists()
    # Over the API, the operator reads which key and file stop the review.
    answer = make_client("ada").get(f"/api/board/tasks/{in_review.id}/review")
    assert answer.json()["error"] == "git_failed"
    assert next(iter(keys)).lower() in answer.json()["detail"]
    assert not marker.exists()


@pytest.mark.parametrize(
    ("keys", "attributes"),
    [
        ({"merge.planted.driver": "{program} %O %A %B"}, "*.txt merge=planted\n"),
        ({"filter.planted.smudge": "{program}"}, "*.txt filter=planted\n"),
        ({"filter.planted.clean": "{program}"}, "*.txt filter=planted\n"),
        ({"filter.planted.process": "{program}"}, "*.txt filter=planted\n"),
    ],
)
def test_config_a_builder_plants_runs_nothing_when_it_lands(
    in_review, checkout, repo, program, marker, keys, attributes
):
    # The base moved on under the same file: landing merges, and checks it out.
    (repo / "feature.txt").write_text("base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base moves")
    before = git(repo, "rev-parse", "main")
    plant(checkout, keys, attributes, program=program)
    with pytest.raises(UnsafeRepositoryConfig) as refused:
        service.approve(in_review.id, by="ada")
    assert next(iter(keys)).lower() in refused.value.detail
    assert not marker.exists()
    assert git(repo, "rev-parse", "main") == before
    assert store.get_task(in_review.id).status == "in_review"


@pytest.mark.parametrize(
    "keys",
    [
        {"url.{elsewhere}.pushInsteadOf": "{remote}"},
        {"url.{elsewhere}.insteadOf": "{remote}"},
        {"remote.{remote}.pushurl": "{elsewhere}"},
        {"remote.{remote}.receivepack": "{program}"},
        {"core.sshCommand": "{program}"},
        {"credential.helper": "!{program}"},
    ],
)
def test_config_a_builder_plants_does_not_retarget_the_push_of_the_base(
    repo, checkout, tmp_path, program, marker, keys
):
    remote = tmp_path / "remote.git"
    elsewhere = tmp_path / "elsewhere.git"
    for bare in (remote, elsewhere):
        git(tmp_path, "init", "-q", "--bare", str(bare))
    Repository.objects.filter(path=str(repo)).update(remote=f"file://{remote}")
    names = {"remote": f"file://{remote}", "elsewhere": f"file://{elsewhere}", "program": program}
    plant(checkout, keys, "", **names)
    report = intake.push_base(repo, "main")
    assert report is not None and not report["pushed"]
    assert next(iter(keys)).format(**names).lower() in report["error"].lower()
    assert not marker.exists()
    for bare in (remote, elsewhere):
        assert not git(bare, "for-each-ref")


def test_the_operators_own_ordinary_config_is_not_refused():
    for key in (
        "remote.origin.url",
        "remote.origin.fetch",
        "core.hooksPath",
        "core.fsmonitor",
        "branch.main.remote",
        "user.name",
        "diff.algorithm",
        "merge.conflictStyle",
    ):
        assert not unsafe_key(key), key
    for key in (
        "Diff.External",
        "remote.https://x.example/a.git.url",
        "includeIf.gitdir:/x.path",
        "http.proxy",
        "http.https://x.example.sslVerify",
    ):
        assert unsafe_key(key), key


@pytest.mark.django_db(transaction=True)
def test_refs_a_remote_builder_pushes_besides_its_branch_are_never_read(repo, tmp_path):
    """A remote worker's agent holds the remote's credentials: it may push a replace
    ref and a base branch of its own there. The intake fetches the task's branch
    alone, so the review and the landing see neither."""
    from core import registry, repositories
    from worktrees import intake

    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    repositories.register(
        team="default", path=str(repo), id="app", remote=str(remote), verify_cmd=VERIFY_OK
    )
    registry.create_agent(
        id="far",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "app"},
    )
    task = store.create_task(title="Add feature", repository="app").task
    claim = store.claim(task.id, "far", "command")
    clone = tmp_path / "worker"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "checkout", "-q", "-b", f"clawboo/task-{task.id}")
    (clone / "feature.txt").write_text("ok\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "work")
    commit = git(clone, "rev-parse", "HEAD")
    (clone / "shown.tmp").write_text("harmless\n")
    shown = git(clone, "hash-object", "-w", "shown.tmp")
    git(clone, "replace", git(clone, "hash-object", "feature.txt"), shown)
    base = git(repo, "rev-parse", "main")
    git(clone, "commit", "-q", "--allow-empty", "-m", "not reviewed")
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/main", "refs/replace/*:refs/replace/*")
    git(clone, "push", "-q", "origin", f"{commit}:refs/heads/clawboo/task-{task.id}")
    intake.submit(task.id, claim.ticket, f"clawboo/task-{task.id}", commit, {"summary": "did"})
    assert git(repo, "for-each-ref", "refs/replace/") == ""
    panel = review.review_of(store.get_task(task.id))
    assert "+ok" in panel["diff"]["files"][0]["patch"]
    result = service.approve(task.id, by="ada")
    assert result["result"] == "landed"
    assert git(repo, "rev-parse", "main^") == base
    assert not result["push"]["pushed"]  # the remote's main is not the server's to follow


def test_a_key_planted_after_a_clean_check_is_still_refused(repo, checkout, program, marker):
    run_git(["status", "--porcelain"], cwd=repo)  # read clean, and remembered so
    run_git(["status", "--porcelain"], cwd=checkout)
    git(checkout, "config", "diff.external", program)
    for where in (repo, checkout):
        with pytest.raises(UnsafeRepositoryConfig):
            run_git(["diff", "HEAD~1", "HEAD"], cwd=where)
    assert not marker.exists()
