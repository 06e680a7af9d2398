"""A registered repository whose pull requests go to a stand-in forge (GitHub's or
Gitea's API over a bare clone on 127.0.0.1), and a builder whose second round fixes
what the forge's check said."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from core import repositories
from tests.fixtures.gitrepos import git
from tests.forges.standin import StandIn

TOKEN = "forge-token-5ecret-d0-not-show"  # noqa: S105 - a test's made-up token
HOOK_SECRET = "hook-5ecret-d0-not-show"  # noqa: S105

# The builder: its first round writes a broken feature; a round whose brief carries
# the forge check's output ("feature.txt says broken") fixes it. Every round keeps
# its environment, so the test can look for the token in it.
BUILDER = """
import json, os, pathlib
here = pathlib.Path.cwd()
brief = (here / "TASK.md").read_text()
handoff = here / "AGENT_HANDOFF.json"
told = brief + (handoff.read_text() if handoff.exists() else "")
env_dump = pathlib.Path(os.environ["FORGE_TEST_ENV_DUMP"])
env_dump.write_text(env_dump.read_text() + json.dumps(dict(os.environ)) if env_dump.exists()
                    else json.dumps(dict(os.environ)))
if "feature.txt says broken" in told:
    (here / "feature.txt").write_text("ok\\n")
    print("fixed after the check")
else:
    (here / "feature.txt").write_text("broken\\n")
    print("first round")
"""


@dataclass
class Setup:
    kind: str
    repo: Path
    bare: Path
    forge: StandIn
    env_dump: Path


@pytest.fixture(params=["github", "gitea"])
def forge_repo(request, repo: Path, tmp_path: Path, command_agent, monkeypatch) -> Iterator[Setup]:
    kind = request.param
    bare = tmp_path / "forge.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    standin = StandIn(kind, bare, token=TOKEN).start()
    standin.required = ["ci"]
    repositories.register(
        team="default",
        path=str(repo),
        id="app",
        remote=str(bare),
        landing_mode="pull_request",
        verify_cmd="test -f feature.txt",
        forge={
            "kind": kind,
            "api_url": standin.api_url,
            "repo": "octo/app",
            "token": TOKEN,
            "webhook_secret": HOOK_SECRET,
            "merge_method": "merge",
            "required_checks": ["ci"],
        },
    )
    script = tmp_path / "builder.py"
    script.write_text(BUILDER)
    env_dump = tmp_path / "env.json"
    monkeypatch.setenv("FORGE_TEST_ENV_DUMP", str(env_dump))
    command_agent("builder", argv=[sys.executable, str(script)])
    try:
        yield Setup(kind, repo, bare, standin, env_dump)
    finally:
        standin.stop()
    assert standin.violations == [], standin.violations


@pytest.fixture
def api(db):
    from tests.api.conftest import make_client

    return make_client("ada")
