"""Landing an approved task's change on its base branch (the git half of approval).

The change is the task's checkout (committed, uncommitted and untracked work)
measured against where it meets the base branch, with the system-of-record files
put back as they were there — so neither the base branch's tree nor its history
ever carries ``TASK.md`` and the rest. It lands as one commit on top of the base
branch's tip (``squash``, the default) or as a merge of a one-commit rebuild of
the work (``merge``), chosen per repository. Everything is built with plumbing
(a private index file, ``merge-tree --write-tree``, ``commit-tree``): no checkout
of the user's repository is touched until the base branch moves, and a change
that does not apply cleanly lands nothing.

Landings in one repository are serialised across threads and processes by the
repository's landing lock (:func:`land_lock`, a per-path lock), so two approvals
never race for the base branch: the second lands on top of the first.

The base branch moves by compare-and-swap (``update-ref <new> <old>``), or, when a
checkout of the repository has it checked out (the usual ``main`` in the user's own
working tree), by ``merge --ff-only`` there, which refuses rather than overwrite
local edits.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from core.errors import Conflict, ValidationFailed
from worktrees.checks import check_base_ref
from worktrees.git import GitError, blob_bytes, git_out, run_git
from worktrees.locks import path_lock
from worktrees.scaffold import SOR_FILES

SQUASH = "squash"
MERGE = "merge"
STRATEGIES = (SQUASH, MERGE)
REWORK = "rework"  # a conflict sends the task back to its agent with the paths
BLOCK = "block"  # a conflict parks the task blocked with the paths as its reason
ON_CONFLICT = (REWORK, BLOCK)

# Per-repository settings, read from the repository's own git config
# (``git config clawboo.landing merge``); the Django settings give the defaults.
STRATEGY_KEY = "clawboo.landing"
ON_CONFLICT_KEY = "clawboo.onConflict"


class LandingFailed(Conflict):
    """The base branch could not be moved (it moved meanwhile, or its checkout has
    local edits in the way). Nothing landed; the task stays in review."""

    code = "landing_failed"


def land_message(task_id: str, title: str) -> str:
    return f"{title}\n\nclawboo: land task {task_id}"


@dataclass(frozen=True)
class Policy:
    strategy: str
    on_conflict: str


def _config(repo: Path, *keys: str) -> dict[str, str]:
    """The values ``keys`` have in the repository's git config (the last one wins, as
    with ``--get``; a key set to nothing is left out), read in one call."""
    wanted = {key.lower(): key for key in keys}  # git prints names in lower case
    pattern = "^(" + "|".join(re.escape(key) for key in wanted) + ")$"
    proc = run_git(["config", "-z", "--get-regexp", pattern], cwd=repo, check=False)
    found: dict[str, str] = {}
    if proc.returncode != 0:
        return found  # 1: none set
    for entry in proc.stdout.split("\0"):
        name, _, value = entry.partition("\n")
        if name.lower() in wanted:
            found[wanted[name.lower()]] = value.strip()
    return {key: value for key, value in found.items() if value}


def policy_for(repo: Path) -> Policy:
    """The repository's landing policy: its git config, else the settings' defaults.
    An unknown value is refused, not guessed."""
    configured = _config(repo, STRATEGY_KEY, ON_CONFLICT_KEY)
    strategy = configured.get(STRATEGY_KEY) or settings.CLAWBOO_LANDING
    on_conflict = configured.get(ON_CONFLICT_KEY) or settings.CLAWBOO_LANDING_ON_CONFLICT
    if strategy not in STRATEGIES:
        raise ValidationFailed(STRATEGY_KEY, f"must be one of {', '.join(STRATEGIES)}")
    if on_conflict not in ON_CONFLICT:
        raise ValidationFailed(ON_CONFLICT_KEY, f"must be one of {', '.join(ON_CONFLICT)}")
    return Policy(strategy, on_conflict)


def base_branch_of(repo: Path, wanted: Any = None) -> str:
    """The branch a task's change lands on: ``wanted`` (validated, must exist), else
    the branch the repository has checked out."""
    if wanted is not None:
        name = check_base_ref(wanted)
        proc = run_git(["show-ref", "--verify", "-q", f"refs/heads/{name}"], cwd=repo, check=False)
        if proc.returncode != 0:
            raise ValidationFailed("base_branch", f"no branch {name!r} in the repository")
        return name
    proc = run_git(["symbolic-ref", "-q", "--short", "HEAD"], cwd=repo, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise ValidationFailed(
            "base_branch", "the repository has no branch checked out: name the base branch"
        )
    return proc.stdout.strip()


@contextmanager
def land_lock(repo: Path) -> Iterator[None]:
    """One landing at a time per repository, across processes."""
    with path_lock(f"{repo}#land"):
        yield


@contextmanager
def _scratch_index(repo: Path) -> Iterator[dict[str, str]]:
    """A private index file, so building a tree never touches a checkout's own."""
    root = Path(settings.CLAWBOO_STATE_DIR) / "tmp"
    root.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="index-", dir=root)
    os.close(fd)
    os.unlink(name)  # git wants to create it itself
    try:
        yield {"GIT_INDEX_FILE": name}
    finally:
        for leftover in (name, name + ".lock"):
            if os.path.exists(leftover):
                os.unlink(leftover)


