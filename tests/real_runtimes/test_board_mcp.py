"""End to end: the executor runs the real Claude Code, Codex or Hermes on a task with the
board's MCP server wired in (a real daphne on the test database); the scripted model calls the
board's ``create_subtask`` and ``comment`` tools during the run, then does the work.

Afterwards the subtask and the comment are on the board, attributed to the agent, the
task's own run completed normally (verified, in review), and the run's credential is
gone.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from boardmcp.models import RunCredential
from core import registry
from executor.runner import Executor
from tests.real_runtimes.hermetic import Tool, installed
from tests.real_runtimes.model_server import BOARD_COMMENT, BOARD_SUBTASK_TITLE, ModelServer
from tests.real_runtimes.test_executor_acceptance import RUNTIMES, VERIFY, Runtime

pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]


@pytest.fixture(params=["claude-code", "codex", "hermes"])
def runtime(request: pytest.FixtureRequest) -> Runtime:
    return RUNTIMES[request.param]


@pytest.fixture
def board_url(daphne: Callable[..., str], settings: object) -> str:
    # Tickets are signed: the server must check them with the test's key.
    base = daphne(extra_env={"DJANGO_SECRET_KEY": settings.SECRET_KEY})  # type: ignore[attr-defined]
    url = f"{base}/mcp/"
    settings.CLAWBOO_MCP_URL = url  # type: ignore[attr-defined]
    return url


def with_mcp_client(tool: Tool) -> Tool:
    """Hermes as installed, with its MCP client (the ``mcp`` extra), which it needs
    for any MCP server and whose absence it does not report."""
    if tool.name == "hermes":
        python = tool.bin.parent / "python"
        probe = subprocess.run([python, "-c", "import mcp"], capture_output=True, check=False)
        if probe.returncode != 0:
            pytest.fail(
                f"hermes at {tool.bin} has no MCP client (hermes-agent[mcp]): "
                "run `bash .ci/runtimes.sh` again",
                pytrace=False,
            )
    return tool


@pytest.fixture(params=[None, "file"], ids=["config-toolsets", "toolsets-setting"])
def toolsets(request: pytest.FixtureRequest, runtime: Runtime) -> str | None:
    """Hermes also with a ``toolsets`` setting: ``-z --toolsets`` keeps an MCP server
    only when the home's config.yaml lists it (the run's does)."""
    if request.param is not None and runtime.name != "hermes":
        pytest.skip("a Hermes setting")
    return request.param


def test_the_model_files_a_subtask_and_comments_through_the_board_during_its_run(
    runtime: Runtime,
    toolsets: str | None,
    board_url: str,
    model_server: ModelServer,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tool = with_mcp_client(installed(runtime.tool))
    url = model_server.url_v1 if runtime.v1 else model_server.url
    for name, value in runtime.env(tmp_path / "agent-home", url).items():
        monkeypatch.setenv(name, value)
    agent_settings = {"binary": str(tool.bin), "repo_path": str(repo), "timeout_s": 150}
    registry.create_agent(
        id="real",
        display_name="Real",
        team="default",
        runtime=runtime.name,
        settings={**agent_settings, **({"toolsets": toolsets} if toolsets else {})},
    )
    task_id = store.create_task(title="Write hello.txt", metadata={"verify_cmd": VERIFY}).task.id

    report = Executor("real").work_once()

    assert report.outcome == "succeeded", report.error
    replies = model_server.replies()
    board_calls = [r for r in replies if r.endswith(("create_subtask", "comment"))]
    assert [r.rsplit("_", 1)[-1] for r in board_calls] == ["subtask", "comment"], replies
    assert replies[-2:] == [runtime.tool_call, "text"], replies
    # The tool results the model saw were the board's answers, not errors.
    results = str(model_server.model_requests()[2].body)
    assert BOARD_SUBTASK_TITLE in results and '"error"' not in results.replace('\\"', '"')

    subtasks = list(store.list_tasks(parent=task_id))
    assert [(t.title, t.team_id, t.created_by_agent_id) for t in subtasks] == [
        (BOARD_SUBTASK_TITLE, "default", "real")
    ]
    assert subtasks[0].status == "todo"
    comments = list(store.list_comments(task_id))
    assert [(c.author, c.body) for c in comments] == [("real", BOARD_COMMENT)]

    task = store.get_task(task_id)
    assert task.status == "in_review" and task.verdict == "pass"
    assert store.list_executions(task_id).get().status == "succeeded"
    assert not RunCredential.objects.exists()
    assert settings.CLAWBOO_MCP_URL == board_url


def test_hermes_resumes_its_session_with_the_board_wired_in(
    board_url: str,
    model_server: ModelServer,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each run has a Hermes home of its own (the board in its config.yaml); the
    session store stays the user's, so the next run continues the same session."""
    runtime = RUNTIMES["hermes"]
    tool = with_mcp_client(installed(runtime.tool))
    user_home = tmp_path / "agent-home"
    for name, value in runtime.env(user_home, model_server.url_v1).items():
        monkeypatch.setenv(name, value)
    registry.create_agent(
        id="real",
        display_name="Real",
        team="default",
        runtime=runtime.name,
        settings={"binary": str(tool.bin), "repo_path": str(repo), "timeout_s": 150},
    )
    task_id = store.create_task(title="Write hello.txt", metadata={"verify_cmd": VERIFY}).task.id
    first = Executor("real", keep_for_resume=True).work_once()
    assert first.outcome == "succeeded" and first.worktree == "kept", first.error
    requests_before = len(model_server.model_requests())

    second = Executor("real").work_once()

    assert second.task_id == task_id and second.outcome == "succeeded", second.error
    runs = sorted(store.list_executions(task_id), key=lambda e: e.id)
    assert runs[0].native_session_id and runs[1].native_session_id == runs[0].native_session_id
    resumed = model_server.model_requests()[requests_before:]
    # The first run's conversation, board calls included, with the board's tools offered.
    assert resumed and BOARD_SUBTASK_TITLE in str(resumed[0].body)
    assert "create_subtask" in str(resumed[0].body.get("tools"))
    assert [r.reply for r in resumed] == ["text"]
    assert (user_home / ".hermes" / "state.db").is_file()
    assert runs[1].tokens_in > 0 and runs[1].tokens_out > 0  # read from that store
    assert [t.title for t in store.list_tasks(parent=task_id)] == [BOARD_SUBTASK_TITLE]
    assert store.get_task(task_id).status == "in_review"
    assert not RunCredential.objects.exists()
