"""The board's MCP server through the SDK's own client, over both transports: Streamable
HTTP at /mcp/ of a real daphne, and stdio (``manage.py mcp --agent A``) as a real
subprocess, both on the test database.

Each test acts as agent ``ada`` of team ``red``, holding task ``T`` (claimed as a run
would): over HTTP with a run credential for that claim, over stdio with ``--task T``.
Team ``blue``'s task is never visible.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.conf import settings
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from board import store
from board.models import Task, TaskComment
from boardmcp import credentials
from boardmcp.models import RunCredential
from core import registry, repositories

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "list_tasks",
    "get_task",
    "create_task",
    "create_subtask",
    "comment",
    "link_dependency",
    "claim_task",
    "heartbeat",
    "complete_task",
    "fail_task",
    "request_review",
    "read_handoff",
    "write_handoff",
    "spend",
    "get_repository",
    "decide_approval",
    "permission_prompt",
}


@dataclass
class Board:
    task: str  # ada's claimed task
    other: str  # team blue's task
    ticket: str


@pytest.fixture
def board() -> Board:
    registry.create_team("red")
    registry.create_team("blue")
    # Ada holds several tasks at once in these walks; the limit has tests of its own.
    registry.create_agent(
        id="ada", display_name="Ada", team="red", runtime="claude-code", max_concurrent=50
    )
    registry.create_agent(id="bob", display_name="Bob", team="blue", runtime="codex")
    task = store.create_task(title="Ada's task", team="red").task.id
    other = store.create_task(title="Blue's task", team="blue").task.id
    claimed = store.claim(task, "ada", "claude-code")
    assert claimed.ticket is not None
    return Board(task=task, other=other, ticket=claimed.ticket)


@dataclass
class Answer:
    error: bool
    body: Any


class Session:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments: Any) -> Answer:
        result = await self.session.call_tool(name, arguments)
        text = result.content[0].text if result.content else "null"  # type: ignore[union-attr]
        try:
            body = json.loads(text)
        except ValueError:
            body = text
        return Answer(bool(result.is_error), body)


Connect = Callable[..., Any]


@pytest.fixture
def http_connect(daphne: Callable[..., str], board: Board, django_user_model: Any) -> Connect:
    base = daphne(extra_env={"DJANGO_SECRET_KEY": settings.SECRET_KEY})
    run_key = credentials.mint_run_credential("ada", board.task, board.ticket)

    @asynccontextmanager
    async def connect(key: str | None = None) -> AsyncIterator[Session]:
        headers = {"Authorization": f"Token {key or run_key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as client,
            streamable_http_client(f"{base}/mcp/", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Session(session)

    def as_agent() -> Callable[[], Any]:
        """How to connect as agent ada outside any run (its own key; made here, out
        of the async test): a run's credential acts on its run's task only, and
        claims nothing."""
        from core.machines import new_key
        from core.models import AgentToken

        owner = django_user_model.objects.create_user("otto")
        registry.update_agent("ada", {"owner": owner})
        key = new_key()
        AgentToken.objects.create(key=key, agent_id="ada", user=owner)
        return lambda: connect(key)

    connect.base = base  # type: ignore[attr-defined]
    connect.as_agent = as_agent  # type: ignore[attr-defined]
    return connect


@pytest.fixture
def stdio_connect(database_url: str, tmp_path: Path, board: Board) -> Connect:
    @asynccontextmanager
    async def connect(agent: str = "ada", task: str | None = board.task) -> AsyncIterator[Session]:
        env = {
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "PYTHONPATH": str(ROOT),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        args = ["manage.py", "mcp", "--agent", agent] + (["--task", task] if task else [])
        params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=ROOT)
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield Session(session)

    connect.as_agent = lambda: lambda: connect(task=None)  # type: ignore[attr-defined]
    return connect


@pytest.fixture(params=["http", "stdio"])
def connect(request: pytest.FixtureRequest) -> Connect:
    return request.getfixturevalue(f"{request.param}_connect")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- both transports -----------------------------------------------------------------


def test_it_lists_the_board_tools_each_with_a_description(connect: Connect) -> None:
    async def go() -> Any:
        async with connect() as s:
            return (await s.session.list_tools()).tools

    tools = run(go())
    assert {t.name for t in tools} == TOOLS
    assert all(t.description and len(t.description) > 40 for t in tools)


def test_each_tool_answers_for_the_agents_own_team(
    connect: Connect,
    board: Board,
    repo: Path,
) -> None:
    from worktrees import service as worktree_service

    repositories.register(  # worktrees only in registered ones
        team="red",
        path=str(repo),
        forge={
            "kind": "gitea",
            "api_url": "https://gitea.test/api/v1",
            "repo": "red/app",
            "token": "mcp-never-shown",
        },
    )
    worktree_service.provision_task_workspace(board.task, str(repo))
    # Another of ada's tasks to claim and settle, and two to review and fail.
    spare = [store.create_task(title=f"spare {n}", team="red").task.id for n in range(3)]

    as_agent = connect.as_agent()  # type: ignore[attr-defined]

    async def go() -> dict[str, Answer]:
        async with connect() as s:
            answers = {
                "list": await s.call("list_tasks"),
                "get": await s.call("get_task"),
                "subtask": await s.call("create_subtask", title="Split off", labels=["mcp"]),
                "root": await s.call("create_task", title="Filed by ada", touches=["src/**"]),
                "comment": await s.call("comment", body="progress"),
                "beat": await s.call("heartbeat"),
                "write": await s.call(
                    "write_handoff",
                    handoff={
                        "completedSubtasks": ["a"],
                        "brokenOrUnverified": [],
                        "nextBestStep": "b",
                    },
                ),
                "read": await s.call("read_handoff"),
                "spend": await s.call("spend"),
                "repository": await s.call("get_repository", repository_id="app"),
            }
        # Other work is the agent's own, outside a run (a run acts on its task only).
        async with as_agent() as s:
            return {
                **answers,
                "claim": await s.call("claim_task", task_id=spare[0]),
                "complete": await s.call("complete_task", task_id=spare[0], output={"ok": 1}),
                "claim2": await s.call("claim_task", task_id=spare[1]),
                # Its own task (held): the agent side makes only its own tasks wait.
                "link": await s.call("link_dependency", task_id=spare[1], depends_on=spare[0]),
                "review": await s.call("request_review", task_id=spare[1]),
                "claim3": await s.call("claim_task", task_id=spare[2]),
                "fail": await s.call("fail_task", task_id=spare[2], error="cannot"),
            }

    answers = run(go())
    assert [name for name, a in answers.items() if a.error] == [], answers
    listed = {t["id"] for t in answers["list"].body["tasks"]}
    assert board.task in listed and board.other not in listed
    assert answers["get"].body["task"]["id"] == board.task
    subtask = Task.objects.get(pk=answers["subtask"].body["task"]["id"])
    assert (subtask.parent_task_id, subtask.team_id, subtask.created_by_agent_id) == (
        board.task,
        "red",
        "ada",
    )
    root = Task.objects.get(pk=answers["root"].body["task"]["id"])
    assert (root.parent_task_id, root.team_id, root.created_by_agent_id) == (None, "red", "ada")
    assert (root.touches, answers["root"].body["task"]["touches"]) == (["src/**"], ["src/**"])
    assert [(c.author, c.body) for c in store.list_comments(board.task)] == [("ada", "progress")]
    assert store.depends_on_ids(spare[1]) == [spare[0]]
    assert answers["beat"].body["lease_until"]
    assert answers["read"].body["handoff"]["nextBestStep"] == "b"
    assert answers["read"].body["handoff"]["runtime"] == "claude-code"
    assert answers["claim"].body["ticket"]
    statuses = [store.get_task(t).status for t in spare]
    assert statuses[:2] == ["done", "in_review"] and statuses[2] in ("todo", "blocked")
    assert answers["spend"].body["budgets"] == []
    assert answers["spend"].body["task"]["tree_cents"] == 0
    forge = answers["repository"].body["repository"]["forge"]
    assert forge["repo"] == "red/app" and forge["token"] == "********"
    assert "mcp-never-shown" not in json.dumps(answers["repository"].body)


def test_another_teams_task_is_not_found_and_nothing_is_written(
    connect: Connect, board: Board
) -> None:
    async def go() -> list[Answer]:
        async with connect() as s:
            return [
                await s.call("get_task", task_id=board.other),
                await s.call("comment", task_id=board.other, body="sneaky"),
                await s.call("create_subtask", parent_task_id=board.other, title="sneaky"),
                await s.call("link_dependency", task_id=board.task, depends_on=board.other),
                await s.call("read_handoff", task_id=board.other),
            ]

    async def claims() -> list[Answer]:
        async with connect() as s:
            return [
                await s.call("claim_task", task_id=board.other),
                await s.call("claim_task", task_id="no-such-task"),
            ]

    answers = run(go())
    assert [(a.error, a.body["error"]) for a in answers] == [(True, "not_found")] * len(answers)
    # A run's credential claims nothing (403, asked before any task is read, as over
    # REST); the stdio caller is told not_found: either way, as for a missing task.
    theirs, missing = run(claims())
    assert theirs.error and missing.error
    assert theirs.body["detail"].replace(board.other, "ID") == missing.body["detail"].replace(
        "no-such-task", "ID"
    )
    assert all(board.other in a.body["detail"] for a in answers)
    assert not TaskComment.objects.exists()
    assert not Task.objects.filter(title="sneaky").exists()
    assert store.depends_on_ids(board.task) == []
    assert store.get_task(board.other).status == "todo"


def test_a_claim_conflict_is_a_tool_error_that_says_do_not_retry(
    connect: Connect, board: Board
) -> None:
    taken = store.create_task(title="taken", team="red").task.id
    registry.create_agent(id="eve", display_name="Eve", team="red", runtime="codex")
    store.claim(taken, "eve", "codex")

    as_agent = connect.as_agent()  # type: ignore[attr-defined]

    async def go() -> list[Answer]:
        async with as_agent() as s:
            return [
                await s.call("claim_task", task_id=taken),
                await s.call("complete_task", task_id=taken),
            ]

    claim, settle = run(go())
    assert claim.error and claim.body["error"] == "conflict"
    assert claim.body["retryable"] is False and "do not retry" in claim.body["detail"]
    # Another agent's task is not a race to retry: 403, as REST answers it.
    assert settle.error and settle.body["error"] == "forbidden"
    assert "acts as agent 'ada' only, not 'eve'" in settle.body["detail"]
    assert settle.body["retryable"] is False
    assert store.get_task(taken).assignee_agent_id == "eve"


def test_bad_arguments_are_clear_errors_and_write_nothing(connect: Connect, board: Board) -> None:
    before = (Task.objects.count(), TaskComment.objects.count())

    async def go() -> list[Answer]:
        async with connect() as s:
            return [
                await s.call("create_subtask", title=""),
                await s.call("create_subtask", title="x" * 501),
                await s.call("create_task", title="ok", labels="not-a-list"),
                await s.call("create_task", title="ok", depends_on=["no-such-task"]),
                await s.call("comment", body=""),
                await s.call("comment", body="x" * 20_001),
                await s.call("list_tasks", status="finished"),
                await s.call("list_tasks", limit=0),
                await s.call("link_dependency", task_id=board.task),
                await s.call("link_dependency", task_id=board.task, depends_on=board.task),
            ]

    answers = run(go())
    assert all(a.error for a in answers), answers
    codes = [a.body["error"] for a in answers]
    assert codes[:3] == ["validation_error"] * 3
    assert codes[3] == "not_found"
    assert codes[4:9] == ["validation_error"] * 5
    assert codes[9] in ("cycle", "validation_error")
    fields = [a.body.get("field") for a in answers[:9]]
    assert fields[:3] == ["title", "title", "labels"]
    assert fields[4:9] == ["body", "body", "status", "limit", "depends_on"]
    assert (Task.objects.count(), TaskComment.objects.count()) == before


# --- HTTP: credentials ---------------------------------------------------------------


def test_http_refuses_a_missing_unknown_or_void_credential(
    http_connect: Connect, board: Board
) -> None:
    base = http_connect.base  # type: ignore[attr-defined]
    key = credentials.mint_run_credential("ada", board.task, board.ticket)

    def post(headers: dict[str, str]) -> httpx2.Response:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        return httpx2.post(f"{base}/mcp/", json=body, headers={**accept, **headers})

    assert post({}).status_code == 401
    assert post({"Authorization": "Token nope"}).json()["error"] == "unauthenticated"
    assert post({"Authorization": f"Bearer {key}"}).status_code == 200
    store.release(board.task, ticket=board.ticket)  # the run's claim is gone
    assert post({"Authorization": f"Token {key}"}).status_code == 401
    before = RunCredential.objects.count()
    credentials.revoke_run_credential(key)
    assert RunCredential.objects.count() == before - 1


def test_http_refuses_a_coded_body_before_reading_it_and_writes_nothing(
    http_connect: Connect, board: Board
) -> None:
    # A plain body labelled gzip was parsed as plain JSON and its tool call run.
    base = http_connect.base  # type: ignore[attr-defined]
    key = credentials.mint_run_credential("ada", board.task, board.ticket)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "comment", "arguments": {"body": "coded"}},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Token {key}",
    }
    for coding in ("gzip", "br, gzip"):
        answer = httpx2.post(
            f"{base}/mcp/",
            content=json.dumps(call).encode(),
            headers={**headers, "Content-Encoding": coding},
        )
        assert answer.status_code == 415, answer.text
        assert answer.json()["error"] == "unsupported_media_type"
    assert not TaskComment.objects.exists()


def test_a_run_may_not_settle_its_own_task_the_executor_does(
    http_connect: Connect, board: Board
) -> None:
    async def go() -> list[Answer]:
        async with http_connect() as s:
            return [await s.call("complete_task"), await s.call("fail_task", error="x")]

    answers = run(go())
    assert [a.body["error"] for a in answers] == ["forbidden", "forbidden"]
    assert store.get_task(board.task).status == "in_progress"


def test_a_persons_api_token_sees_their_teams_and_claims_only_naming_an_agent(
    http_connect: Connect, board: Board, django_user_model: Any
) -> None:
    user = django_user_model.objects.create_user("rita")
    registry.add_member("red", user)
    key = Token.objects.create(user=user).key

    async def go() -> list[Answer]:
        async with http_connect(key) as s:
            return [
                await s.call("list_tasks"),
                await s.call("comment", task_id=board.task, body="from rita"),
                await s.call("get_task", task_id=board.other),
                await s.call("claim_task"),
            ]

    listed, commented, hidden, claim = run(go())
    assert {t["id"] for t in listed.body["tasks"]} == {board.task}
    assert commented.body["comment"]["author"] == "rita"
    assert hidden.body["error"] == "not_found"
    # As REST's claim: a person's key names the agent that claims (one of their own).
    assert (claim.body["error"], claim.body["field"]) == ("validation_error", "agent")


def test_mcp_and_the_rest_api_spend_one_request_budget_per_client(
    daphne: Callable[..., str],
    board: Board,
    django_user_model: Any,
) -> None:
    base = daphne(
        extra_env={"DJANGO_SECRET_KEY": settings.SECRET_KEY, "CLAWBOO_HTTP_RATE_LIMIT": "3"}
    )
    user = django_user_model.objects.create_user("rita")
    registry.add_member("red", user)
    headers = {"Authorization": f"Token {Token.objects.create(user=user).key}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    accept = {"Accept": "application/json, text/event-stream"}

    def mcp() -> httpx2.Response:
        return httpx2.post(f"{base}/mcp/", json=body, headers={**accept, **headers})

    assert httpx2.get(f"{base}/api/whoami", headers=headers).status_code == 200
    assert [mcp().status_code, mcp().status_code] == [200, 200]
    refused = mcp()  # the fourth request in the minute, whichever door it knocks on
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1
    assert httpx2.get(f"{base}/api/whoami", headers=headers).status_code == 429
    run_key = credentials.mint_run_credential("ada", board.task, board.ticket)
    other = {"Authorization": f"Bearer {run_key}"}  # the run's agent has a budget of its own
    assert httpx2.post(f"{base}/mcp/", json=body, headers={**accept, **other}).status_code == 200


# --- stdio: its agent ---------------------------------------------------------------


def test_stdio_for_an_unknown_agent_exits_with_one_line(database_url: str, tmp_path: Path) -> None:
    import subprocess

    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp", "--agent", "ghost"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode != 0
    assert done.stdout == ""
    assert "agent 'ghost' does not exist" in done.stderr


def test_a_token_minted_for_an_agent_acts_as_that_agent_in_its_team(
    http_connect: Connect, board: Board, django_user_model: Any
) -> None:
    from core.machines import new_key
    from core.models import AgentToken

    owner = django_user_model.objects.create_user("olga")
    registry.update_agent("ada", {"owner": owner})
    key = new_key()
    AgentToken.objects.create(key=key, agent_id="ada", user=owner)
    free = store.create_task(title="free", team="red").task.id

    async def go() -> list[Answer]:
        async with http_connect(key) as s:
            return [
                await s.call("claim_task", task_id=free),
                await s.call("complete_task", task_id=free),
                await s.call("get_task", task_id=board.other),
                await s.call("comment", task_id=free, body="done it"),
            ]

    claimed, completed, hidden, commented = run(go())
    assert claimed.body["task"]["assignee_agent_id"] == "ada"
    assert completed.body["outcome"] == "recorded"
    assert hidden.body["error"] == "not_found"
    assert commented.body["comment"]["author"] == "ada"
    assert store.get_task(free).status == "done"


def test_pruning_deletes_only_the_credentials_of_runs_whose_claim_is_gone(board: Board) -> None:
    live = credentials.mint_run_credential("ada", board.task, board.ticket)
    orphan_task = store.create_task(title="Killed run's task", team="red").task.id
    orphan_ticket = store.claim(orphan_task, "ada", "claude-code").ticket
    assert orphan_ticket is not None
    orphan = credentials.mint_run_credential("ada", orphan_task, orphan_ticket)
    store.release(orphan_task, ticket=orphan_ticket)  # its run died; nobody revoked the key

    assert credentials.prune_void_run_credentials() == 1
    assert credentials.prune_void_run_credentials() == 0
    left = set(RunCredential.objects.values_list("key_sha256", flat=True))
    assert left == {hashlib.sha256(live.encode()).hexdigest()}
    assert hashlib.sha256(orphan.encode()).hexdigest() not in left


def test_a_person_decides_an_approval_over_mcp_and_a_run_never_does(
    http_connect: Connect, board: Board, django_user_model: Any
) -> None:
    waiting = store.create_task(title="risky", team="red", labels=["risk"]).task.id
    user = django_user_model.objects.create_user("rita")
    registry.add_member("red", user)
    key = Token.objects.create(user=user).key

    async def go() -> list[Answer]:
        async with http_connect() as run_session:
            refused = await run_session.call("decide_approval", task_id=waiting, decision="approve")
        async with http_connect(key) as person:
            asks = await person.call("permission_prompt", tool_name="Bash", input={"command": "ls"})
            # What the person decides on is what they read: a revision since is refused.
            stale = await person.call(
                "decide_approval", task_id=waiting, decision="approve", revision=seen - 1
            )
            decided = await person.call(
                "decide_approval", task_id=waiting, decision="approve", revision=seen
            )
        return [refused, asks, stale, decided]

    seen = store.get_task(waiting).revision
    refused, asks, stale, decided = run(go())
    assert stale.error and stale.body["error"] == "conflict", stale.body
    assert refused.error and refused.body["error"] == "person_required"
    assert asks.error and asks.body["error"] == "forbidden"  # only a run asks for its tools
    assert decided.body["approval"]["state"] == "approved"
    assert decided.body["approval"]["by"] == "rita"


def test_the_tools_status_literals_are_the_boards_statuses():
    # pydantic and mypy need the Literal spelled out; the board's enum is its source.
    from typing import get_args

    from board.checks import CREATE_STATUSES
    from board.transitions import Status
    from boardmcp import tools

    assert set(get_args(tools.Status)) == set(Status.values)
    created = tools.create_subtask.__annotations__["status"]
    assert set(get_args(eval(created, vars(tools)))) == set(CREATE_STATUSES)


def test_a_nul_or_a_malformed_id_is_a_validation_error_not_a_crash(
    connect: Connect, board: Board
) -> None:
    before = (Task.objects.count(), TaskComment.objects.count())

    async def go() -> list[Answer]:
        async with connect() as s:
            return [
                await s.call("get_task", task_id="T\x00"),
                await s.call("get_task", task_id="../etc"),
                await s.call("claim_task", task_id="a\x00b"),
                await s.call("link_dependency", task_id=board.task, depends_on="x\x00"),
                await s.call("list_tasks", label="bug\x00"),
                await s.call("comment", body="hi\x00", task_id=board.task),
                await s.call("create_task", title="ok", depends_on=["y\x00"]),
            ]

    answers = run(go())
    assert [a.body["error"] for a in answers] == ["validation_error"] * 7, answers
    fields = [a.body.get("field") for a in answers]
    assert fields[:6] == ["task_id", "task_id", "task_id", "depends_on", "label", "body"]
    assert fields[6].startswith("depends_on")
    assert all(a.body["retryable"] is False for a in answers)
    assert (Task.objects.count(), TaskComment.objects.count()) == before
