"""A fresh install's first steps (issue 22): ``clawboo demo`` before ``up`` migrates
first and leaves its routine paused, and the state it creates is owner-only."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_demo_on_a_fresh_state_dir_migrates_and_everything_it_creates_is_owner_only(tmp_path):
    state = tmp_path / "fresh" / ".clawboo"
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "DJANGO_SECRET_KEY")
    }
    env.update(CLAWBOO_STATE_DIR=str(state), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-m", "clawboo.cli", "demo", "--dir", str(tmp_path / "demo")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "migration(s) applied" in done.stdout and "(paused;" in done.stdout
    assert mode(state) == 0o700
    for name in ("clawboo.sqlite3", "secret_key"):
        assert mode(state / name) == 0o600, name
    for name in ("clawboo.sqlite3-wal", "clawboo.sqlite3-shm"):
        if (state / name).exists():  # SQLite gives them the database file's mode
            assert mode(state / name) & 0o077 == 0, name
    with sqlite3.connect(state / "clawboo.sqlite3") as db:
        statuses = [row[0] for row in db.execute("SELECT status FROM scheduled_runs")]
    assert statuses == ["paused"]


def test_up_tightens_a_state_dir_others_could_read(tmp_path):
    from clawboo import boot

    state = tmp_path / "old"
    state.mkdir(mode=0o755)
    state.chmod(0o755)
    (state / "clawboo.sqlite3").write_bytes(b"")
    (state / "clawboo.sqlite3").chmod(0o644)
    said = boot.private_state(state)
    assert said and "made owner-only" in said
    assert mode(state) == 0o700 and mode(state / "clawboo.sqlite3") == 0o600
    assert boot.private_state(state) is None  # nothing left to change


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_commands_started_at_once_on_a_fresh_state_dir_share_one_secret_key(tmp_path):
    """The README's separate commands start together: each reads the one key the
    first to write it wrote whole, never an empty or a replaced one."""
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DATABASE_URL")}
    env.update(CLAWBOO_STATE_DIR=str(state), PYTHONPATH=str(ROOT))
    barrier = tmp_path / "go"
    code = (
        "import os, time\n"
        f"while not os.path.exists({str(barrier)!r}): time.sleep(0.001)\n"
        "from clawboo import settings\n"
        "print(settings.SECRET_KEY)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    barrier.touch()
    keys = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(keys) == 1 and len(keys.pop()) >= 50
    assert mode(state / "secret_key") == 0o600
    assert sorted(p.name for p in state.iterdir() if "secret" in p.name) == ["secret_key"]


def test_demo_beside_an_up_still_migrating_waits_for_it_then_runs(tmp_path):
    """The tour's second terminal, too early: `clawboo demo` while `up` still applied its
    migrations (its first run) migrated beside it, failed "table … already exists" and
    said "run `clawboo up` first" to a person whose `up` was running."""
    from clawboo import boot

    state = tmp_path / ".clawboo"
    state.mkdir(mode=0o700)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DJANGO_SECRET_KEY", "DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(CLAWBOO_STATE_DIR=str(state), PYTHONPATH=str(ROOT))
    lock = boot.hold_up_lock(state, "http://127.0.0.1:8123")  # an `up` runs here
    try:
        demo = subprocess.Popen(
            [sys.executable, "-m", "clawboo.cli", "demo", "--dir", str(tmp_path / "demo")],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert demo.stdout is not None
            first = demo.stdout.readline()  # it waits: this line comes before any work
            assert first == (
                "demo: waiting for the `clawboo up` serving http://127.0.0.1:8123 to finish"
                " migrating…\n"
            ), (first, demo.stderr.read() if demo.poll() is not None else "")
            # `up` migrates meanwhile, as its first run does.
            migrated = subprocess.run(
                [sys.executable, "-m", "clawboo.cli", "migrate", "-v", "0"],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert migrated.returncode == 0, migrated.stderr
            out, err = demo.communicate(timeout=180)
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
    finally:
        os.close(lock)
    assert demo.returncode == 0, err
    assert "migration(s) applied" not in out and "demo: ready." in out, out
