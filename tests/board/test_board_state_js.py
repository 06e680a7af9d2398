"""The board page's state module (board/static/board/state.js) under node's built-in
test runner: its reducers and words hold without a browser or a server."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_the_board_state_module_passes_its_node_tests() -> None:
    assert NODE is not None
    done = subprocess.run(  # noqa: S603 - a fixed argv
        [NODE, "--test", str(HERE / "js" / "state.test.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout
