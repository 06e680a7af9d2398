"""A remote worker's pushed branch, taken into the server's repository (the git half).

A remote worker pushes ``clawboo/task-<id>`` to its repository's ``remote`` and
submits the task (:func:`submit`). The server then, off the request path
(:mod:`executor.intake`, a django-q2 task enqueued on commit):

1. :func:`fetch_submitted` fetches that branch from the registered repository's
   ``remote`` into the server's registered repository, under a hidden ref;
2. the task's checkout is provisioned exactly as for a local run
   (:func:`worktrees.service.checkout_for_run`: the workspace row, branch and base
   the review panel shows), and :func:`adopt` merges the pushed commit into it;
3. the executor's judge runs there, and the task goes to review like a local one.

Every step is idempotent (the fetch names one commit; the merge is skipped when
the checkout already holds it), so an intake killed half-way is run again.

After a landing, :func:`push_base` pushes the landed base branch back to the
remote, so the next remote clone starts from landed work.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from board import store
from board.models import Task
from board.repository import run_repository
from core.errors import Conflict, ValidationFailed
from core.models import Repository
from worktrees import checkouts
from worktrees.checks import check_task_id
from worktrees.git import GitError, run_git
from worktrees.locks import path_lock

log = logging.getLogger(__name__)

INTAKE_TASK = "executor.intake.take_in"
_SHA = re.compile(r"\A[0-9a-f]{40}\Z")


def git_timeout_s() -> float:
    return float(settings.CLAWBOO_REMOTE_GIT_TIMEOUT_S)


def intake_ref(task_id: str) -> str:
    """Where the fetched branch is kept: a hidden ref, never a branch of the
    repository (the task's own branch is its server-side checkout's)."""
    return f"refs/clawboo/intake/task-{check_task_id(task_id)}"


class WorkDoesNotMerge(Conflict):
    """The pushed work does not merge onto the task's checkout (its base moved on
    under it): ``conflicts`` names the paths. Nothing of the merge stays."""

    def __init__(self, detail: str, *, task_id: str, conflicts: list[str]) -> None:
        super().__init__(detail, task_id=task_id, conflicts=conflicts)
        self.conflicts = conflicts


def _check_remote(remote: str) -> str:
    # Registered by staff; still never let it read as an option of git.
    if not remote or remote.startswith("-") or any(c in remote for c in "\0\n\r"):
        raise ValidationFailed("remote", "is not a usable git remote")
    return remote


# ``output.source`` of work handed in from the task's checkout on the server.
FROM_CHECKOUT = "checkout"
# What the server says of a submission: where its work is (``source``, or the pushed
# ``branch`` and ``commit``) and how its intake goes (``intake``). The intake reads
# them to decide what it judges, so a submitted ``output`` may repeat them (a remote
# worker sends its branch and commit there too) but never say otherwise: a pushed
# submission saying ``source: "checkout"`` had the judge take the server's checkout
# (another run's work, or none) as the work of a commit it never fetched.
SERVER_SAYS = ("source", "branch", "commit", "intake")


def submit(task_id: Any, ticket: Any, branch: Any, commit: Any, output: Any = None) -> Task:
    """Hand the task's work in for the server's judge (see the module docstring):
    a remote worker's pushed ``branch`` and ``commit``, or -- neither given -- the
    work in the task's checkout on the server, as it is. Refused with nothing
    written when the branch is not ``clawboo/task-<that task's id>`` or the commit
    not a full SHA (ValidationFailed), when the task is not file-mutating, has no
    registered repository with a remote to fetch a branch from, or no checkout on
    the server to take in (Conflict), or when ``ticket`` no longer holds the claim
    (Conflict, reason ``lost-claim``). The intake is enqueued on commit."""
    tid = check_task_id(task_id)
    if output is not None and not isinstance(output, dict):
        raise ValidationFailed("output", "must be an object")
    task = store.get_task(tid)
    if not task.file_mutating:
        raise Conflict(f"task {tid!r} is not file-mutating: nothing to take in", task_id=tid)
    if branch is None and commit is None:
        derived = {"source": FROM_CHECKOUT}
        _repeats_only(output or {}, derived)
        if store.live_workspace(tid) is None:
            raise Conflict(
                f"task {tid!r} has no checkout on the server to take in: provision its "
                "workspace and work there, or push its branch and name it with its commit",
                task_id=tid,
            )
    else:
        derived = _pushed(task, branch, commit)
        _repeats_only(output or {}, derived)
    body = {**(output or {}), **derived}
    outcome = store.submit_remote_work(
        tid, ticket, body, intake_lease_ms=int(settings.CLAWBOO_INTAKE_LEASE_MS)
    )
    if outcome.declined:
        raise Conflict(
            f"declined: {outcome.reason} (task is {outcome.status})",
            reason=outcome.reason,
            status=outcome.status,
        )
    assert outcome.task is not None
    if outcome.recorded:
        transaction.on_commit(lambda: enqueue(tid), robust=True)
    return outcome.task


def _repeats_only(output: dict[str, Any], derived: dict[str, str]) -> None:
    """Refuse (400, nothing written) a submitted ``output`` that says otherwise than
    the server of where the work is or how its intake goes (:data:`SERVER_SAYS`)."""
    for key in SERVER_SAYS:
        if key in output and output[key] != derived.get(key):
            raise ValidationFailed(
                f"output.{key}",
                "is the server's to say (where the submitted work is, how its intake "
                "goes); leave it out",
            )


def _pushed(task: Task, branch: Any, commit: Any) -> dict[str, str]:
    if branch != checkouts.branch_for(task.id):
        raise ValidationFailed("branch", f"must be {checkouts.branch_for(task.id)!r} for this task")
    if not isinstance(commit, str) or not _SHA.match(commit):
        raise ValidationFailed("commit", "must be a full 40-character commit SHA")
    if run_repository(task, register=False).takes_in is None:
        raise Conflict(
            f"task {task.id!r} has no registered repository with a remote to take its branch from",
            task_id=task.id,
        )
    return {"branch": branch, "commit": commit}


def from_checkout(task: Task) -> bool:
    """Whether the task's pending submission is the work in its server checkout."""
    output = task.output if isinstance(task.output, dict) else {}
    return output.get("source") == FROM_CHECKOUT


def enqueue(task_id: str) -> None:
    """Hand the intake to a django-q2 worker (inline when Q_CLUSTER sync is on)."""
    from django_q.tasks import async_task

    async_task(INTAKE_TASK, task_id, task_name=f"intake {task_id}")


def fetch_submitted(repo: Repository, task_id: str, commit: str) -> str:
    """Fetch the task's pushed branch from ``repo.remote`` into the server's
    repository under :func:`intake_ref`; the submitted ``commit`` must be reachable
    from the fetched tip (GitError, or Conflict when the branch does not hold it)."""
    branch = checkouts.branch_for(task_id)
    ref = intake_ref(task_id)
    path = Path(repo.path)
    run_git(
        [
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            _check_remote(repo.remote),
            f"+refs/heads/{branch}:{ref}",
        ],
        cwd=path,
        timeout=git_timeout_s(),
    )
    # Reachable from the fetched tip, not merely present: any object the server's
    # repository holds (another task's work, an unlanded branch) would otherwise be
    # merged, judged and shown in review as this task's.
    held = run_git(["merge-base", "--is-ancestor", commit, ref], cwd=path, check=False)
    if held.returncode != 0:
        raise Conflict(
            f"the submitted commit {commit[:12]} is not on the pushed branch {branch} "
            "(the remote's branch does not hold it): push the work to that branch and "
            "submit its commit",
            task_id=task_id,
        )
    return commit


def adopt(task_id: str, worktree: Path, commit: str) -> str:
    """Bring the pushed ``commit`` into the task's server-side checkout (a merge
    into its branch, on top of the scaffold), unless the checkout holds it already.
    Returns the checkout's HEAD. A merge that does not apply is undone and refused:
    :class:`WorkDoesNotMerge` naming the conflicting paths (else Conflict); nothing
    of it stays in the checkout."""
    with path_lock(worktree):
        held = run_git(
            ["merge-base", "--is-ancestor", commit, "HEAD"], cwd=worktree, check=False
        ).returncode
        if held != 0:
            checkouts.commit_all(worktree, checkouts.checkpoint_message(task_id))
            merged = run_git(
                [
                    "merge",
                    "--no-ff",
                    "--no-edit",
                    "-m",
                    f"clawboo: take in task {task_id} from its remote worker",
                    commit,
                ],
                cwd=worktree,
                check=False,
            )
            if merged.returncode != 0:
                unmerged = run_git(
                    ["diff", "--name-only", "-z", "--diff-filter=U"], cwd=worktree, check=False
                ).stdout
                run_git(["merge", "--abort"], cwd=worktree, check=False)
                said = (merged.stdout + merged.stderr).strip()[-1000:]
                conflicts = sorted(set(filter(None, unmerged.split("\0"))))
                if not conflicts:  # not a conflict of paths: nothing a builder resolves
                    raise Conflict(
                        f"the pushed work of task {task_id} does not merge onto its "
                        f"checkout: {said}",
                        task_id=task_id,
                    )
                raise WorkDoesNotMerge(
                    f"the pushed work of task {task_id} does not merge onto its checkout: {said}",
                    task_id=task_id,
                    conflicts=conflicts,
                )
        head = run_git(["rev-parse", "HEAD"], cwd=worktree).stdout.strip()
    return head


def drop_intake_ref(repo_path: Path, task_id: str) -> None:
    """The hidden ref has done its work once the checkout holds the commit."""
    run_git(["update-ref", "-d", intake_ref(task_id)], cwd=repo_path, check=False)


def push_base(repo_path: Path, branch: str) -> dict[str, Any] | None:
    """Push the landed ``branch`` of the registered repository at ``repo_path`` to
    its ``remote`` (a fast-forward; never forced). None when the repository has no
    remote; else ``{"remote", "branch", "pushed": bool, "error"?}``: a failure is
    reported to the caller, not raised (the landing itself stands)."""
    registered = Repository.objects.filter(path=str(repo_path)).exclude(remote="").first()
    if registered is None or not branch:
        return None
    report: dict[str, Any] = {"remote": registered.remote, "branch": branch, "pushed": False}
    try:
        run_git(
            [
                "push",
                "--quiet",
                "--",
                _check_remote(registered.remote),
                f"refs/heads/{branch}:refs/heads/{branch}",
            ],
            cwd=repo_path,
            timeout=git_timeout_s(),
        )
    except (GitError, ValidationFailed) as exc:
        report["error"] = exc.detail
        log.warning("could not push %s of %s to its remote: %s", branch, repo_path, exc.detail)
        return report
    report["pushed"] = True
    return report
