"""The getting-started guide's API walk-through, run verbatim against a real server
(issue 22: it used to fail at its first claim), then its last call again, which the
guide says writes nothing and answers ``declined``/``lost-claim`` (issue 41). Only the
paths of this checkout are substituted: the console script, and the server's address."""

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
    guide = (ROOT / "docs" / "getting-started.md").read_text()
    found = re.search(r"<!-- example -->\n```sh\n(key=.*?)```", guide, re.S)
    assert found, "the guide's walk-through block is marked as an example"
    return found.group(1)


def test_the_readme_walkthrough_works_verbatim(daphne, database_url, tmp_path):
    base = daphne()
    script = walkthrough().replace(".venv/bin/clawboo", f"{sys.executable} -m clawboo.cli")
    script = script.replace("http://127.0.0.1:8000", base)
    last_call = script[script.rindex("curl ") :]
    script += last_call  # the same call again
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
    created, beat, completed, again = answers[0], answers[1], answers[-2], answers[-1]
    assert created["title"] == "Fix login" and "lease_until" in beat
    assert completed["outcome"] == "recorded" and completed["task"]["status"] == "done"
    assert completed["task"]["output"] == {"pr": 42}
    assert Task.objects.get(pk=created["id"]).assignee_agent_id == "ada-bot"
    assert again["outcome"] == "declined" and again["reason"] == "lost-claim"
    assert again["task"]["status"] == "done" and again["task"]["output"] == {"pr": 42}
