from __future__ import annotations

import subprocess

import pytest

from core.errors import ValidationFailed
from worktrees import checkouts, service
from worktrees import git as gitmod
from worktrees.checks import check_base_ref, check_base_sha, check_task_id
from worktrees.git import GitError, run_git

HOSTILE = [
    "..",
    "a..b",
    "a/b",
    "../../etc",
    "-rf",
    "--upload-pack=evil",
    "a b",
    "a\nb",
    "a;rm -rf ~",
    "a|cat",
    "a&&b",
    "$(touch pwned)",
    "`id`",
    "a>b",
    "a'b",
    'a"b',
    "",
    "x" * 129,
]


@pytest.fixture
def no_git(monkeypatch):
    """Fail the test if anything would start a process from the worktrees app."""

    def refuse(argv, *args, **kwargs):
        raise AssertionError(f"git was reached with {argv!r}")

    monkeypatch.setattr(gitmod.subprocess, "run", refuse)


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_task_ids_never_reach_git(no_git, bad):
    with pytest.raises(ValidationFailed) as err:
        check_task_id(bad)
    assert err.value.field == "task_id"
    with pytest.raises(ValidationFailed):
        checkouts.branch_for(bad)
    with pytest.raises(ValidationFailed):
        service.provision_task_workspace(bad, "/tmp")


@pytest.mark.parametrize(
    "bad",
    [r for r in HOSTILE if r not in ("a/b", "x" * 129)]
    + ["y" * 256]
    + ["/abs", "main/", "main.lock", "a//b", "HEAD@{1}", "main~1", "main^", "a:b", "a*", "a?"],
)
def test_hostile_refs_are_refused(no_git, bad):
    with pytest.raises(ValidationFailed) as err:
        check_base_ref(bad)
    assert err.value.field == "base_ref"


def test_ordinary_refs_pass():
    for ref in ("main", "release/1.2", "feature/x_y-z", "v1.0.0"):
        assert check_base_ref(ref) == ref


@pytest.mark.parametrize("bad", ["HEAD", "-1234", "abc", "12345g", "1234 5678", "a" * 65, None, 7])
def test_hostile_shas_are_refused(no_git, bad):
    with pytest.raises(ValidationFailed) as err:
        check_base_sha(bad)
    assert err.value.field == "base_sha"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"base_ref": "--output=/tmp/pwned"}, "base_ref"),
        ({"base_ref": "main; touch pwned"}, "base_ref"),
        ({"base_sha": "$(id)"}, "base_sha"),
        ({"base_ref": "main", "base_sha": "abcd"}, "base_ref"),
    ],
)
def test_provision_refuses_hostile_refs_before_git(repo, new_task, monkeypatch, kwargs, field):
    task = new_task()
    monkeypatch.setattr(
        gitmod.subprocess, "run", lambda *a, **k: pytest.fail(f"git was reached: {a!r}")
    )
    with pytest.raises(ValidationFailed) as err:
        service.provision_task_workspace(task.id, str(repo), **kwargs)
    assert err.value.field == field


@pytest.mark.django_db
def test_a_repo_path_outside_the_roots_is_refused_before_git(tmp_path, repos_root, no_git, db):
    from board import store

    task = store.create_task(title="t").task
    for bad in (str(tmp_path), "/", "/etc", str(repos_root / ".." / "elsewhere")):
        with pytest.raises(ValidationFailed) as err:
            service.provision_task_workspace(task.id, bad)
        assert err.value.field == "repo_path"


def test_git_runs_with_an_argv_list_no_hooks_and_the_clawboo_identity(tmp_path, monkeypatch):
    seen = {}
    real = subprocess.run

    def spy(argv, *args, **kwargs):
        seen.update(argv=argv, **kwargs)
        return real(argv, *args, **kwargs)

    monkeypatch.setattr(gitmod.subprocess, "run", spy)
    run_git(["init", "-q"], cwd=tmp_path)
    assert isinstance(seen["argv"], list)
    assert seen.get("shell") in (None, False)
    assert seen["timeout"] == 60
    assert "core.hooksPath=/dev/null" in seen["argv"]
    assert seen["env"]["GIT_AUTHOR_EMAIL"] == "clawboo@localhost"


def test_a_hung_git_times_out_with_a_typed_error(tmp_path):
    run_git(["init", "-q"], cwd=tmp_path)
    run_git(["config", "alias.hang", "!sleep 5"], cwd=tmp_path)
    with pytest.raises(GitError) as err:
        run_git(["hang"], cwd=tmp_path, timeout=0.3)
    assert err.value.returncode is None
    assert "timed out" in err.value.detail


def test_a_failing_git_reports_its_stderr(tmp_path):
    with pytest.raises(GitError) as err:
        run_git(["rev-parse", "--verify", "nope"], cwd=tmp_path)
    assert "not a git repository" in err.value.stderr
    assert err.value.code == "git_failed"