def snapshot_tree(checkout: Path) -> str:
    """The checkout as a tree object: HEAD plus every uncommitted and untracked
    (not ignored) change. Writes objects, moves nothing."""
    with _scratch_index(checkout) as env:
        run_git(["read-tree", "HEAD"], cwd=checkout, env=env)
        run_git(["add", "-A", "--", "."], cwd=checkout, env=env)
        return run_git(["write-tree"], cwd=checkout, env=env).stdout.strip()


def _tree_of(repo: Path, commit: str) -> str:
    return git_out(["rev-parse", f"{commit}^{{tree}}"], cwd=repo)


def _ls(repo: Path, treeish: str, path: str) -> tuple[str, str] | None:
    out = git_out(["ls-tree", "-z", treeish, "--", path], cwd=repo).rstrip("\0")
    if not out:
        return None
    meta, _, _name = out.partition("\t")
    mode, _kind, sha = meta.split()
    return mode, sha


def without_sor(repo: Path, tree: str, point: str) -> str:
    """``tree`` with each system-of-record file as it is at ``point`` (absent there:
    removed): the work alone."""
    with _scratch_index(repo) as env:
        run_git(["read-tree", tree], cwd=repo, env=env)
        for name in SOR_FILES:
            at_point = _ls(repo, point, name)
            if at_point is None:
                run_git(["update-index", "--force-remove", "--", name], cwd=repo, env=env)
            else:
                mode, sha = at_point
                run_git(
                    ["update-index", "--add", "--cacheinfo", f"{mode},{sha},{name}"],
                    cwd=repo,
                    env=env,
                )
        return run_git(["write-tree"], cwd=repo, env=env).stdout.strip()


def commit_tree(repo: Path, tree: str, parents: list[str], message: str) -> str:
    argv = ["commit-tree", tree]
    for parent in parents:
        argv += ["-p", parent]
    return run_git([*argv, "-m", message], cwd=repo).stdout.strip()


@dataclass
class Landing:
    """What an attempt to land did."""

    result: str  # landed | conflict | nothing
    base_branch: str
    strategy: str
    commit: str | None = None  # the new tip of the base branch (landed)
    previous_tip: str | None = None
    conflicts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _merge(repo: Path, ours: str, theirs: str) -> tuple[str | None, list[str]]:
    """``merge-tree --write-tree``: the merged tree, or the conflicting paths."""
    proc = run_git(
        ["merge-tree", "--write-tree", "--name-only", "-z", ours, theirs], cwd=repo, check=False
    )
    if proc.returncode not in (0, 1):
        raise GitError(["merge-tree", ours, theirs], proc.returncode, proc.stderr)
    head, _, _messages = proc.stdout.partition("\0\0")
    parts = [p for p in head.replace("\n", "\0").split("\0") if p]
    if proc.returncode == 0:
        return parts[0], []
    return None, sorted(set(parts[1:]))


def _checked_out_at(repo: Path, branch: str) -> Path | None:
    out = git_out(["worktree", "list", "--porcelain", "-z"], cwd=repo)
    path: str | None = None
    for entry in out.split("\0"):
        if entry.startswith("worktree "):
            path = entry[len("worktree ") :]
        elif entry == f"branch refs/heads/{branch}" and path is not None:
            return Path(path)
    return None


