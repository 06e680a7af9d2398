"""The board's first view is two requests: the columns' answer carries what the cards
and panels say about them -- why ready tasks wait for their paths, which runs stalled,
the merge queues -- the same as their own endpoints answer, for the caller's team
only, in the same few queries however much there is of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board import store
from board.store import steps as steps_store
from core import registry, repositories
from tests.api.conftest import make_client
from tests.fixtures.gitrepos import make_repo
from worktrees import queue

pytestmark = pytest.mark.django_db

FIRST_VIEW = "/api/board/columns?team={team}&counts=false"


def side_data(team: str, tmp_path: Path, n: int = 1) -> dict[str, list[str]]:
    """In ``team``: ``n`` tasks held back by scope, ``n`` stalled runs and ``n`` queue
    repositories with a task waiting to land in each. The ids of each."""
    bot = registry.create_agent(
        id=f"{team}-bot", display_name=team, team=team, runtime="command",
        settings={"argv": ["true"]}, max_concurrent=100,
    )  # fmt: skip
    made: dict[str, list[str]] = {"held": [], "stalled": [], "queued": []}
    for i in range(n):
        busy = store.create_task(title=f"busy {i}", team=team, touches=[f"src/{i}/**"]).task
        claim = store.claim(busy.id, bot.id)
        held = store.create_task(title=f"held {i}", team=team, touches=[f"src/{i}/a.py"]).task
        made["held"].append(held.id)
        run = store.open_execution(busy.id, claim.ticket, runtime="command")
        steps_store.mark_stalled(run.id, 1.0)
        made["stalled"].append(busy.id)
        repo = make_repo(tmp_path / f"{team}-{i}")
        repositories.register(team=team, path=str(repo), id=f"{team}-app-{i}", landing_mode="queue")
        waiting = store.create_task(title=f"approved {i}", team=team).task
        queue.enqueue(waiting.id, repo_path=str(repo), base_branch="main", by="reviewer")
        made["queued"].append(waiting.id)
    return made


@pytest.fixture
def two_teams(default_team, tmp_path):
    registry.ensure_team("red")
    return side_data("default", tmp_path), side_data("red", tmp_path)


def test_the_first_view_carries_the_side_reads_of_the_members_team_only(two_teams):
    mine, theirs = two_teams
    ada = make_client("ada")  # a member of default, not of red
    body = ada.get(FIRST_VIEW.format(team="default")).json()

    assert list(body["scope_waits"]) == mine["held"]
    assert [r["task_id"] for r in body["stalled_runs"]] == mine["stalled"]
    [line] = body["merge_queues"]
    assert line["team"] == "default" and line["length"] == 1
    assert [e["task_id"] for e in line["entries"]] == mine["queued"]
    # The same as the endpoints agents and the CLI keep reading.
    assert body["scope_waits"] == ada.get("/api/board/scope-waits?team=default").json()["waits"]
    assert body["stalled_runs"] == ada.get("/api/board/runs/stalled?team=default").json()
    assert body["merge_queues"] == ada.get("/api/board/merge-queue?team=default").json()
    # Nothing of red's, whichever way it is asked.
    everything = ada.get("/api/board/columns?counts=false").json()
    assert list(everything["scope_waits"]) == mine["held"]
    assert [r["task_id"] for r in everything["stalled_runs"]] == mine["stalled"]
    assert [q["team"] for q in everything["merge_queues"]] == ["default"]
    red = ada.get(FIRST_VIEW.format(team="red")).json()
    assert (red["scope_waits"], red["stalled_runs"], red["merge_queues"]) == ({}, [], [])
    seen = str([body, everything, red])
    assert not any(task_id in seen for ids in theirs.values() for task_id in ids)


def test_a_member_of_the_other_team_sees_that_teams_side_reads(two_teams):
    _mine, theirs = two_teams
    body = make_client("rhea", teams=("red",)).get(FIRST_VIEW.format(team="red")).json()
    assert list(body["scope_waits"]) == theirs["held"]
    assert [r["task_id"] for r in body["stalled_runs"]] == theirs["stalled"]
    assert [e["task_id"] for q in body["merge_queues"] for e in q["entries"]] == theirs["queued"]


def test_the_side_reads_cost_the_same_queries_however_many_there_are(default_team, tmp_path):
    ada = make_client("ada")
    side_data("default", tmp_path / "one", n=1)
    with CaptureQueriesContext(connection) as one:
        small = ada.get(FIRST_VIEW.format(team="default")).json()
    registry.ensure_team("more")
    ada_more = make_client("ada-more", teams=("more",))
    side_data("more", tmp_path / "four", n=4)
    with CaptureQueriesContext(connection) as four:
        big = ada_more.get(FIRST_VIEW.format(team="more")).json()
    assert (len(small["scope_waits"]), len(big["scope_waits"])) == (1, 4)
    assert (len(small["merge_queues"]), len(big["merge_queues"])) == (1, 4)
    assert len(big["stalled_runs"]) == 4
    assert len(four) == len(one), [q["sql"] for q in four.captured_queries]
