"""A critic's run credential (GOVERNANCE §4): it reads the board while the
builder's claim holds and settles nothing, over the real MCP HTTP transport."""

from __future__ import annotations

import asyncio

import pytest

from board import store
from board.models import Task
from boardmcp import credentials
from core import registry
from tests.boardmcp.test_protocol import Board, Connect, board, http_connect  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


def test_a_reviewers_credential_reads_the_board_and_settles_nothing(
    http_connect: Connect,  # noqa: F811
    board: Board,  # noqa: F811
) -> None:
    registry.create_agent(id="rex", display_name="Rex", team="red", runtime="claude-code")
    key = credentials.mint_run_credential("rex", board.task, board.ticket, read_only=True)

    async def go() -> dict[str, object]:
        async with http_connect(key) as s:
            listed = await s.call("list_tasks")
            seen = await s.call("get_task", task_id=board.task)
            said = await s.call("comment", task_id=board.task, body="looks fine")
            settled = await s.call("complete_task", task_id=board.task)
            filed = await s.call("create_task", title="a side quest")
            return {"listed": listed, "seen": seen, "said": said, "settled": settled,
                    "filed": filed}  # fmt: skip

    answers = asyncio.run(go())
    assert not answers["listed"].error and not answers["seen"].error  # type: ignore[attr-defined]
    for name in ("said", "settled", "filed"):
        answer = answers[name]
        assert answer.error and answer.body["error"] == "forbidden"  # type: ignore[attr-defined]
    task = store.get_task(board.task)
    assert task.status == "in_progress" and task.assignee_agent_id == "ada"
    assert store.list_comments(board.task).count() == 0
    assert Task.objects.filter(team_id="red").count() == 1  # nothing filed


def test_a_reviewers_credential_reads_the_task_it_reviews_and_nothing_else(
    http_connect: Connect,  # noqa: F811
    board: Board,  # noqa: F811
) -> None:
    """GOVERNANCE §6: the reviewer reads the change it reviews, nothing else -- a
    teammate's task answers as a missing one, the list is its one task, and the
    team's spend and repositories are not its to read."""
    registry.create_agent(id="rex", display_name="Rex", team="red", runtime="claude-code")
    teammate = store.create_task(title="a teammate's work", team="red").task.id
    key = credentials.mint_run_credential("rex", board.task, board.ticket, read_only=True)

    async def go() -> dict[str, object]:
        async with http_connect(key) as s:
            return {
                "listed": await s.call("list_tasks"),
                "own": await s.call("get_task"),
                "teammate": await s.call("get_task", task_id=teammate),
                "handoff": await s.call("read_handoff", task_id=teammate),
                "spend": await s.call("spend"),
                "repository": await s.call("get_repository", repository_id="app"),
            }

    answers = asyncio.run(go())
    listed = answers["listed"]
    assert not listed.error  # type: ignore[attr-defined]
    assert [t["id"] for t in listed.body["tasks"]] == [board.task]  # type: ignore[attr-defined]
    assert not answers["own"].error  # type: ignore[attr-defined]
    for name in ("teammate", "handoff"):
        assert answers[name].body["error"] == "not_found", name  # type: ignore[attr-defined]
    for name in ("spend", "repository"):
        assert answers[name].body["error"] == "forbidden", name  # type: ignore[attr-defined]
