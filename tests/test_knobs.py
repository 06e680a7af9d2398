"""Every ``CLAWBOO_*`` knob the README and docs/ name is a setting read from the
environment in ``clawboo/settings.py``: a real process started with the variable
set sees it in ``django.conf.settings`` (no knob is read with a ``getattr`` default
that silently ignores the environment)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KNOB = re.compile(r"\bCLAWBOO_[A-Z0-9_]*[A-Z0-9]\b")

# knob -> (the value set in the environment, the setting it reaches, what it reads as)
SETTINGS: dict[str, tuple[str, str, Any]] = {
    "CLAWBOO_REDIS_URL": ("redis://127.0.0.1:1/9", "CLAWBOO_REDIS_URL", "redis://127.0.0.1:1/9"),
    "CLAWBOO_BOARD_STALE_TTL_MS": ("181000", "CLAWBOO_BOARD_STALE_TTL_MS", 181000),
    "CLAWBOO_BOARD_STALE_SWEEP_MS": ("120000", "CLAWBOO_BOARD_STALE_SWEEP_MS", 120000),
    "CLAWBOO_APPROVAL_TTL_MS": ("1000", "CLAWBOO_APPROVAL_TTL_MS", 1000),
    "CLAWBOO_TOOL_APPROVAL_TIMEOUT_MS": ("2000", "CLAWBOO_TOOL_APPROVAL_TIMEOUT_MS", 2000),
    "CLAWBOO_DB_WRITE_BUDGET_MS": ("2500", "CLAWBOO_DB_WRITE_BUDGET_MS", 2500),
    "CLAWBOO_DB_POOL_MAX_SIZE": ("12", "CLAWBOO_DB_POOL_MAX_SIZE", 12),
    "CLAWBOO_DB_POOL_MIN_SIZE": ("3", "CLAWBOO_DB_POOL_MIN_SIZE", 3),
    "CLAWBOO_DB_POOL_TIMEOUT_S": ("45", "CLAWBOO_DB_POOL_TIMEOUT_S", 45),
    "CLAWBOO_HISTORY_RETENTION_DAYS": ("7", "CLAWBOO_HISTORY_RETENTION_DAYS", 7),
    "CLAWBOO_HISTORY_MAX_EVENTS": ("99", "CLAWBOO_HISTORY_MAX_EVENTS", 99),
    "CLAWBOO_HEARTBEAT_MS": ("4000", "CLAWBOO_HEARTBEAT_MS", 4000),
    "CLAWBOO_RUNLOG_MAX_BYTES": ("4096", "CLAWBOO_RUNLOG_MAX_BYTES", 4096),
    "CLAWBOO_HTTP_RATE_LIMIT": ("11", "CLAWBOO_HTTP_RATE_LIMIT", 11),
    "CLAWBOO_LANDING": ("merge", "CLAWBOO_LANDING", "merge"),
    "CLAWBOO_LANDING_ON_CONFLICT": ("block", "CLAWBOO_LANDING_ON_CONFLICT", "block"),
    "CLAWBOO_MERGE_BATCH": ("3", "CLAWBOO_MERGE_BATCH", 3),
    "CLAWBOO_MAX_REBASE_ROUNDS": ("2", "CLAWBOO_MAX_REBASE_ROUNDS", 2),
    "CLAWBOO_FORGE_POLL_S": ("300", "CLAWBOO_FORGE_POLL_S", 300),
    "CLAWBOO_SECRET_SETTINGS": ("a,b", "CLAWBOO_SECRET_SETTINGS", ["a", "b"]),
    "CLAWBOO_AGENT_ALLOWLIST": (
        '[{"runtime": "codex", "settings": {}}]',
        "CLAWBOO_AGENT_ALLOWLIST",
        [{"runtime": "codex", "settings": {}}],
    ),
    "CLAWBOO_TASK_COMMAND_ALLOWLIST": (
        '["make test"]',
        "CLAWBOO_TASK_COMMAND_ALLOWLIST",
        ["make test"],
    ),
    "CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS": ("5000", "CLAWBOO_ROUTINE_OPENCLAW_TIMEOUT_MS", 5000),
    "CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS": (
        "6000",
        "CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS",
        6000,
    ),
    "CLAWBOO_OPENCLAW_GATEWAY_URL": (
        "ws://127.0.0.1:1",
        "CLAWBOO_OPENCLAW_GATEWAY_URL",
        "ws://127.0.0.1:1",
    ),
    "CLAWBOO_OPENCLAW_TOKEN": ("tok", "CLAWBOO_OPENCLAW_TOKEN", "tok"),
    "CLAWBOO_MCP_URL": ("http://x/mcp/", "CLAWBOO_MCP_URL", "http://x/mcp/"),
    "CLAWBOO_HEALTH_PARTS": ("ticker,workers", "CLAWBOO_HEALTH_PARTS", ["ticker", "workers"]),
    "CLAWBOO_HEALTH_BEAT_STALE_MS": ("70000", "CLAWBOO_HEALTH_BEAT_STALE_MS", 70000),
    "CLAWBOO_BEAT_MS": ("3000", "CLAWBOO_BEAT_MS", 3000),
    "CLAWBOO_METRICS_TOKEN": ("m", "CLAWBOO_METRICS_TOKEN", "m"),
    "CLAWBOO_VERIFY_REQUIRED": ("false", "CLAWBOO_VERIFY_REQUIRED", False),
    "CLAWBOO_MAX_FIX_CYCLES": ("4", "CLAWBOO_MAX_FIX_CYCLES", 4),
    "CLAWBOO_CRITIC_MIN_FILES": ("8", "CLAWBOO_CRITIC_MIN_FILES", 8),
    "CLAWBOO_CRITIC_MIN_LINES": ("900", "CLAWBOO_CRITIC_MIN_LINES", 900),
    "CLAWBOO_NOTIFY_MAX_ATTEMPTS": ("2", "CLAWBOO_NOTIFY_MAX_ATTEMPTS", 2),
    "CLAWBOO_NOTIFY_TIMEOUT_S": ("3", "CLAWBOO_NOTIFY_TIMEOUT_S", 3),
    "CLAWBOO_NOTIFY_SENDERS": ("1", "CLAWBOO_NOTIFY_SENDERS", 1),
    "CLAWBOO_NOTIFY_FROM": ("ops@example.com", "DEFAULT_FROM_EMAIL", "ops@example.com"),
    "CLAWBOO_PUBLIC_URL": ("https://b.example/", "CLAWBOO_PUBLIC_URL", "https://b.example"),
    "CLAWBOO_INTAKE_LEASE_MS": ("7000", "CLAWBOO_INTAKE_LEASE_MS", 7000),
    "CLAWBOO_LEASE_MAX_MS": ("90000", "CLAWBOO_LEASE_MAX_MS", 90000),
    "CLAWBOO_INTAKE_RECOVER_S": ("9", "CLAWBOO_INTAKE_RECOVER_S", 9),
    "CLAWBOO_REMOTE_GIT_TIMEOUT_S": ("8", "CLAWBOO_REMOTE_GIT_TIMEOUT_S", 8),
    "CLAWBOO_BREAKER_FAILURES": ("7", "CLAWBOO_BREAKER_FAILURES", 7),
    "CLAWBOO_HEALTH_PROBE_MS": ("1234", "CLAWBOO_HEALTH_PROBE_MS", 1234),
    "CLAWBOO_HEALTH_VERSION_PROBE": ("false", "CLAWBOO_HEALTH_VERSION_PROBE", False),
}
# Knobs whose value is a path or a table, or that reach a part of one: checked by hand
# below (CLAWBOO_ALLOW_GENERATED_SECRET by its own test).
SPECIAL = {
    "CLAWBOO_STATE_DIR",
    "CLAWBOO_REPO_ROOTS",
    "CLAWBOO_MODEL_PRICES",
    "CLAWBOO_Q_WORKERS",
    "CLAWBOO_LOG_LEVEL",
    "CLAWBOO_ALLOW_GENERATED_SECRET",
}
# Named in the docs but not the server's settings: the environment a run's process is
# given (the runtime reads it), the remote worker's and the people's client's own
# environment (they run without the server's settings), and the test suite's and CI's
# switches.
NOT_SERVER_SETTINGS = {
    "CLAWBOO_MCP_TOKEN": "given to a run's process",
    "CLAWBOO_PROMPT_FILE": "given to a run's process",
    "CLAWBOO_TASK_ID": "given to a run's process",
    "CLAWBOO_TASK_TITLE": "given to a run's process",
    "CLAWBOO_TASK_FILE": "given to a run's process",
    "CLAWBOO_HANDOFF_FILE": "given to a run's process",
    "CLAWBOO_REVIEW_BASE": "given to a critic's review run",
    "CLAWBOO_REVIEW_HEAD": "given to a critic's review run",
    "CLAWBOO_TOKEN": "the remote worker's --token, and the people's client's key",
    "CLAWBOO_SERVER": "the people's client (clawboo login, task, …): the server's URL",
    "CLAWBOO_WORKER_DIR": "the remote worker's --dir",
    "CLAWBOO_WORKER_GIT_TIMEOUT_S": "the remote worker's own environment (its git calls)",
    "CLAWBOO_RUNTIMES_DIR": "the real-runtime test tier",
    "CLAWBOO_TEST_DATABASE_URL": "the test suite",
    "CLAWBOO_TEST_REDIS_URL": "the test suite",
    "CLAWBOO_TEST_EVERYTHING": "the test suite",
    "CLAWBOO_SCREENSHOTS": "the test suite",
    "CLAWBOO_BENCH_TEMPLATE_DIR": "the test suite (the bench smoke tests)",
    "CLAWBOO_CI_OVERLAP": "CI",
    "CLAWBOO_CI_WORKERS": "CI (pytest-xdist workers per pass)",
    "CLAWBOO_TEST_FORK_SERVERS": "the test suite (forked test servers, or not)",
    "CLAWBOO_STALL_MS": "read by each worker (local or remote) from its own environment",
}


# Read from the environment but no operator's to set: the supervisor marks its own
# children with it.
INTERNAL = {"CLAWBOO_DIE_WITH_PARENT": "set by clawboo up's supervisor for its children"}
PRODUCT = ("clawboo", "core", "board", "worktrees", "boardmcp", "executor", "routines", "ops")
# How product code reads a variable: os.environ.get/[...], os.getenv, the settings' env_*.
READ = re.compile(
    r"(?:environ\.get\(|environ\[|getenv\(|env_(?:int|bool|json)\()\s*\"(CLAWBOO_[A-Z0-9_]+)\""
)


def documented_knobs() -> set[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {name for page in pages for name in KNOB.findall(page.read_text())}


def settings_seen_with(env: dict[str, str], names: list[str]) -> dict[str, Any]:
    """The named settings as a fresh process with ``env`` reads them."""
    script = (
        "import json, django; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {names!r}}}, default=str))"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CLAWBOO_")}
    done = subprocess.run(  # noqa: S603 - this interpreter, an argv list
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "clawboo.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_knob_the_docs_name_is_a_setting_or_said_not_to_be():
    named = documented_knobs()
    unknown = named - set(SETTINGS) - SPECIAL - set(NOT_SERVER_SETTINGS)
    assert not unknown, f"documented knobs with no setting test: {sorted(unknown)}"
    # The table is not stale either: every knob in it is documented.
    assert set(SETTINGS) | SPECIAL <= named, sorted((set(SETTINGS) | SPECIAL) - named)


def test_every_knob_the_product_reads_from_the_environment_is_documented():
    read = {
        name
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
        for name in READ.findall(path.read_text())
    }
    assert "CLAWBOO_STATE_DIR" in read and "CLAWBOO_TOKEN" in read  # the pattern finds them
    undocumented = read - documented_knobs() - set(INTERNAL)
    assert not undocumented, f"read but not in README.md or docs/: {sorted(undocumented)}"


def test_setting_each_knob_in_the_environment_reaches_its_setting(tmp_path: Path):
    repos = tmp_path / "repos"
    repos.mkdir()
    env = {knob: value for knob, (value, _, _) in SETTINGS.items()}
    env |= {
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "CLAWBOO_REPO_ROOTS": str(repos),
        "CLAWBOO_MODEL_PRICES": json.dumps({"m9": {"in": 1, "out": 2}}),
        "CLAWBOO_Q_WORKERS": "3",
        "CLAWBOO_LOG_LEVEL": "WARNING",
    }
    names = sorted({name for _, name, _ in SETTINGS.values()})
    seen = settings_seen_with(
        env,
        [
            *names,
            "CLAWBOO_STATE_DIR",
            "CLAWBOO_REPO_ROOTS",
            "CLAWBOO_MODEL_PRICES",
            "Q_CLUSTER",
            "LOGGING",
        ],
    )
    wrong = {
        knob: (seen[name], expected)
        for knob, (_, name, expected) in SETTINGS.items()
        if seen[name] != expected
    }
    assert not wrong, f"knobs the environment did not reach (seen, expected): {wrong}"
    assert seen["CLAWBOO_STATE_DIR"] == str((tmp_path / "state").resolve())
    assert seen["CLAWBOO_REPO_ROOTS"] == [str(repos.resolve())]
    assert seen["CLAWBOO_MODEL_PRICES"]["m9"] == {"in": 1, "out": 2}
    assert "claude-opus-5-5" in seen["CLAWBOO_MODEL_PRICES"]  # the shipped rows stay
    assert seen["Q_CLUSTER"]["workers"] == 3
    assert seen["LOGGING"]["root"]["level"] == "WARNING"


def test_without_a_secret_key_one_is_generated_unless_that_is_turned_off(tmp_path: Path):
    """docs/operating.md: with no ``DJANGO_SECRET_KEY``, ``CLAWBOO_ALLOW_GENERATED_SECRET``
    (default 1) generates one into the state dir, kept for the next start; 0 refuses
    to start instead."""
    refused = subprocess.run(  # noqa: S603 - this interpreter, an argv list
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("CLAWBOO_", "DJANGO_"))},
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "strict"),
            "CLAWBOO_ALLOW_GENERATED_SECRET": "0",
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert refused.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in refused.stderr
    assert not (tmp_path / "strict" / "secret_key").exists()
    state = {"CLAWBOO_STATE_DIR": str(tmp_path / "local"), "DJANGO_SECRET_KEY": ""}
    first = settings_seen_with(state, ["SECRET_KEY"])["SECRET_KEY"]
    assert first and (tmp_path / "local" / "secret_key").read_text().strip() == first
    assert settings_seen_with(state, ["SECRET_KEY"])["SECRET_KEY"] == first  # kept


def test_no_product_code_reads_a_setting_with_a_getattr_default():
    pattern = re.compile(r"getattr\(\s*(django_)?settings\s*,")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for app in ("core", "board", "worktrees", "boardmcp", "executor", "routines", "ops")
        for path in (ROOT / app).rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    offenders += [
        f"clawboo/{path.name}:{n}"
        for path in (ROOT / "clawboo").rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, offenders