def _advance(repo: Path, branch: str, old: str, new: str) -> None:
    where = _checked_out_at(repo, branch)
    if where is None:
        proc = run_git(
            ["update-ref", "-m", "clawboo: land", f"refs/heads/{branch}", new, old],
            cwd=repo,
            check=False,
        )
        if proc.returncode != 0:
            raise LandingFailed(
                f"branch {branch} moved while the change was landing; approve again",
                branch=branch,
            )
        return
    proc = run_git(["merge", "--ff-only", "--quiet", new], cwd=where, check=False)
    if proc.returncode != 0:
        raise LandingFailed(
            f"could not move {branch} in its checkout {where}: "
            f"{(proc.stderr or proc.stdout).strip()[:1000]}",
            branch=branch,
        )


def prepare(
    repo: Path,
    checkout: Path,
    *,
    task_id: str,
    title: str,
    base_branch: str,
    strategy: str,
    onto: str | None = None,
) -> Landing:
    """Build the commit that would land the work in ``checkout`` on ``base_branch``
    (objects only: no ref, index or checkout of ``repo`` moves). ``landed`` with the
    commit to advance to, ``conflict`` with the paths, or ``nothing``. Call it
    under :func:`land_lock`. ``onto``: build on this commit instead of the branch's
    tip (the merge queue stacks each approval on the one before it)."""
    if strategy not in STRATEGIES:
        raise ValidationFailed("strategy", f"must be one of {', '.join(STRATEGIES)}")
    tip = onto or git_out(
        ["rev-parse", "--verify", f"refs/heads/{base_branch}^{{commit}}"], cwd=repo
    )
    head = git_out(["rev-parse", "HEAD"], cwd=checkout)
    point = git_out(["merge-base", head, tip], cwd=repo)
    work = without_sor(repo, snapshot_tree(checkout), point)
    outcome = Landing("nothing", base_branch, strategy, previous_tip=tip)
    if work == _tree_of(repo, point):
        return outcome
    rebuilt = commit_tree(repo, work, [point], land_message(task_id, title))
    merged, conflicts = _merge(repo, tip, rebuilt)
    if merged is None:
        outcome.result, outcome.conflicts = "conflict", conflicts
        return outcome
    if merged == _tree_of(repo, tip):
        return outcome  # already on the base branch
    parents = [tip, rebuilt] if strategy == MERGE else [tip]
    outcome.result = "landed"
    outcome.commit = commit_tree(repo, merged, parents, land_message(task_id, title))
    return outcome


def advance(repo: Path, outcome: Landing) -> None:
    """Move the base branch to the prepared commit (compare-and-swap, or a
    fast-forward of the checkout that has it checked out). :class:`LandingFailed`
    when it could not; nothing moved then."""
    assert outcome.commit is not None and outcome.previous_tip is not None
    _advance(repo, outcome.base_branch, outcome.previous_tip, outcome.commit)


def land(
    repo: Path, checkout: Path, *, task_id: str, title: str, base_branch: str, strategy: str
) -> Landing:
    """Land the work in ``checkout`` on ``base_branch`` of ``repo`` (under the
    repository's landing lock). A conflict lands nothing and names the paths;
    :class:`LandingFailed` when the branch could not be moved."""
    with land_lock(repo):
        outcome = prepare(
            repo,
            checkout,
            task_id=task_id,
            title=title,
            base_branch=base_branch,
            strategy=strategy,
        )
        if outcome.result == "landed":
            advance(repo, outcome)
        return outcome


# --- a landing killed half-way ------------------------------------------------------
#
# Every landing runs under the repository's landing lock from before its record is
# written until the board has recorded it, so whoever holds that lock and finds a
# record still pending knows its process died (or failed) mid-way: nobody else is
# landing in that repository. What git did is read from git itself.

# A lock git made just before the record's clock read it (clock skew between the
# database server and this host, a file system's coarse timestamps).
LOCK_SLACK_S = 2.0
# How long recovery waits for a git a killed landing left running to let go.
LOCK_WAIT_S = 10.0


def base_has(repo: Path, branch: str, commit: str) -> bool:
    """Whether ``commit`` is on ``branch`` (its tip or behind it)."""
    proc = run_git(
        ["merge-base", "--is-ancestor", commit, f"refs/heads/{branch}"], cwd=repo, check=False
    )
    if proc.returncode not in (0, 1):
        raise GitError(
            ["merge-base", "--is-ancestor", commit, branch], proc.returncode, proc.stderr
        )
    return proc.returncode == 0


def _git_dir(repo: Path) -> Path:
    return Path(git_out(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=repo))


