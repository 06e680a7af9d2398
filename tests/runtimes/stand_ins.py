"""Stand-in agent CLIs: small real executables on PATH that speak the documented lines.

A stand-in named ``claude`` (or ``codex``, ``hermes``) is a Python script that reads
its scenario from ``<name>.scenario.json`` beside it, records its argv, cwd,
CLAWBOO_*/HERMES_* environment (and the directories the scenario names) to
``<name>.call.json``, runs the scenario's SQL against a store of the CLI's own,
prints the scenario's stdout lines,
and then exits, or hangs with a grandchild ``sleep`` whose pid it writes to
``<name>.grandchild`` -- so the real adapter code runs unchanged against it.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"

_SCRIPT = """#!{python}
import json, os, signal, subprocess, sys, time
me = os.path.abspath(__file__)
scenario = json.load(open(me + ".scenario.json"))
call = {{
    "argv": sys.argv[1:],
    "cwd": os.getcwd(),
    "env": {{k: v for k, v in os.environ.items() if k.startswith(("CLAWBOO_", "HERMES_"))}},
}}
# What the directory an env var names held while the CLI ran (e.g. HERMES_HOME).
for var in scenario.get("snapshot_dirs", []):
    directory = os.environ.get(var)
    if not directory or not os.path.isdir(directory):
        continue
    entries = {{}}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        entry = {{"link": os.readlink(path) if os.path.islink(path) else None}}
        if not os.path.islink(path) and os.path.isfile(path):
            entry["mode"] = oct(os.stat(path).st_mode & 0o777)
            entry["text"] = open(path).read()
        entries[name] = entry
    call.setdefault("dirs", {{}})[var] = {{
        "mode": oct(os.stat(directory).st_mode & 0o777),
        "entries": entries,
    }}
with open(me + ".call.json.tmp", "w") as f:
    json.dump(call, f)
os.replace(me + ".call.json.tmp", me + ".call.json")
# What the CLI writes to a SQLite store of its own (Hermes's session totals).
for database, statements in scenario.get("sqlite", []):
    import sqlite3
    db = sqlite3.connect(database)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()
for line in scenario.get("stdout", []):
    print(line, flush=True)
for line in scenario.get("stderr", []):
    print(line, file=sys.stderr, flush=True)
if scenario.get("usage_report") is not None and "--usage-file" in sys.argv:
    with open(sys.argv[sys.argv.index("--usage-file") + 1], "w") as f:
        f.write(scenario["usage_report"])
if scenario.get("hang"):
    if scenario.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen(["sleep", "300"])
    with open(me + ".grandchild.tmp", "w") as f:
        f.write(str(child.pid))
    os.replace(me + ".grandchild.tmp", me + ".grandchild")
    print(scenario.get("hang_marker", "hanging"), flush=True)
    while True:
        time.sleep(1)
sys.exit(scenario.get("exit", 0))
"""


@dataclass
class StandIn:
    path: Path

    def call(self) -> dict[str, Any]:
        """What the stand-in was run with: argv (without argv[0]), cwd, CLAWBOO_* and
        HERMES_* env, and ``dirs``: each ``snapshot_dirs`` directory's entries as it
        saw them (``link`` target, or ``mode`` and ``text`` of a file)."""
        return json.loads(Path(f"{self.path}.call.json").read_text())

    def grandchild_pid(self) -> int:
        return int(Path(f"{self.path}.grandchild").read_text())


def install_stand_in(
    bin_dir: Path,
    name: str,
    *,
    stdout: list[str] | None = None,
    stderr: list[str] | None = None,
    exit_code: int = 0,
    hang: bool = False,
    ignore_sigterm: bool = False,
    usage_report: str | None = None,
    snapshot_dirs: tuple[str, ...] = (),
    sqlite: tuple[tuple[str, list[str]], ...] = (),
) -> StandIn:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(_SCRIPT.format(python=sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    scenario = {
        "stdout": stdout or [],
        "stderr": stderr or [],
        "exit": exit_code,
        "hang": hang,
        "ignore_sigterm": ignore_sigterm,
        "usage_report": usage_report,
        "snapshot_dirs": list(snapshot_dirs),
        "sqlite": [list(entry) for entry in sqlite],
    }
    Path(f"{path}.scenario.json").write_text(json.dumps(scenario))
    return StandIn(path)


def fixture_lines(name: str) -> list[str]:
    return FIXTURES.joinpath(name).read_text().splitlines()


def real_lines(name: str) -> list[str]:
    """Lines a real tool printed (``fixtures/real/<tool>/...``, from shared/runtimes)."""
    return FIXTURES.joinpath("real", name).read_text().splitlines()


def real_text(name: str) -> str:
    return FIXTURES.joinpath("real", name).read_text()


def is_running(pid: int) -> bool:
    """True while ``pid`` is a live (non-zombie) process."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line[stat_line.rfind(")") + 2 :].split()[0] != "Z"


def wait_until_gone(pid: int, deadline_s: float = 5.0) -> bool:
    """Poll (with a deadline, not a fixed sleep) until ``pid`` is no longer running."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.02)
    return not is_running(pid)


def kill_if_running(pid: int) -> None:
    """Test cleanup: never leave a stray sleep behind even when an assertion failed."""
    if is_running(pid):
        os.kill(pid, 9)
