"""Fixtures for the runtime adapter tests: a bin dir on PATH and a request factory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from executor.runtimes import RunRequest


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory searched first on PATH, where tests install stand-in CLIs.

    The rest of PATH stays so the stand-ins find ``sleep``; no real agent CLI is
    installed on these machines, which the "not found" tests also rely on.
    """
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    directory = tmp_path / "worktree"
    directory.mkdir()
    (directory / "TASK.md").write_text("# Task\nSay hello.\n")
    return directory


@pytest.fixture
def make_request(worktree: Path) -> Callable[..., RunRequest]:
    def make(**overrides: Any) -> RunRequest:
        values: dict[str, Any] = {
            "task_id": "T-42",
            "title": "Say hello",
            "prompt": "Read TASK.md and do it.",
            "cwd": worktree,
            "timeout_s": 30.0,
        }
        values.update(overrides)
        return RunRequest(**values)

    return make