def _lock_candidates(git_dir: Path) -> list[Path]:
    """The lock files a landing's git commands take: the index and HEAD of the
    repository and of each linked checkout, refs, packed-refs, the config; and
    ``packed-refs.new``, the file git writes packed-refs into under its lock (a git
    killed before renaming it leaves it, and every later ref deletion fails on it)."""
    found = [
        git_dir / name
        for name in ("index.lock", "HEAD.lock", "packed-refs.lock", "packed-refs.new")
    ]
    found.append(git_dir / "config.lock")
    found.append(git_dir / "ORIG_HEAD.lock")
    linked = git_dir / "worktrees"
    if linked.is_dir():
        for entry in linked.iterdir():
            found += [entry / "index.lock", entry / "HEAD.lock", entry / "ORIG_HEAD.lock"]
    refs = git_dir / "refs"
    if refs.is_dir():
        found += [p for p in refs.rglob("*.lock") if p.is_file()]
    return [p for p in found if p.is_file() and not p.is_symlink()]


def _held_open(path: Path) -> bool:
    """Whether a process this host can see has ``path`` open (a git at work)."""
    target = str(path)
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return False
    for pid_dir in proc_root.iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    return True
            except OSError:
                continue
    return False


def clear_stale_locks(repo: Path, since: float) -> list[str]:
    """Remove the git lock files a killed landing left in ``repo``: made at or
    after ``since`` (the oldest unsettled landing's start, epoch seconds) and held
    open by no process (a git it left running is waited for). Call it under
    :func:`land_lock`, and only when a pending landing record says a landing died.
    Returns the paths removed."""
    removed = []
    for lock in _lock_candidates(_git_dir(repo)):
        try:
            made = lock.stat().st_mtime
        except FileNotFoundError:
            continue
        if made < since - LOCK_SLACK_S:
            continue  # older than the landing: not its lock, not ours to judge
        deadline = time.monotonic() + LOCK_WAIT_S
        while _held_open(lock) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _held_open(lock):
            continue
        try:
            lock.unlink()
        except FileNotFoundError:
            continue  # its git finished and took it away
        removed.append(str(lock))
    return removed


def undo_partial_fast_forward(repo: Path, branch: str, before: str, intended: str) -> list[str]:
    """``merge --ff-only`` writes the checkout's files and index before it moves
    the branch: killed in between, the checkout that has ``branch`` checked out
    holds some of the landing's files while the branch did not move. Put every
    path the landing changes back as it is at ``before`` where it holds the
    landing's version (a path a person edited is left alone). Returns the paths."""
    where = _checked_out_at(repo, branch)
    if where is None:
        return []
    out = run_git(["diff", "--name-only", "-z", "--no-renames", before, intended], cwd=repo).stdout
    restore: list[str] = []
    drop: list[str] = []
    for path in filter(None, out.split("\0")):
        old = _ls(repo, before, path)
        new = _ls(repo, intended, path)
        current = _worktree_blob(where, path)
        if (
            current is not None
            and (new is None or current != new[1])
            and not (new is not None and _partly_written(repo, where / path, new[1]))
        ):
            continue  # not the landing's version: leave it as it is
        if old is not None:
            restore.append(path)
        else:
            drop.append(path)
    if restore:
        run_git(["checkout", before, "--", *restore], cwd=where)
    for path in drop:
        run_git(["rm", "-q", "--cached", "--ignore-unmatch", "--", path], cwd=where)
        target = where / path
        if target.is_file() or target.is_symlink():
            target.unlink()
    return restore + drop


def _partly_written(repo: Path, target: Path, blob: str) -> bool:
    """Whether the file at ``target`` is the start of ``blob``: git writes a file
    in place, so one killed mid-write leaves the landing's version cut short (an
    untracked file that would stop every later fast-forward), not a person's edit."""
    if target.is_symlink() or not target.is_file():
        return False
    proc = run_git(["cat-file", "-s", blob], cwd=repo, check=False)
    try:
        size = int(proc.stdout.strip())
        held = target.stat().st_size
    except (ValueError, OSError):
        return False
    if proc.returncode != 0 or held > size:
        return False
    with target.open("rb") as handle:
        part = handle.read()
    try:
        return blob_bytes(blob, cwd=repo).startswith(part)
    except GitError:
        return False


def _worktree_blob(where: Path, path: str) -> str | None:
    target = where / path
    if not (target.is_file() or target.is_symlink()):
        return None
    proc = run_git(["hash-object", "--", path], cwd=where, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else None
