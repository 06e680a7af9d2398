"""The critic with a real runtime (GOVERNANCE §4): a real Claude Code reviewer (and a
Codex and a Hermes one), on the scripted model endpoint, answers one blocking finding at
``app.py:3`` -- a green gate becomes ``fail``; the builder's next run has the finding in
``TASK.md``; the second round passes, and the change lands. The critic's checkout has no
branch, and the file its model writes there reaches neither the task's branch nor the
base.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from board import store
from core import registry
from executor import critic
from executor.runner import Executor
from tests.fixtures.gitrepos import git
from tests.real_runtimes.hermetic import installed
from tests.real_runtimes.model_server import DEFAULT_FILE, ModelServer
from tests.real_runtimes.test_executor_acceptance import RUNTIMES, Runtime
from worktrees import checkouts
from worktrees import service as worktree_service

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
]

# The builder (a `command` agent): app.py whose line 3 divides by zero, until its
# context (TASK.md) names the finding at app.py:3.
BUILDER = """
import pathlib
here = pathlib.Path.cwd()
told = "app.py:3" in (here / "TASK.md").read_text()
body = "    return a / b if b else 0\\n" if told else "    return a / b\\n"
(here / "app.py").write_text("def ratio(a, b):\\n    # the ratio of a to b\\n" + body)
print("fixed line 3" if told else "wrote app.py")
"""
BLOCKING = {
    "findings": [
        {
            "severity": "crash",
            "title": "ratio() divides by zero",
            "body": "b == 0 raises ZeroDivisionError",
            "file": "app.py",
            "line": 3,
            "confidence": 0.95,
        }
    ]
}
GATE = "python3 -c 'import app; assert app.ratio(6, 3) == 2'"


@pytest.fixture(params=sorted(RUNTIMES))
def runtime(request: pytest.FixtureRequest) -> Runtime:
    """The critic's runtime: Claude Code (the acceptance), Codex and Hermes alike."""
    return RUNTIMES[request.param]


@pytest.fixture
def team(
    runtime: Runtime,
    repo: Path,
    model_server: ModelServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Path:
    tool = installed(runtime.tool)
    url = model_server.url_v1 if runtime.v1 else model_server.url
    for name, value in runtime.env(tmp_path / "critic-home", url).items():
        monkeypatch.setenv(name, value)
    script = tmp_path / "builder.py"
    script.write_text(BUILDER)
    registry.create_agent(
        id="builder",
        display_name="Builder",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, str(script)], "repo_path": str(repo)},
    )
    registry.create_agent(
        id="critic",
        display_name="Critic",
        team="default",
        runtime=runtime.name,
        settings={"binary": str(tool.bin), "timeout_s": 120},
    )
    registry.set_reviewer_agent("default", "critic")
    return repo


@pytest.fixture
def review_checkouts(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """Each review checkout the critic is given, with what HEAD was there."""
    seen: list[dict[str, object]] = []
    provision: Callable[[Path, str], Path] = checkouts.provision_review_worktree

    def watched(where: Path, sha: str) -> Path:
        path = provision(where, sha)
        ref = subprocess.run(  # noqa: S603 - git, argv list
            ["git", "symbolic-ref", "-q", "HEAD"],  # noqa: S607
            cwd=path,
            capture_output=True,
            text=True,
            timeout=30,
        )
        head = git(path, "rev-parse", "HEAD")
        seen.append({"path": str(path), "symbolic": ref.returncode, "head": head, "sha": sha})
        return path

    monkeypatch.setattr(critic.checkouts, "provision_review_worktree", watched)
    return seen


def test_a_real_critic_fails_a_green_gate_and_the_fixed_round_lands(
    runtime: Runtime,
    team: Path,
    model_server: ModelServer,
    review_checkouts: list[dict[str, object]],
) -> None:
    base_repo = team
    task_id = store.create_task(
        title="Add ratio()", labels=["risk"], metadata={"verify_cmd": GATE}
    ).task.id
    store.decide_approval(task_id, "approve", by="ada")  # risk waits for a person first
    model_server.script.final_text = json.dumps(BLOCKING)

    first = Executor("builder").work_once()
    assert first.outcome == "succeeded", first.error
    assert first.verdict == "fail"
    task = store.get_task(task_id)
    verification = task.as_dict()["verification"]
    assert verification["gate"]["exit_code"] == 0  # the gate was green
    assert verification["findings"] == BLOCKING["findings"]
    assert verification["reviewer"] == {"agent": "critic", "runtime": runtime.name, "model": None}
    assert task.status == "in_progress" and "app.py:3" in task.feedback
    # The critic ran through its runtime in a detached checkout of the committed change.
    [checkout] = review_checkouts
    assert checkout["symbolic"] != 0 and checkout["head"] == checkout["sha"]
    assert not Path(str(checkout["path"])).exists()
    stated = [
        r for r in model_server.model_requests() if str(checkout["path"]) in json.dumps(r.body)
    ]
    assert stated, "the critic's model never heard of its checkout"
    runs = [x for x in store.list_executions(task_id) if x.agent_id == "critic"]
    assert len(runs) == 1 and runs[0].runtime == runtime.name and runs[0].status == "succeeded"
    assert runs[0].tokens_in > 0 and runs[0].tokens_out > 0

    model_server.script.final_text = json.dumps({"findings": []})
    second = Executor("builder").work_once()
    assert second.task_id == task_id and second.verdict == "pass", second.error
    worktree = Path(store.get_task(task_id).worktree_ref)
    assert "app.py:3" in (worktree / "TASK.md").read_text()  # the builder was told
    task = store.get_task(task_id)
    assert task.status == "in_review"
    assert len(task.as_dict()["verification"]["attempts"]) == 2
    assert len(review_checkouts) == 2

    landed = worktree_service.approve(task_id, by="ada")
    assert landed["result"] == "landed"
    assert "if b else 0" in git(base_repo, "show", "main:app.py")
    # What the critic's model wrote in its checkouts reached neither branch nor base.
    assert model_server.replies().count(runtime.tool_call) == 2  # it did write, twice
    assert DEFAULT_FILE not in git(base_repo, "ls-tree", "-r", "--name-only", "main")
    assert not (worktree / DEFAULT_FILE).exists()
