"""What a reviewer sees of a task's work: the diff per file against its base (the
system-of-record files left out), the log tail, tokens and cost of each run, the
verification verdict with its evidence, the branch and its base.

Read-only: the diff of a retained checkout is taken from a snapshot tree (a
private index, :func:`worktrees.landing.snapshot_tree`), so reading it moves no
ref and touches neither the checkout's index nor its files. Big diffs are paged
by file (``offset``/``limit``) and capped in bytes (``max_bytes`` for the page;
one file's whole patch with ``path``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from board import store
from board.models import Task, Workspace, WorkspaceStatus
from core.errors import NotFound, ValidationFailed
from worktrees.git import GitError, run_git
from worktrees.landing import snapshot_tree
from worktrees.locks import path_lock
from worktrees.scaffold import SOR_FILES

DEFAULT_LIMIT = 50  # files per page
MAX_LIMIT = 500
DEFAULT_MAX_BYTES = 200_000  # patch text per page
MAX_BYTES = 2_000_000  # patch text of one page, or of one file asked by path
DEFAULT_LOG_CHARS = 4_000
MAX_LOG_CHARS = 64_000
_EXCLUDES = [f":(top,exclude){name}" for name in SOR_FILES]
# The files' own bytes, whatever the repository's config or attributes say: no
# external diff program and no textconv stands between a reviewer (a person, the
# critic) and the change.
PLAIN_DIFF = ("--no-ext-diff", "--no-textconv")
_PLAIN = ["--no-renames", *PLAIN_DIFF]


def _bounded(value: Any, name: str, default: int, low: int, high: int) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValidationFailed(name, "must be an integer") from None
    if not low <= number <= high:
        raise ValidationFailed(name, f"must be between {low} and {high}")
    return number


def _span(task: Task, ws: Workspace | None) -> tuple[Path, str, str, str] | None:
    """(where to run git, from, to, what it is) for the task's work, or None."""
    if ws is None:
        return None
    repo = Path(ws.repo_path)
    landed = (ws.landing or {}).get("commit")
    if ws.status == WorkspaceStatus.ARCHIVED:
        if landed:
            return repo, f"{landed}^1", landed, "landed"
        return None
    checkout = Path(ws.worktree_path)
    if ws.status == WorkspaceStatus.ACTIVE and checkout.is_dir():
        with path_lock(checkout):
            return checkout, ws.base_commit, snapshot_tree(checkout), "checkout"
    return repo, ws.base_commit, f"refs/heads/{ws.branch}", "branch"


def _numstat(where: Path, old: str, new: str) -> list[dict[str, Any]]:
    out = run_git(
        ["diff", *_PLAIN, "--numstat", "-z", old, new, "--", ".", *_EXCLUDES], cwd=where
    ).stdout
    files = []
    for record in filter(None, out.split("\0")):
        ins, dels, name = record.split("\t", 2)
        files.append(
            {
                "path": name,
                "insertions": None if ins == "-" else int(ins),
                "deletions": None if dels == "-" else int(dels),
                "binary": ins == "-",
            }
        )
    return files


def _patch(where: Path, old: str, new: str, path: str) -> str:
    return run_git(
        ["diff", *_PLAIN, "--no-color", old, new, "--", f":(top,literal){path}"],
        cwd=where,
    ).stdout


def _executions(task: Task, log_chars: int) -> list[dict[str, Any]]:
    rows = []
    for run, execution in store.numbered_executions(task.id, log_chars=log_chars):
        body = {**execution.as_dict(), "run": run}
        body["log_tail"] = execution.log_end  # type: ignore[attr-defined]
        body["log_truncated"] = execution.log_length > log_chars  # type: ignore[attr-defined]
        body["tokens"] = (
            execution.tokens_in
            + execution.tokens_out
            + execution.cache_read
            + execution.cache_write
        )
        rows.append(body)
    return rows


def review_of(
    task: Task,
    *,
    path: Any = None,
    offset: Any = None,
    limit: Any = None,
    max_bytes: Any = None,
    log_chars: Any = None,
) -> dict[str, Any]:
    """The review body of ``task`` (see the module docstring for the paging)."""
    first = _bounded(offset, "offset", 0, 0, 10**9)
    size = _bounded(limit, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    budget = _bounded(max_bytes, "max_bytes", DEFAULT_MAX_BYTES, 1, MAX_BYTES)
    tail = _bounded(log_chars, "log_chars", DEFAULT_LOG_CHARS, 0, MAX_LOG_CHARS)
    if path is not None and (not isinstance(path, str) or not path or len(path) > 4096):
        raise ValidationFailed("path", "must be the path of a file in the diff")
    ws = store.last_workspace(task.id)
    span = _span(task, ws)
    source = None if span is None else span[3]
    changed: list[dict[str, Any]] = []
    if span is not None:
        try:
            changed = _numstat(span[0], span[1], span[2])
        except GitError:
            source = "unavailable"  # its branch was deleted outside Clawboo
    stat = {
        "files_changed": len(changed),
        "insertions": sum(f["insertions"] or 0 for f in changed),
        "deletions": sum(f["deletions"] or 0 for f in changed),
    }
    if path is not None:
        page = [f for f in changed if f["path"] == path]
        if not page:
            raise NotFound(f"{path!r} is not among the files task {task.id!r} changed")
    else:
        page = changed[first : first + size]
    spent = 0
    for entry in page:
        assert span is not None
        text = _patch(span[0], span[1], span[2], entry["path"])
        room = max(budget - spent, 0)
        entry["truncated"] = len(text) > room
        entry["patch"] = text[:room] if room else None
        spent += min(len(text), room)
    following = first + len(page)
    nxt = following if path is None and following < len(changed) else None
    return {
        "task_id": task.id,
        "status": task.status,
        "title": task.title,
        "feedback": task.feedback,
        "workspace": None
        if ws is None
        else {
            "status": ws.status,
            "repo_path": ws.repo_path,
            "worktree_path": ws.worktree_path,
            "branch": ws.branch,
            "base_branch": ws.base_branch,
            "base_sha": ws.base_sha,
            "base_commit": ws.base_commit,
            "landing": ws.landing,
        },
        "diff": {
            "source": source,
            "stat": stat,
            "files": page,
            "offset": 0 if path is not None else first,
            "next_offset": nxt,
            "max_bytes": budget,
        },
        "verification": task.verification,
        "executions": _executions(task, tail),
        "cost": task.as_dict()["cost"],
    }
