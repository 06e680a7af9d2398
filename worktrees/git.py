"""The one place Clawboo runs ``git``.

Every call is an argv list (never a shell string), bounded by a timeout so a hung
git cannot wedge a worker, with hooks switched off and a fixed commit identity so a
user's hooks or signing config can never block or alter a system commit.

A task's worktree shares its repository's git directory (objects, refs, config,
``info/``) with the server's own checkout, so what a builder writes there from its
worktree the server's git would read: replace refs and grafts (git shows and lands
another commit than the one named), and config that makes git run a command or go
elsewhere (``diff.external``, a textconv, merge or filter driver, ``core.sshCommand``,
``credential.helper``, ``url.*.insteadOf``, ...). The server's git follows neither
replace refs nor grafts (:func:`git_env`), and refuses to act on a repository whose
own config sets such a key (:class:`UnsafeRepositoryConfig`, naming it); the
operator's global config is the operator's and stays honoured.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import ClawbooError
from core.worker_environment import agent_environment

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

# A graft file git cannot open (ENOTDIR: read as none, and no deprecation hint):
# ``info/grafts`` in the shared git directory would rewrite a commit's parents.
_NO_GRAFTS = "/dev/null/clawboo-no-grafts"

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


class UnsafeRepositoryConfig(GitError):
    """The repository's own config (``.git/config``, or a worktree's
    ``config.worktree``) sets a key that would make the server's git run a command
    or reach somewhere else: nothing is run until the operator removes it."""

    def __init__(self, argv: Sequence[str], key: str, origin: str) -> None:
        ClawbooError.__init__(
            self,
            f"refused to run git {' '.join(argv)}: the repository's config sets {key} "
            f"({origin}), which would have the server's git run a command or reach "
            "another place; a task's worktree can write that file, so the server does "
            f"not act on it. Remove it (git config --unset-all {key}) or, if you set it, "
            "move it to the server user's global config.",
        )
        self.argv, self.returncode, self.stderr = list(argv), None, ""
        self.key, self.origin = key, origin


# Keys of the repository's own config (scopes ``local`` and ``worktree``; a builder
# writes them with ``git config`` in its worktree) that run a command in, or
# retarget, the server's git calls: every key of a section, a section's variable
# (with any subsection or none), or one key. Matched lowercased (git's own spelling of
# section and variable names). The forced ``-c`` keys above are overridden anyway.
_UNSAFE_SECTIONS = frozenset(
    {"include", "includeif", "filter", "credential", "url", "protocol", "uploadpack"}
)
_UNSAFE_SUBKEYS = {
    "diff": frozenset({"textconv", "command"}),
    "merge": frozenset({"driver"}),
    "remote": frozenset({"receivepack", "uploadpack", "proxy", "vcs"}),
    "http": frozenset({"proxy", "sslverify", "sslcainfo", "sslcapath"}),
}
_UNSAFE_KEYS = frozenset(
    {
        "diff.external",
        "core.sshcommand",
        "core.askpass",
        "core.gitproxy",
        "core.alternaterefscommand",
        "core.worktree",
    }
)
_LOCAL_SCOPES = frozenset({"local", "worktree"})


def unsafe_key(key: str) -> bool:
    """Whether the repository's own config may not set ``key`` (see above)."""
    lowered = key.lower()
    section, _, rest = lowered.partition(".")
    if section in _UNSAFE_SECTIONS or lowered in _UNSAFE_KEYS:
        return True
    subsection, _, variable = rest.rpartition(".")
    # ``remote.<url>.*``: git reads the remote named like the URL the server pushes
    # to or fetches from (its pushurl, its receivepack): no URL names a remote here.
    if section == "remote" and re.search(r"[:/]", subsection):
        return True
    return variable in _UNSAFE_SUBKEYS.get(section, frozenset())


# cwd -> the stat of its config files when they last read safe: unchanged files (a
# ``git config`` write renames a new file in) need no second look. Includes are
# refused, so no other file can change what those say.
_CHECKED: dict[str, tuple[object, ...]] = {}
_CHECKED_MAX = 4096


def _config_files(cwd: Path) -> list[Path] | None:
    dotgit = cwd / ".git"
    try:
        if dotgit.is_dir():
            return [dotgit / "config", dotgit / "config.worktree"]
        if not dotgit.is_file():
            return None
        gitdir = Path(dotgit.read_text().removeprefix("gitdir:").strip())
        gitdir = gitdir if gitdir.is_absolute() else cwd / gitdir
        common = gitdir / (gitdir / "commondir").read_text().strip()
    except (OSError, ValueError):
        return None
    return [common / "config", common / "config.worktree", gitdir / "config.worktree"]


