"""The README's API walk-through, run verbatim against a real server (issue 22: it
used to fail at its first claim). Only the paths of this checkout are substituted:
the console script, and the server's address."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from board.models import Task

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


def walkthrough() -> str:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"<!-- walkthrough:.*?-->\n```sh\n(.*?)```", readme, re.S)
    assert found, "the README's walk-through block is marked for this test"
    return found.group(1)


def test_the_readme_walkthrough_works_verbatim(daphne, database_url, tmp_path):
    base = daphne()
    script = walkthrough().replace(".venv/bin/clawboo", f"{sys.executable} -m clawboo.cli")
    script = script.replace("http://127.0.0.1:8000", base)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    created, beat, completed = answers[0], answers[1], answers[-1]
    assert created["title"] == "Fix login" and "lease_until" in beat
    assert completed["outcome"] == "recorded" and completed["task"]["status"] == "done"
    assert completed["task"]["output"] == {"pr": 42}
    assert Task.objects.get(pk=created["id"]).assignee_agent_id == "ada-bot"
