"""A Hermes home of the run's own, so the run alone gets the board's MCP server.

Hermes (0.19.0) reads MCP servers from ``mcp_servers:`` in ``$HERMES_HOME/config.yaml``
and from nowhere else a run can reach: its CLI starts MCP discovery only when the
*user's* file lists a server (``hermes_cli/mcp_startup.py``,
``_has_configured_mcp_servers`` reads it raw), so neither a managed scope
(``HERMES_MANAGED_DIR``) nor a flag can add one. That file sits in the home next to
everything else Hermes keeps: the session store ``state.db`` that ``--resume`` reads,
``.env`` with the provider keys, ``auth.json`` (provider logins), memories, skills,
logs.

So a run gets a home in its private scratch dir (removed with it) that is the user's
home but for one file: ``config.yaml`` is the user's with ``mcp_servers.clawboo``
added, and every other entry is a symlink to the user's own. Sessions, keys, logins
and memories are the user's, read and written where they always were (SQLite follows
a symlinked database to its ``-wal``/``-shm``; Hermes writes its files through symlinks,
``utils.atomic_replace``), so a run started with the board resumes with or without it.
The user's home gets the directories Hermes itself makes on a first run and nothing
else; the user's ``config.yaml`` is never written. What Hermes creates for the first
time during a run beyond those (caches, a default ``SOUL.md``) goes with the run's home.

"The user's home" is the one Hermes would use: ``HERMES_HOME``, else ``~/.hermes``,
switched to ``profiles/<name>`` by a sticky ``active_profile`` or a ``-p``/``--profile``
in the agent's ``extra_args`` (which the adapter then drops: the run's home is already
that profile's).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from executor.runtimes.base import McpEndpoint
from executor.runtimes.oneshot import SettingsError

RUN_HOME = "hermes-home"
CONFIG = "config.yaml"
# Entries of the user's home the run's home does not link: its own config, and the
# profile switch (``active_profile`` would send Hermes from the run's home into
# ``<run home>/profiles/<name>``, the user's profile without the board).
NOT_LINKED = frozenset({CONFIG, "active_profile", "profiles"})
# What Hermes makes in a new home (hermes_cli/config.py, ensure_hermes_home): made
# in the user's home first, so what a run keeps there is the user's, not the run's.
SKELETON = (
    "cron",
    "sessions",
    "logs",
    "logs/curator",
    "memories",
    "pairing",
    "hooks",
    "image_cache",
    "audio_cache",
    "skills",
)
# The session store: linked even before it exists (SQLite creates it through the link).
SESSION_STORE = "state.db"
_PROFILE_FLAGS = ("-p", "--profile")
# Where the run's credential is (RunRequest.task_environment).
CREDENTIAL_ENV = "CLAWBOO_MCP_TOKEN"


def split_profile(args: list[str]) -> tuple[list[str], str | None]:
    """``extra_args`` without a ``-p NAME``/``--profile NAME``/``--profile=NAME``, and
    the name (None when there is none)."""
    rest: list[str] = []
    profile: str | None = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _PROFILE_FLAGS and i + 1 < len(args):
            profile = args[i + 1]
            i += 2
            continue
        if arg.startswith("--profile="):
            profile = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return rest, profile


def user_home(env: Mapping[str, str], profile: str | None = None) -> Path:
    """The Hermes home a run with ``env`` would use (hermes_constants.get_hermes_home,
    after hermes_cli/main.py's profile switch)."""
    native = Path(env.get("HOME") or Path.home()) / ".hermes"
    configured = env.get("HERMES_HOME", "").strip()
    if configured and profile is None and Path(configured).parent.name == "profiles":
        return Path(configured)  # already a profile's home: no switch
    root = _root(Path(configured), native) if configured else native
    if profile is None:
        try:
            profile = (root / "active_profile").read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            profile = None
    if profile is None or profile == "default":
        return Path(configured) if configured else native
    home = root / "profiles" / profile
    if not home.is_dir():
        raise SettingsError(f"hermes profile {profile!r} does not exist ({home})")
    return home


def _root(configured: Path, native: Path) -> Path:
    """hermes_constants.get_default_hermes_root for a set HERMES_HOME."""
    try:
        configured.resolve().relative_to(native.resolve())
        return native
    except ValueError:
        pass
    if configured.parent.name == "profiles":
        return configured.parent.parent
    return configured


def read_config(path: Path) -> dict[str, Any]:
    """The user's ``config.yaml``; {} when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read the hermes config {path}: {exc}") from exc
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError(f"the hermes config {path} is not valid YAML: {exc}") from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SettingsError(f"the hermes config {path} is not a mapping")
    return value


def with_board(config: dict[str, Any], board: McpEndpoint) -> dict[str, Any]:
    """``config`` plus the board's server (Streamable HTTP; the credential as a
    ``${VAR}`` reference, which Hermes expands from the run's environment)."""
    servers = config.get("mcp_servers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    servers[board.name] = {
        "url": board.url,
        "headers": {"Authorization": f"Token ${{{CREDENTIAL_ENV}}}"},
        # No content-type probe first: the board answers HEAD with 405, and the GET
        # that follows waits out the probe's 5 s -- while ``-z`` does not wait for
        # MCP discovery before the model's first turn (see the README).
        "skip_preflight": True,
    }
    merged = {**config, "mcp_servers": servers}
    # A cli toolset list naming MCP servers is an allow-list of them
    # (hermes_cli/tools_config.py, _get_platform_tools): the board joins it.
    platforms = config.get("platform_toolsets")
    if isinstance(platforms, dict):
        cli = platforms.get("cli")
        if isinstance(cli, list) and set(map(str, cli)) & set(map(str, servers)) - {board.name}:
            merged["platform_toolsets"] = {**platforms, "cli": [*cli, board.name]}
    return merged


def make_run_home(scratch: Path, home: Path, board: McpEndpoint) -> Path:
    """The run's Hermes home in ``scratch``: ``home`` linked entry by entry, and a
    ``config.yaml`` of its own (0600) with the board's server."""
    home = home.absolute()
    config = with_board(read_config(home / CONFIG), board)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    for sub in SKELETON:
        (home / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    run_home = scratch / RUN_HOME
    run_home.mkdir(mode=0o700)
    names = {entry.name for entry in home.iterdir()} | {SESSION_STORE}
    for name in sorted(names - NOT_LINKED):
        (run_home / name).symlink_to(home / name)
    fd = os.open(run_home / CONFIG, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        yaml.safe_dump(config, file, sort_keys=False, allow_unicode=True)
    return run_home