def _stamp(cwd: Path) -> tuple[object, ...] | None:
    files = _config_files(cwd)
    if files is None:
        return None
    stamp: list[object] = []
    for path in files:
        try:
            st = path.stat()
        except FileNotFoundError:
            stamp.append(None)
            continue
        except OSError:
            return None
        # ctime too: a file rewritten in place with its mtime put back still moves it.
        stamp.append((st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))
    return tuple(stamp)


def check_repository_config(args: Sequence[str], cwd: str | Path, timeout: float) -> None:
    """Raise :class:`UnsafeRepositoryConfig` when the config of the repository at
    ``cwd`` (its own files, not the operator's global or system config) sets a key
    :func:`unsafe_key` names; a git that cannot read it at all fails as GitError."""
    where = Path(cwd)
    if not where.is_dir():
        return  # the call itself fails, as it always did
    stamp = _stamp(where)
    if stamp is not None and _CHECKED.get(str(where)) == stamp:
        return
    argv = ["config", "--list", "--show-scope", "--show-origin", "--name-only", "-z"]
    proc = _spawn(argv, where, timeout, None, text=True)
    if proc.returncode != 0:
        raise GitError(argv, proc.returncode, proc.stderr)
    fields = proc.stdout.split("\0")
    for scope, origin, key in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
        if scope in _LOCAL_SCOPES and unsafe_key(key):
            kind, _, name = origin.partition(":")
            if kind == "file" and not Path(name).is_absolute():
                origin = f"file:{where / name}"
            raise UnsafeRepositoryConfig(args, key, origin)
    if stamp is not None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()  # every task's worktree is a cwd: forget, look again
        _CHECKED[str(where)] = stamp


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # git in a checkout an agent wrote to may run what the agent planted there (a
    # filter driver its .gitattributes names, a config of the shared git directory):
    # it gets none of the server's own configuration (core.worker_environment).
    env = {k: v for k, v in agent_environment().items() if k not in _SCRUBBED_ENV}
    env.update(
        {
            "GIT_AUTHOR_NAME": IDENTITY_NAME,
            "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
            "GIT_COMMITTER_NAME": IDENTITY_NAME,
            "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
            "GIT_TERMINAL_PROMPT": "0",
            # refs/replace/* and info/grafts live in the git directory a builder's
            # worktree shares: git would show and land what they name instead.
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_GRAFT_FILE": _NO_GRAFTS,
            # Nothing the server runs opens an editor; if one ever did, it is none.
            "GIT_EDITOR": ":",
            "GIT_SEQUENCE_EDITOR": ":",
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


def blob_bytes(sha: str, *, cwd: str | Path, timeout: float = GIT_TIMEOUT_S) -> bytes:
    """A blob's content as bytes (``cat-file blob``): a file need not be text."""
    args = ["cat-file", "blob", sha]
    proc: subprocess.CompletedProcess[bytes] = _run(args, cwd, timeout, None, text=False)
    if proc.returncode != 0:
        raise GitError(args, proc.returncode, proc.stderr.decode(errors="replace"))
    return proc.stdout


# A commit as the server recorded it (``rev-parse`` output): never a flag or a range.
_COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
# A path is a name, not a pattern. (Objects are read as the commit names them, with
# no replace ref: git_env says so for every call.)
_LITERAL_PATHS = {"GIT_LITERAL_PATHSPECS": "1"}


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
        target = blob_bytes(entry[2], cwd=repo, timeout=timeout)
        linked = posixpath.normpath(
            posixpath.join(posixpath.dirname(path), target.decode(errors="replace"))
        )
        if linked.startswith(("/", "../")) or linked == "..":
            return None
        path, entry = linked, _tree_entry(repo, commit, linked, timeout)
    if entry is None or entry[0] not in ("100644", "100755"):
        return None
    data = blob_bytes(entry[2], cwd=repo, timeout=timeout)
    return CommittedFile(path, data[:limit], len(data))


def _tree_entry(
    repo: str | Path, commit: str, path: str, timeout: float
) -> tuple[str, str, str] | None:
    """(mode, type, object) of ``path`` in ``commit``'s tree, or None."""
    args = ["ls-tree", "-z", "--full-tree", commit, "--", path]
    out = run_git(args, cwd=repo, timeout=timeout, env=_LITERAL_PATHS).stdout
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
    check_repository_config(args, cwd, timeout)
    return _spawn(args, cwd, timeout, env, text=text)


def _spawn(
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
