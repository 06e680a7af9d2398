"""Git-level worktree operations: provision, pause, resume, diff, review, reap.

This module knows git and the filesystem, not the board: :mod:`worktrees.service`
ties each operation to the task's workspace row. Every mutating operation on one
checkout runs under that checkout's :func:`~worktrees.locks.path_lock`; the short
steps that touch the repository's shared worktree registry or its refs also hold
the repository's lock, so two tasks of one repo never race on ``packed-refs`` or
``.git/worktrees`` (lock order: checkout, then repository).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from core.errors import ClawbooError, Conflict, ValidationFailed
from worktrees import agent_files
from worktrees.checks import check_repo_path, check_task_id
from worktrees.git import GitError, git_out, run_git
from worktrees.locks import path_lock
from worktrees.scaffold import SOR_FILES, TaskBrief, scaffold_message, write_scaffold

log = logging.getLogger(__name__)

BRANCH_PREFIX = "clawboo/task-"
GC_MAX_AGE_HOURS = 72
GC_KEEP = 25


class ProvisionFailed(ClawbooError):
    """The checkout could not be created and verified, even after one retry."""

    code = "provision_failed"


class BranchMissing(Conflict):
    """Resume found no branch to re-attach (it was deleted outside Clawboo)."""


def pause_message(task_id: str) -> str:
    return f"clawboo: pause task {task_id}"


def checkpoint_message(task_id: str) -> str:
    return f"clawboo: checkpoint task {task_id}"


def gc_message(task_id: str) -> str:
    return f"clawboo: gc autosave task {task_id}"


def branch_for(task_id: str) -> str:
    return BRANCH_PREFIX + check_task_id(task_id)


def state_dir() -> Path:
    return Path(settings.CLAWBOO_STATE_DIR).resolve()


def worktree_root() -> Path:
    return state_dir() / "worktrees"


def reviews_root() -> Path:
    return state_dir() / "reviews"


def repo_hash(repo: Path) -> str:
    return hashlib.sha1(str(repo).encode(), usedforsecurity=False).hexdigest()[:12]


def worktree_path_for(repo: Path, task_id: str) -> Path:
    return worktree_root() / repo_hash(repo) / check_task_id(task_id)


@contextmanager
def repo_lock(repo: Path) -> Iterator[None]:
    """Serializes edits to one repository's worktree registry and branches."""
    with path_lock(f"{repo}#registry"):
        yield


def resolve_repo(value: Any) -> Path:
    """The allowed git work tree at ``value`` (its top level), or ValidationFailed."""
    path = check_repo_path(value)
    try:
        top = git_out(["rev-parse", "--show-toplevel"], cwd=path)
    except GitError:
        raise ValidationFailed("repo_path", "is not a git repository work tree") from None
    repo = check_repo_path(top)
    state = state_dir()
    if repo == state or repo.is_relative_to(state):
        # A Clawboo checkout is not a repository to branch from.
        raise ValidationFailed("repo_path", "is inside the Clawboo state directory")
    return repo


def resolve_commit(repo: Path, spec: str, field_name: str) -> str:
    """Full SHA of the commit ``spec`` names (already validated by the caller)."""
    proc = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{spec}^{{commit}}"],
        cwd=repo,
        check=False,
    )
    if proc.returncode != 0:
        raise ValidationFailed(field_name, f"{spec!r} does not name a commit in the repository")
    return proc.stdout.strip()


def registered_worktrees(repo: Path) -> dict[str, dict[str, str]]:
    """Every checkout git has registered for ``repo``, by path, with what
    ``git worktree list --porcelain`` says of it (``HEAD``: its commit, ``branch``:
    its full ref, or a ``detached`` key; ``locked``, ``prunable`` when so)."""
    out = git_out(["worktree", "list", "--porcelain", "-z"], cwd=repo)
    entries: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in out.split("\0"):
        key, _, value = line.partition(" ")
        if key == "worktree":
            current = entries.setdefault(value, {})
        elif not line:
            current = None  # an empty line ends an entry
        elif current is not None:
            current[key] = value
    return entries


def is_registered(repo: Path, path: Path) -> bool:
    return str(path) in registered_worktrees(repo)


