"""What ``clawboo up`` does before it starts serving: migrate, the boot passes and the
first admin. Each step is a function returning what it did, so the command prints
one line per step and a test can call a step alone.

The boot passes are best-effort: a failing pass is reported and boot goes on, because
a server that refuses to start over a stuck row is worse than one that starts and lets
the interval sweep and the operator deal with it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

log = logging.getLogger(__name__)

FIRST_ADMIN_USERNAME = "admin"
# How long boot waits for the worktree GC before leaving it to finish in the background.
GC_WAIT_S = 5.0


def pending_migrations() -> int:
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def migrate() -> int:
    """Apply every pending migration quietly; returns how many were applied."""
    pending = pending_migrations()
    if pending:
        call_command("migrate", interactive=False, verbosity=0)
    return pending


PRIVATE_FILES = ("clawboo.sqlite3", "clawboo.sqlite3-wal", "clawboo.sqlite3-shm", "secret_key")


def private_state(state_dir: Path) -> str | None:
    """Make the state dir (0700) and its database and key files (0600) owner-only if
    others could read them (a state dir from before this was the default); returns
    what it changed, or None. The database holds every API token."""
    changed = []
    if state_dir.is_dir() and state_dir.stat().st_mode & 0o077:
        state_dir.chmod(0o700)
        changed.append(str(state_dir))
    for name in PRIVATE_FILES:
        path = state_dir / name
        if path.is_file() and path.stat().st_mode & 0o077:
            path.chmod(0o600)
            changed.append(name)
    return ", ".join(changed) + " made owner-only" if changed else None


# A running `up` holds this file locked (flock) for its life, its address written in
# it: a second `up` of the same state dir is refused (its boot passes would release
# the tasks the first one's workers hold, and both would run every worker), and
# `clawboo demo` prints links on the port it serves. The lock goes with the process,
# however it ends, so a stale address is never believed.
UP_LOCK_FILE = "up.lock"


class AlreadyUp(Exception):
    """Another process runs ``up`` on this state dir."""

    def __init__(self, address: str | None) -> None:
        super().__init__(address or "an address it has not written yet")
        self.address = address


def hold_up_lock(state_dir: Path, base: str) -> int:
    """Take this state dir's ``up`` lock and write ``base`` in it; returns the file
    descriptor, which holds the lock until it is closed or the process ends. Raises
    :class:`AlreadyUp` when another process holds it."""
    state_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    fd = os.open(state_dir / UP_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise AlreadyUp(served_address(state_dir)) from None
    os.ftruncate(fd, 0)
    os.write(fd, (base + "\n").encode())
    return fd


def served_address(state_dir: Path) -> str | None:
    """The base URL the ``up`` of this state dir serves on while it runs; None when
    no ``up`` holds its lock (never started, stopped, or killed)."""
    try:
        fd = os.open(state_dir / UP_LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: an `up` runs
            return os.read(fd, 1024).decode(errors="replace").strip() or None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def database_label() -> str:
    settings_dict = connections[DEFAULT_DB_ALIAS].settings_dict
    vendor = connections[DEFAULT_DB_ALIAS].vendor
    if vendor == "sqlite":
        return f"sqlite {settings_dict['NAME']}"
    return f"{vendor} {settings_dict.get('HOST') or 'localhost'}/{settings_dict['NAME']}"


def board_passes() -> str:
    """Orphan reconciliation, the stale sweep, the lapse sweep (each best-effort)."""
    from board.store import run_boot_passes

    result = run_boot_passes()
    return (
        f"{len(result['orphans'])} orphaned task(s) released, "
        f"{len(result['stale'])} stale task(s) released, "
        f"{len(result['lapsed'])} lapsed lease(s) released"
    )


def routine_boot_resume() -> str:
    from routines.store import boot_resume

    report = boot_resume()
    return (
        f"{len(report.requeued)} requeued, {len(report.rearmed)} re-armed, "
        f"{len(report.errored)} errored"
    )


def landing_recovery() -> str:
    """Settle every approval a killed process left half-way (complete it when its
    commit is on the base branch, else roll it back), clearing git's stale locks.
    Another host's (or state dir's) landing may be running now: it is settled here
    only once long past (:func:`worktrees.service.settled_here_now`)."""
    from worktrees.service import recover_landings, settled_here_now

    settled = recover_landings(settled_here_now)
    completed = sum(1 for entry in settled if entry["result"] == "completed")
    return f"{completed} completed, {len(settled) - completed} rolled back"


def intake_recovery() -> str:
    """Queue again every remote worker's submission an intake never finished (a
    killed qcluster worker); queued, not run here, so boot never waits on git or a
    verify command."""
    from board.store import pending_intakes
    from worktrees.intake import enqueue

    pending = pending_intakes()
    for task_id in pending:
        enqueue(task_id)
    return f"{len(pending)} remote submission(s) queued for intake"


def worktree_gc(say: Callable[[str], None], wait_s: float = GC_WAIT_S) -> str:
    """Run the worktree GC in a thread; wait a little, then let it finish unwatched.

    Git over many checkouts can be slow, and boot must never wait on it; when it
    finishes late its line is printed then.
    """
    from worktrees import service

    done = threading.Event()
    result: dict[str, str] = {}

    def run() -> None:
        try:
            report = service.gc()
            line = (
                f"{len(report['reaped'])} reaped, {len(report['skipped'])} skipped, "
                f"{len(report['failures'])} failure(s)"
            )
        except Exception as exc:  # best-effort: a broken repo must not stop boot
            log.debug("worktree gc failed", exc_info=True)
            line = f"failed ({one_line(exc)}); continuing"
        finally:
            connections.close_all()
        result["line"] = line
        done.set()
        if late.is_set():
            say(f"worktree gc: {line}")

    late = threading.Event()
    threading.Thread(target=run, name="worktrees-gc", daemon=True).start()
    if done.wait(wait_s):
        return result["line"]
    late.set()
    if done.is_set():  # finished between the wait and setting the flag
        return result["line"]
    return "running in the background"


def ensure_first_admin() -> tuple[str, str] | None:
    """On an empty user table, create superuser ``admin`` with a random password.

    Returns ``(username, password)`` only when it created the user; the password is
    never stored in clear anywhere, so this is the one chance to print it.
    """
    user_model = get_user_model()
    if user_model.objects.exists():
        return None
    password = secrets.token_urlsafe(12)
    user_model.objects.create_superuser(username=FIRST_ADMIN_USERNAME, email="", password=password)
    return FIRST_ADMIN_USERNAME, password


def best_effort(step: Callable[[], str]) -> str:
    try:
        return step()
    except Exception as exc:
        log.debug("boot step failed", exc_info=True)
        return f"failed ({one_line(exc)}); continuing"


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
