"""Where ``clawboo worker`` takes its machine key from: never the command line unless
asked to (a process's argv is world-readable in /proc and ``ps``), a key file only
if it is its user's alone (as ssh asks of a key), the environment, or the key
``clawboo login`` stored for the same server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clawboo import cli
from core import machines, registry
from tests.conftest import ROOT
from tests.executor.test_remote_worker import SERVER_ENV, wait_for

NOWHERE = "http://127.0.0.1:9"  # nothing listens: these refusals come before any call


def worker(
    *argv: str, tmp_path: Path, env_add: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "CLAWBOO_TOKEN", "CLAWBOO_SERVER"):
        env.pop(name, None)
    env.update(env_add or {})
    cmd = [sys.executable, "-m", "clawboo.cli", "worker", *argv]
    cmd += ["--heartbeat", "0.5", "--cache-dir", str(tmp_path / "cache")]
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def key_file(tmp_path: Path, key: str, mode: int = 0o600) -> Path:
    path = tmp_path / "worker.key"
    path.write_text(key + "\n")
    path.chmod(mode)
    return path


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
@pytest.mark.parametrize("given", ["--token-file", "CLAWBOO_TOKEN"])
def test_a_running_workers_key_is_not_in_its_command_line(daphne, tmp_path, given):
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    if given == "--token-file":
        process = worker(
            "--server", base, "--token-file", str(key_file(tmp_path, key)), tmp_path=tmp_path
        )
    else:
        process = worker("--server", base, tmp_path=tmp_path, env_add={"CLAWBOO_TOKEN": key})
    log = tmp_path / "worker.log"
    try:
        wait_for(lambda: "connected to" in log.read_text(), 30, "connected", tmp_path=tmp_path)
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
        assert b"clawboo.cli\0worker" in cmdline
        assert key.encode() not in cmdline
        assert "warning" not in log.read_text()
    finally:
        stop(process)


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_key_on_the_command_line_still_works_and_is_warned_about(daphne, tmp_path):
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
    )
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    process = worker("--server", base, "--token", key, tmp_path=tmp_path)
    log = tmp_path / "worker.log"
    try:
        wait_for(lambda: "connected to" in log.read_text(), 30, "connected", tmp_path=tmp_path)
    finally:
        stop(process)
    assert cli.ARGV_KEY_WARNING in log.read_text()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_key_file_others_may_read_is_refused_in_one_line(tmp_path, mode):
    path = key_file(tmp_path, "k" * 40, mode)
    process = worker("--server", NOWHERE, "--token-file", str(path), tmp_path=tmp_path)
    assert process.wait(30) == 2
    said = (tmp_path / "worker.log").read_text()
    assert said == (
        f"clawboo worker: --token-file {path}: permissions {mode:04o} are too open (group"
        f" or others may read the key): chmod 600 {path}\n"
    )


def test_a_worker_with_no_key_says_where_one_goes_in_one_line(tmp_path):
    process = worker("--server", NOWHERE, tmp_path=tmp_path)
    assert process.wait(30) == 2
    said = (tmp_path / "worker.log").read_text()
    assert said.count("\n") == 1 and "--token-file PATH (chmod 600)" in said, said


def test_the_key_clawboo_login_stored_serves_that_server_only(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("CLAWBOO_TOKEN", raising=False)
    (tmp_path / "clawboo").mkdir()
    stored = {"server": "https://board.example/", "token": "stored-key", "username": "m"}
    (tmp_path / "clawboo" / "credentials.json").write_text(json.dumps(stored))
    assert cli.worker_token(None, None, "https://board.example") == "stored-key"
    with pytest.raises(cli.TokenUnusable):
        cli.worker_token(None, None, "https://elsewhere.example")
    monkeypatch.setenv("CLAWBOO_TOKEN", "env-key")
    assert cli.worker_token(None, None, "https://board.example") == "env-key"
    with pytest.raises(cli.TokenUnusable, match="not both"):
        cli.worker_token(str(tmp_path / "k"), "argv-key", "https://board.example")
