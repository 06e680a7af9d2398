"""The one place Clawboo runs ``git``.

Every call is an argv list (never a shell string), bounded by a timeout so a hung
git cannot wedge a worker, with hooks switched off and a fixed commit identity so a
user's hooks or signing config can never block or alter a system commit.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ClawbooError

GIT_TIMEOUT_S = 60.0
IDENTITY_NAME = "clawboo"
IDENTITY_EMAIL = "clawboo@localhost"

# Config forced on every invocation: no hooks (a repo's pre-commit must not run on
# our scaffold/autosave commits), no signing prompts, no pager, no fsmonitor daemon,
# and no housekeeping after each of our commits (git's auto-maintenance would run
# on every task's scaffold and checkpoint commits; the repo's owner keeps theirs).
_FORCED_CONFIG = (
    "maintenance.auto=false",
    "gc.auto=0",
    "core.hooksPath=/dev/null",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    f"user.name={IDENTITY_NAME}",
    f"user.email={IDENTITY_EMAIL}",
    "core.pager=cat",
    "core.fsmonitor=false",
    "advice.detachedHead=false",
)

# Inherited variables that would silently retarget git at another repository or
# index (e.g. when Clawboo itself runs from inside a git hook).
_SCRUBBED_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)


class GitError(ClawbooError):
    """A git command failed, timed out, or could not be started."""

    code = "git_failed"

    def __init__(self, argv: Sequence[str], returncode: int | None, stderr: str) -> None:
        shown = " ".join(argv)
        reason = "timed out" if returncode is None else f"exited {returncode}"
        super().__init__(f"git {shown} {reason}: {stderr.strip()[:2000]}")
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
    env.update(
        {
            "GIT_AUTHOR_NAME": IDENTITY_NAME,
            "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
            "GIT_COMMITTER_NAME": IDENTITY_NAME,
            "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
            "GIT_TERMINAL_PROMPT": "0",
            # Stable, parseable messages regardless of the operator's locale.
            "LC_ALL": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


def run_git(
    args: Sequence[str],
    *,
    cwd: str | Path,
    timeout: float = GIT_TIMEOUT_S,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``git <args>`` in ``cwd`` and return the completed process.

    Raises :class:`GitError` (with git's stderr) on a non-zero exit when ``check``,
    on a timeout, and when git cannot be started at all. Callers validate every
    user-supplied id or ref before it gets here (see :mod:`worktrees.checks`).
    """
    proc: subprocess.CompletedProcess[str] = _run(args, cwd, timeout, env, text=True)
    if check and proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr or proc.stdout)
    return proc


def blob_bytes(
    sha: str,
    *,
    cwd: str | Path,
    timeout: float = GIT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> bytes:
    """A blob's content as bytes (``cat-file blob``): a file need not be text."""
    args = ["cat-file", "blob", sha]
    proc: subprocess.CompletedProcess[bytes] = _run(args, cwd, timeout, env, text=False)
    if proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout


# A commit as the server recorded it (``rev-parse`` output): never a flag or a range.
_COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# Objects exactly as the commit names them: ``refs/replace/`` lives in the repository's
# shared git directory, which a builder in one of its worktrees can write. A path is
# a name, not a pattern.
_NO_REPLACE = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_LITERAL_PATHSPECS": "1"}


@dataclass(frozen=True)
class CommittedFile:
    """A file of a commit's tree: its first ``limit`` bytes and its whole size."""

    path: str
    data: bytes
    size: int

    @property
    def cut(self) -> bool:
        return len(self.data) < self.size


def committed_file(
    repo: str | Path, commit: str, path: str, *, limit: int, timeout: float = GIT_TIMEOUT_S
) -> CommittedFile | None:
    """``path`` as ``commit`` holds it (``git ls-tree`` + ``cat-file``), never as a
    checkout of it now reads: None when the tree has no regular file there. A symbolic
    link is followed once, inside the tree (``CLAUDE.md -> AGENTS.md``); one that
    leaves the tree or names another link is None. ``data`` is at most ``limit``
    bytes (``size`` says how long the file is)."""
    if not _COMMIT_ID.fullmatch(commit):
        raise GitError(["ls-tree", commit], -1, "not a full commit id")
    entry = _tree_entry(repo, commit, path, timeout)
    if entry is not None and entry[0] == "120000":
        target = blob_bytes(entry[2], cwd=repo, timeout=timeout, env=_NO_REPLACE)
        linked = posixpath.normpath(
            posixpath.join(posixpath.dirname(path), target.decode(errors="replace"))
        )
        if linked.startswith(("/", "../")) or linked == "..":
            return None
        path, entry = linked, _tree_entry(repo, commit, linked, timeout)
    if entry is None or entry[0] not in ("100644", "100755"):
        return None
    data = blob_bytes(entry[2], cwd=repo, timeout=timeout, env=_NO_REPLACE)
    return CommittedFile(path, data[:limit], len(data))


def _tree_entry(
    repo: str | Path, commit: str, path: str, timeout: float
) -> tuple[str, str, str] | None:
    """(mode, type, object) of ``path`` in ``commit``'s tree, or None."""
    args = ["ls-tree", "-z", "--full-tree", commit, "--", path]
    out = run_git(args, cwd=repo, timeout=timeout, env=_NO_REPLACE).stdout
    for record in out.split("\0"):
        meta, _, name = record.partition("\t")
        fields = meta.split()
        if name == path and len(fields) == 3:
            return fields[0], fields[1], fields[2]
    return None


def _run(
    args: Sequence[str],
    cwd: str | Path,
    timeout: float,
    env: Mapping[str, str] | None,
    *,
    text: bool,
) -> subprocess.CompletedProcess[Any]:
    argv = ["git"]
    for item in _FORCED_CONFIG:
        argv += ["-c", item]
    argv += list(args)
    try:
        return subprocess.run(  # noqa: S603 - an argv list
            argv,
            cwd=str(cwd),
            env=git_env(env),
            capture_output=True,
            text=text,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr if isinstance(exc.stderr, str) else ""
        raise GitError(args, None, stderr or f"no answer within {timeout:g}s") from None
    except OSError as exc:
        raise GitError(args, -1, str(exc)) from None


def git_out(args: Sequence[str], *, cwd: str | Path, timeout: float = GIT_TIMEOUT_S) -> str:
    """``run_git`` and return stdout without the trailing newline."""
    return run_git(args, cwd=cwd, timeout=timeout).stdout.rstrip("\n")
