from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_benchmark_runs_and_reports_both_timings(tmp_path):
    out = tmp_path / "worktrees.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench/worktrees.py"),
            "--files",
            "300",
            "--rounds",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(out.read_text())
    assert set(result["median_ms"]) == {"bare_add", "bare_remove", "provision", "complete"}
    assert result["ratios"]["provision_vs_bare_add"] > 0