def head_ref(path: Path) -> str | None:
    proc = run_git(["symbolic-ref", "-q", "HEAD"], cwd=path, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None


def checkout_healthy(repo: Path, path: Path, branch: str) -> bool:
    """The checkout exists on disk, is registered with the repo, and is on ``branch``."""
    if not (path.is_dir() and not path.is_symlink() and (path / ".git").exists()):
        return False
    try:
        return is_registered(repo, path) and head_ref(path) == f"refs/heads/{branch}"
    except GitError:
        return False


def branch_tip(repo: Path, branch: str) -> str | None:
    proc = run_git(
        ["rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"], cwd=repo, check=False
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def _ensure_under(path: Path, root: Path) -> None:
    """Refuse to delete anything that is not strictly inside a Clawboo-owned root."""
    if path.is_symlink() or not path.resolve().is_relative_to(root.resolve()):
        raise ClawbooError(f"refusing to touch {path}: not under {root}")
    if path.resolve() == root.resolve():
        raise ClawbooError(f"refusing to remove the root {root}")


def drop_checkout(repo: Path, path: Path, root: Path) -> None:
    """Remove ``path``'s registration and directory (the branch is untouched).

    Orphan-resilient: works for a registered directory, a registration whose
    directory is gone, and a leftover directory git does not know about.
    """
    _ensure_under(path, root)
    with repo_lock(repo):
        # A checkout on disk is removed straight away (and checked afterwards);
        # without one, only an orphan registration can be left to clear.
        registered = (path / ".git").exists() or is_registered(repo, path)
        removed = False
        if registered:
            # Twice --force: also removes a locked or dirty worktree, and a
            # registration whose directory is already gone.
            removal = ["worktree", "remove", "--force", "--force", str(path)]
            removed = run_git(removal, cwd=repo, check=False).returncode == 0
    if path.exists() or path.is_symlink():
        _ensure_under(path, root)
        shutil.rmtree(path)
    # A removal git answered with success took the registration with it; one it
    # refused is looked at again (and pruned) once the directory is gone.
    if registered and not removed:
        with repo_lock(repo):
            if is_registered(repo, path):
                # The directory is gone now, so prune can clear what remove could not.
                run_git(["worktree", "prune"], cwd=repo, check=False)
                if is_registered(repo, path):
                    raise GitError(
                        ["worktree", "remove", str(path)], 1, "registration survived removal"
                    )


def verify_checkout(
    repo: Path, path: Path, *, branch: str | None, sha: str | None = None
) -> dict[str, str]:
    """Both halves: the directory exists and git has it registered (on ``branch`` or
    at ``sha``). Returns git's entry for the checkout (see :func:`registered_worktrees`)."""
    if not path.is_dir() or not (path / ".git").exists():
        raise ProvisionFailed(f"{path} was not created on disk")
    entry = registered_worktrees(repo).get(str(path))
    if entry is None:
        raise ProvisionFailed(f"{path} is not registered with {repo}")
    if branch is not None and entry.get("branch") != f"refs/heads/{branch}":
        raise ProvisionFailed(f"{path} is not on branch {branch}")
    if sha is not None and entry.get("HEAD") != sha:
        raise ProvisionFailed(f"{path} is not at {sha}")
    return entry


def commit_all(path: Path, message: str) -> bool:
    """Commit every change (tracked, deleted, untracked) in the checkout. False if clean.

    A tracked path an agent turned into a FIFO, device or socket is left out: git
    refuses to add one ("can only add regular files"), and would fail the whole
    commit. (Git skips untracked special files on its own.)"""
    status = run_git(["status", "--porcelain=v1", "-z", "--untracked-files=all"], cwd=path).stdout
    if not status:
        return False
    excludes = [f":(exclude,literal){name}" for name in _special_paths(path, status)]
    run_git(["add", "-A", "--", ".", *excludes], cwd=path)
    run_git(["commit", "-q", "--no-verify", "--allow-empty", "-m", message], cwd=path)
    return True


def _special_paths(path: Path, status: str) -> list[str]:
    """Paths of a ``status --porcelain=v1 -z`` that are neither a file, a symlink
    nor a directory now."""
    found = []
    records = iter(status.split("\0"))
    for record in records:
        if len(record) < 4:
            continue
        if record[0] in "RC":
            next(records, None)  # a rename's original path, a field of its own
        name = record[3:]
        try:
            mode = os.lstat(path / name).st_mode
        except OSError:
            continue  # deleted: git records that
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
            found.append(name)
    return found


@dataclass(frozen=True)
class Checkout:
    repo: Path
    path: Path
    branch: str
    base_sha: str
    base_commit: str


def _commit_scaffold(path: Path, brief: TaskBrief) -> str:
    write_scaffold(path, brief)
    # -f: a repo .gitignore that happens to match *.md must not drop the SoR.
    run_git(["add", "-f", "--", *SOR_FILES[:-1]], cwd=path)
    run_git(
        ["commit", "-q", "--no-verify", "--allow-empty", "-m", scaffold_message(brief.task_id)],
        cwd=path,
    )
    return git_out(["rev-parse", "HEAD"], cwd=path)


def provision_worktree(repo: Path, brief: TaskBrief, base_sha: str) -> Checkout:
    """Fresh checkout of ``base_sha`` on ``clawboo/task-<id>`` plus the scaffold commit.

    Orphans at the path (registration and/or directory) are removed first. If the
    branch exists at ``base_sha`` it is reused, otherwise reset to it with ``-B``;
    a new branch uses ``-b``. This is the only code path that passes ``-b``/``-B``.
    On failure everything is cleaned up and the whole sequence is tried once more.
    """
    task_id = check_task_id(brief.task_id)
    branch = branch_for(task_id)
    path = worktree_path_for(repo, task_id)
    root = worktree_root()
    with path_lock(path):
        last: Exception | None = None
        for _attempt in range(2):
            try:
                drop_checkout(repo, path, root)
                path.parent.mkdir(parents=True, exist_ok=True)
                with repo_lock(repo):
                    tip = branch_tip(repo, branch)
                    if tip == base_sha:
                        add = ["worktree", "add", "-q", str(path), branch]
                    else:
                        flag = "-b" if tip is None else "-B"
                        add = ["worktree", "add", "-q", flag, branch, str(path), base_sha]
                    run_git(add, cwd=repo)
                verify_checkout(repo, path, branch=branch)
                base_commit = _commit_scaffold(path, brief)
                return Checkout(repo, path, branch, base_sha, base_commit)
            except (GitError, ProvisionFailed, OSError) as exc:
                last = exc
                try:
                    drop_checkout(repo, path, root)
                except (GitError, ClawbooError, OSError):
                    pass  # the retry starts with the same cleanup and will say why
        raise ProvisionFailed(f"could not provision {path}: {last}") from last


def find_baseline(repo: Path, branch: str, task_id: str) -> tuple[str, str]:
    """``(base_sha, base_commit)`` recovered from the branch's scaffold commit."""
    message = scaffold_message(task_id)
    out = git_out(
        [
            "log",
            "--format=%H %P%x09%s",
            "--fixed-strings",
            f"--grep={message}",
            f"refs/heads/{branch}",
        ],
        cwd=repo,
    )
    for line in out.splitlines():
        shas, _, subject = line.partition("\t")
        if subject == message:
            parts = shas.split()
            return (parts[1] if len(parts) > 1 else parts[0]), parts[0]
    raise ProvisionFailed(f"branch {branch} has no scaffold commit for task {task_id}")


def resume_worktree(repo: Path, task_id: str, *, take_over: bool = False) -> Checkout:
    """Re-attach ``clawboo/task-<id>`` at its tip into a fresh checkout (never
    ``-b``/``-B``, so no commit can be discarded) and recover the baseline.
    A checkout that is already healthy is left as it is. ``take_over``: the caller
    holds the task now (its claim, or its landing), so a checkout another host made
    of the branch is let go first (:func:`take_over_checkouts`); without it git
    refuses to check the branch out twice."""
    branch = branch_for(task_id)
    path = worktree_path_for(repo, task_id)
    root = worktree_root()
    with path_lock(path):
        if not checkout_healthy(repo, path, branch):
            if branch_tip(repo, branch) is None:
                raise BranchMissing(f"branch {branch} no longer exists in {repo}")
            if take_over:
                take_over_checkouts(repo, task_id)
            last: Exception | None = None
            for _attempt in range(2):
                try:
                    drop_checkout(repo, path, root)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with repo_lock(repo):
                        run_git(["worktree", "add", "-q", str(path), branch], cwd=repo)
                    verify_checkout(repo, path, branch=branch)
                    break
                except (GitError, ProvisionFailed, OSError) as exc:
                    last = exc
            else:
                raise ProvisionFailed(f"could not re-attach {branch} at {path}: {last}") from last
        base_sha, base_commit = find_baseline(repo, branch, task_id)
        return Checkout(repo, path, branch, base_sha, base_commit)


def pause_worktree(repo: Path, task_id: str) -> bool:
    """Commit uncommitted work to the branch, drop the directory, keep the branch.
    Returns whether anything needed committing. Pausing a paused task is a no-op."""
    path = worktree_path_for(repo, task_id)
    with path_lock(path):
        committed = False
        if path.is_dir() and (path / ".git").exists():
            committed = commit_all(path, pause_message(task_id))
        drop_checkout(repo, path, worktree_root())
        return committed


@dataclass
class Diffstat:
    files: list[dict[str, Any]] = field(default_factory=list)
    insertions: int = 0
    deletions: int = 0
    head: str | None = None  # the checkout's HEAD when the diff was taken

    @property
    def empty(self) -> bool:
        return not self.files

    def as_dict(self) -> dict[str, Any]:
        return {
            "files_changed": len(self.files),
            "insertions": self.insertions,
            "deletions": self.deletions,
            "files": self.files,
        }


def _count_lines(path: Path) -> int | None:
    """An untracked file's lines; None (git's "-") for a binary file and for what is
    not a regular file: an agent's FIFO, device or symlink is never read."""
    try:
        return agent_files.count_lines(path)
    except OSError:
        return None


# The pathspec of the work itself: the SoR bookkeeping files left out (what the
# landing, the review panel and the critic call "the change").
WORK_PATHS = (".", *(f":(top,exclude){name}" for name in SOR_FILES))


def work_diff(path: Path, base_commit: str) -> Diffstat:
    """The agent's work: the checkout (committed + uncommitted + untracked, minus
    ignored files) against the baseline, leaving out the SoR bookkeeping files."""
    numstat = run_git(
        ["diff", "--numstat", "-z", "--no-renames", base_commit, "--", *WORK_PATHS],
        cwd=path,
    ).stdout
    stat = Diffstat()
    for record in filter(None, numstat.split("\0")):
        ins, dels, name = record.split("\t", 2)
        entry: dict[str, Any] = {
            "path": name,
            "insertions": None if ins == "-" else int(ins),
            "deletions": None if dels == "-" else int(dels),
        }
        stat.files.append(entry)
    # Untracked files (what .gitignore and the excludes leave) and HEAD in one call.
    # --no-optional-locks: a status must not take index.lock from a git a runtime
    # may still be running in the checkout. The diff above counted the changes, so
    # the status skips what only costs time: renames, submodules, ahead/behind.
    status = run_git(
        ["--no-optional-locks", "status", "--porcelain=v2", "-z", "--branch",
         "--untracked-files=all", "--no-renames", "--ignore-submodules=all",
         "--no-ahead-behind", "--", *WORK_PATHS],
        cwd=path,
    ).stdout  # fmt: skip
    records = iter(status.split("\0"))
    for record in records:
        if record.startswith("2 "):
            next(records, None)  # a rename's original path, a field of its own
        elif record.startswith("# branch.oid "):
            oid = record.removeprefix("# branch.oid ")
            stat.head = None if oid == "(initial)" else oid
        elif record.startswith("? "):
            name = record[2:]
            stat.files.append(
                {"path": name, "insertions": _count_lines(path / name), "deletions": 0}
            )
    for counted in stat.files:
        stat.insertions += counted["insertions"] or 0
        stat.deletions += counted["deletions"] or 0
    return stat


def is_task_checkout_of(repo: Path, task_id: str, path: Path) -> bool:
    """Whether ``path`` is where some host's Clawboo made ``task_id``'s checkout of
    ``repo``: ``<state dir>/worktrees/<repo hash>/<task id>`` (the state dir any)."""
    return (
        path.name == check_task_id(task_id)
        and path.parent.name == repo_hash(repo)
        and path.parent.parent.name == worktree_root().name
    )


def other_hosts_checkouts(repo: Path, task_id: str) -> list[Path]:
    """The checkouts of ``task_id``'s branch that git has registered for ``repo``
    under another state dir than this host's: hosts with state dirs of their own
    share a repository (and its worktree registry), so the host that lands a task
    need not be the one that made its checkout."""
    branch_ref = f"refs/heads/{branch_for(task_id)}"
    own = worktree_path_for(repo, task_id)
    return [
        Path(path)
        for path, entry in registered_worktrees(repo).items()
        if entry.get("branch") == branch_ref
        and Path(path) != own
        and is_task_checkout_of(repo, task_id, Path(path))
    ]


def _drop_other_hosts_checkout(repo: Path, path: Path) -> None:
    """Remove another host's checkout by git alone: its directory (when this host
    sees it) and its registration. Nothing outside this host's own root is ever
    deleted by hand; a checkout that host's disk holds where this one cannot see it
    loses its registration only (no ``worktree prune``: that would take every
    checkout this host cannot see, live ones of other hosts included).

    Only the repository's lock is taken: a checkout's lock lives in the state dir of
    the host that made it, so this host's lock on that path would keep no one out
    (and taking it after this host's own checkout's lock would invert the order
    :func:`worktrees.service.resume` takes them in). The caller holds the task (its
    claim or its landing), which is what keeps the other host away from it."""
    with repo_lock(repo):
        removal = ["worktree", "remove", "--force", "--force", str(path)]
        removed = run_git(removal, cwd=repo, check=False)
        if removed.returncode != 0 and is_registered(repo, path):
            raise GitError(removal, removed.returncode, removed.stderr)


def take_over_checkouts(repo: Path, task_id: str) -> list[Path]:
    """Let go of the checkouts other hosts made of ``task_id``'s branch, so this host
    can check it out (a task re-claimed here after its host lapsed, or landed here):
    the uncommitted work of one this host can see is committed to the branch first
    (``clawboo: pause task <id>``, as a pause does), then git removes it. One this
    host cannot see loses its registration only; what it never committed stays on
    its own host's disk. Returns the paths let go."""
    taken = []
    for elsewhere in other_hosts_checkouts(repo, task_id):
        if (elsewhere / ".git").exists():
            commit_all(elsewhere, pause_message(task_id))
        _drop_other_hosts_checkout(repo, elsewhere)
        taken.append(elsewhere)
    return taken


def remove_worktree_and_branch(repo: Path, task_id: str) -> None:
    """Clean-up after a landing or an empty completion: the checkout and its branch
    both go -- this host's checkout, and one another host sharing the repository
    made under its own state dir (:func:`other_hosts_checkouts`), else git would
    refuse to delete a branch checked out there."""
    branch = branch_for(task_id)
    path = worktree_path_for(repo, task_id)
    with path_lock(path):
        drop_checkout(repo, path, worktree_root())
        for elsewhere in other_hosts_checkouts(repo, task_id):
            _drop_other_hosts_checkout(repo, elsewhere)
        with repo_lock(repo):
            deleted = run_git(["branch", "-D", "--", branch], cwd=repo, check=False)
            # A branch already gone is what we wanted; one that stayed is a failure.
            if deleted.returncode != 0 and branch_tip(repo, branch) is not None:
                raise GitError(["branch", "-D", "--", branch], deleted.returncode, deleted.stderr)


def commit_worktree_work(path: Path, task_id: str) -> str:
    """Checkpoint whatever the runtime left uncommitted; returns the tip SHA."""
    with path_lock(path):
        commit_all(path, checkpoint_message(task_id))
        return git_out(["rev-parse", "HEAD"], cwd=path)


def review_path_for(repo: Path, sha: str) -> Path:
    return reviews_root() / repo_hash(repo) / sha[:12]


def provision_review_worktree(repo: Path, sha: str) -> Path:
    """A detached checkout at ``sha``: no branch, so a reviewer has nothing to push
    and no commit made there can move a task branch."""
    path = review_path_for(repo, sha)
    root = reviews_root()
    with path_lock(path):
        try:
            if path.is_dir() and head_ref(path) is None and is_registered(repo, path):
                verify_checkout(repo, path, branch=None, sha=sha)
                return path
        except (GitError, ProvisionFailed):
            pass
        last: Exception | None = None
        for _attempt in range(2):
            try:
                drop_checkout(repo, path, root)
                path.parent.mkdir(parents=True, exist_ok=True)
                with repo_lock(repo):
                    run_git(["worktree", "add", "-q", "--detach", str(path), sha], cwd=repo)
                if "detached" not in verify_checkout(repo, path, branch=None, sha=sha):
                    raise ProvisionFailed(f"{path} is not detached")
                return path
            except (GitError, ProvisionFailed, OSError) as exc:
                last = exc
        raise ProvisionFailed(f"could not provision review checkout {path}: {last}") from last


def remove_review_worktree(repo: Path, sha: str) -> None:
    """Drop the detached review checkout at ``sha`` (the critic's, once it is done)."""
    path = review_path_for(repo, sha)
    with path_lock(path):
        drop_checkout(repo, path, reviews_root())


# --- garbage collection -------------------------------------------------------


@dataclass
class GcReport:
    reaped: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"reaped": self.reaped, "skipped": self.skipped, "failures": self.failures}


@dataclass(frozen=True)
class _Candidate:
    task_id: str
    path: Path
    last_active: float


def _last_active(path: Path, git_dir: Path) -> float:
    """Newest of the checkout's own mtime, its index and its HEAD reflog: a cheap
    proxy for 'last touched' that needs no walk of the tree."""
    stamps = [path.stat().st_mtime]
    for name in ("index", "logs/HEAD", "HEAD"):
        try:
            stamps.append((git_dir / name).stat().st_mtime)
        except OSError:
            continue
    return max(stamps)


def _discover(root: Path, report: GcReport) -> list[_Candidate]:
    found: list[_Candidate] = []
    if not root.is_dir():
        return found
    for repo_dir in sorted(root.iterdir()):
        if repo_dir.is_symlink() or not repo_dir.is_dir():
            continue
        for path in sorted(repo_dir.iterdir()):
            if path.is_symlink() or not path.is_dir():
                report.skipped.append({"path": str(path), "reason": "not a checkout directory"})
                continue
            let_go = _let_go(path)
            if let_go is not None:
                # Never committed or removed: git would do it through the registration
                # another checkout holds now (another host's), or through none at all.
                reason = TAKEN_OVER.format(registration=let_go)
                log.warning("worktrees gc: skipped %s: %s", path, reason)
                report.skipped.append({"task_id": path.name, "path": str(path), "reason": reason})
                continue
            try:
                task_id = check_task_id(path.name)
                git_dir = Path(git_out(["rev-parse", "--absolute-git-dir"], cwd=path))
                found.append(_Candidate(task_id, path, _last_active(path, git_dir)))
            except (GitError, ValidationFailed, OSError) as exc:
                report.failures.append({"path": str(path), "error": str(exc)})
    return found


# A checkout of this host's whose registration another host let go when it took the
# task over (:func:`take_over_checkouts`) while this host's disk was out of its sight.
TAKEN_OVER = (
    "another host took it over: git no longer registers this checkout ({registration}), "
    "so its work cannot be saved to the branch; its files are kept -- copy what you need "
    "from it, then delete the directory"
)


def _let_go(path: Path) -> str | None:
    """What became of the registration a checkout's ``.git`` file names, when the
    repository (still there) no longer registers this checkout -- another host let it
    go when it took the task over -- else None. The registration is gone, or it is
    another checkout's now: git names one after its directory, and every host's
    checkout of a task is named for the task, so the taking host's own checkout can
    hold the very name. Git must not commit or remove such a checkout (it would do
    it through the other checkout's index), and nothing else can save its work."""
    dot_git = path / ".git"
    try:
        if not dot_git.is_file() or dot_git.is_symlink():
            return None
        text = dot_git.read_text(encoding="utf-8", errors="replace")[:4096].strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = Path(text.removeprefix("gitdir:").strip())
    if not target.is_absolute():
        target = path / target
    # ``<repository's git dir>/worktrees/<name>``, the repository still there.
    # (A .git naming anything else, or a repository gone, is a fault to report.)
    if target.parent.name != "worktrees" or not (target.parent.parent / "HEAD").is_file():
        return None
    if not target.exists():
        return f"{target} is gone"
    try:
        back = Path((target / "gitdir").read_text(encoding="utf-8").strip())
    except OSError:
        return None
    back = back if back.is_absolute() else target / back  # worktree.useRelativePaths
    if back.parent.resolve() == path.resolve():
        return None
    return f"{target} is the checkout at {back.parent} now"


def _repo_of(path: Path) -> Path:
    common = git_out(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=path)
    return Path(common).parent


def gc_worktrees(
    is_active: Callable[[str], bool],
    *,
    max_age_hours: float = GC_MAX_AGE_HOURS,
    keep: int = GC_KEEP,
    now: float | None = None,
    on_reaped: Callable[[str, Path], None] | None = None,
) -> GcReport:
    """Reap checkouts older than ``max_age_hours`` and all but the ``keep`` newest,
    and review checkouts older than ``max_age_hours``.

    Commit-before-drop (``clawboo: gc autosave task <id>``), branch kept. A task
    for which ``is_active`` is true is skipped; it is asked again inside the
    checkout's lock right before anything is dropped, so a task that became active
    mid-sweep is skipped too. A failure is recorded and the sweep goes on. Only
    directories under the worktree root are touched.
    """
    root = worktree_root()
    report = GcReport()
    clock = time.time() if now is None else now
    candidates = sorted(_discover(root, report), key=lambda c: c.last_active, reverse=True)
    horizon = clock - max_age_hours * 3600
    for rank, cand in enumerate(candidates):
        entry = {"task_id": cand.task_id, "path": str(cand.path)}
        if rank < keep and cand.last_active >= horizon:
            continue
        try:
            if is_active(cand.task_id):
                report.skipped.append({**entry, "reason": "active"})
                continue
            with path_lock(cand.path):
                # Liveness again, now that nothing else can touch this checkout.
                if is_active(cand.task_id):
                    report.skipped.append({**entry, "reason": "became active"})
                    continue
                if not cand.path.is_dir():
                    report.skipped.append({**entry, "reason": "already gone"})
                    continue
                _ensure_under(cand.path, root)
                repo = _repo_of(cand.path)
                commit_all(cand.path, gc_message(cand.task_id))
                drop_checkout(repo, cand.path, root)
            report.reaped.append(entry)
            if on_reaped is not None:
                on_reaped(cand.task_id, cand.path)
        except Exception as exc:  # noqa: BLE001 - one bad checkout must not stop the sweep
            report.failures.append({**entry, "error": f"{type(exc).__name__}: {exc}"})
    _gc_reviews(horizon, report)
    return report


def _gc_reviews(horizon: float, report: GcReport) -> None:
    """Drop review checkouts last touched before ``horizon``. They are detached and
    read-only copies of a commit (nothing to save), made again on the next review."""
    root = reviews_root()
    if not root.is_dir():
        return
    for repo_dir in sorted(root.iterdir()):
        if repo_dir.is_symlink() or not repo_dir.is_dir():
            continue
        for path in sorted(repo_dir.iterdir()):
            entry = {"review": path.name, "path": str(path)}
            if path.is_symlink() or not path.is_dir():
                report.skipped.append({**entry, "reason": "not a checkout directory"})
                continue
            try:
                with path_lock(path):
                    git_dir = Path(git_out(["rev-parse", "--absolute-git-dir"], cwd=path))
                    if _last_active(path, git_dir) >= horizon:
                        continue
                    drop_checkout(_repo_of(path), path, root)
                report.reaped.append(entry)
            except Exception as exc:  # noqa: BLE001 - one bad checkout must not stop the sweep
                report.failures.append({**entry, "error": f"{type(exc).__name__}: {exc}"})


__all__ = [
    "BRANCH_PREFIX",
    "BranchMissing",
    "Checkout",
    "Diffstat",
    "GcReport",
    "ProvisionFailed",
    "branch_for",
    "checkout_healthy",
    "commit_worktree_work",
    "find_baseline",
    "gc_worktrees",
    "is_task_checkout_of",
    "other_hosts_checkouts",
    "pause_worktree",
    "provision_review_worktree",
    "provision_worktree",
    "remove_worktree_and_branch",
    "resolve_commit",
    "resolve_repo",
    "resume_worktree",
    "take_over_checkouts",
    "work_diff",
    "worktree_path_for",
]
