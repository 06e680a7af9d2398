from __future__ import annotations

import sys
from pathlib import Path

import pytest

from core import registry
from tests.worktrees.conftest import git, make_repo  # noqa: F401 - shared helpers

# A `command` agent's script: edits the checkout the way the test says (via env).
EDIT_SCRIPT = """
import os, pathlib, sys
mode = sys.argv[1] if len(sys.argv) > 1 else "write"
here = pathlib.Path.cwd()
if mode == "write":
    (here / "feature.txt").write_text("ok\\n")
elif mode == "bad":
    (here / "feature.txt").write_text("broken\\n")
elif mode == "none":
    pass
print("did", mode)
"""


@pytest.fixture
def state_dir(tmp_path: Path, settings) -> Path:
    state = (tmp_path / "state").resolve()
    state.mkdir()
    settings.CLAWBOO_STATE_DIR = state
    settings.CLAWBOO_HEARTBEAT_MS = 200
    return state


@pytest.fixture
def repo(tmp_path: Path, settings, state_dir: Path) -> Path:
    root = (tmp_path / "repos").resolve()
    root.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [root]
    return make_repo(root / "app")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "edit.py"
    path.write_text(EDIT_SCRIPT)
    return path


@pytest.fixture
def command_agent(db, repo: Path, script: Path):
    def make(agent_id: str = "builder", mode: str = "write", **settings):
        return registry.create_agent(
            id=agent_id,
            display_name=agent_id.title(),
            team="default",
            runtime="command",
            settings={
                "argv": [sys.executable, str(script), mode],
                "repo_path": str(repo),
                **settings,
            },
        )

    return make


VERIFY_OK = "grep -qx ok feature.txt"
