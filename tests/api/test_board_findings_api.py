"""The server side of the board findings: agents listed by team, one agent state in
the admin, API and board, runs numbered once on their task, an agent's pause told in
the team chat, and the board's @-mentions limited to people."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import chat, machines, registry
from core.models import Event
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db


def _agent(agent_id: str, team: str = "default") -> None:
    registry.create_agent(
        id=agent_id, display_name=agent_id.title(), team=team, runtime="command",
        settings={"argv": ["true"]},
    )  # fmt: skip


def test_the_agents_list_keeps_to_the_team_it_is_asked_for():
    registry.create_team("red", "Red")
    _agent("ada")
    _agent("rex", team="red")
    staff = make_client("op", teams=("default", "red"), staff=True)
    assert [a["id"] for a in staff.get("/api/agents").json()] == ["ada", "rex"]
    assert [a["id"] for a in staff.get("/api/agents?team=red").json()] == ["rex"]
    assert [a["id"] for a in staff.get("/api/agents?team=default").json()] == ["ada"]
    # A team the caller is not in lists nothing, like one that does not exist.
    member = make_client("bea")
    assert member.get("/api/agents?team=red").json() == []
    assert member.get("/api/agents?team=nope").json() == []


def test_an_unhealthy_agent_reads_unhealthy_in_the_admin_as_in_the_api(client):
    _agent("ada")
    registry.record_health("ada", False, "ada-cli: not found on PATH")
    staff = make_client("op", staff=True)
    assert staff.get("/api/agents/ada").json()["state"] == "unhealthy"
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))
    listing = client.get("/admin/clawboo/agent/")
    assert listing.status_code == 200
    row = listing.content.decode().split('href="/admin/clawboo/agent/ada/change/"', 1)[1]
    row = row.split("</tr>", 1)[0]
    assert "unhealthy" in row and ">active<" not in row
    form = client.get("/admin/clawboo/agent/ada/change/").content.decode()
    assert "unhealthy" in form


def test_the_admins_state_filter_offers_and_picks_the_state_its_list_shows(client):
    _agent("ada")
    _agent("bob")
    _agent("cid")
    registry.record_health("bob", False, "bob-cli: not found on PATH")
    registry.pause_agent("cid", "by hand", by="op")
    client.force_login(get_user_model().objects.create_superuser("root", "r@example.com", "pw"))

    def listed(query: str) -> set[str]:
        page = client.get(f"/admin/clawboo/agent/{query}")
        assert page.status_code == 200
        return {
            a
            for a in ("ada", "bob", "cid")
            if f"/admin/clawboo/agent/{a}/change/" in page.content.decode()
        }

    # The filter offers the three states the column shows, and each picks its rows:
    # an unhealthy agent is not among the active ones.
    page = client.get("/admin/clawboo/agent/").content.decode()
    assert all(f"?state={s}" in page for s in ("active", "paused", "unhealthy"))
    assert listed("?state=active") == {"ada"}
    assert listed("?state=unhealthy") == {"bob"}
    assert listed("?state=paused") == {"cid"}


def test_a_tasks_runs_are_numbered_on_the_task_in_start_order():
    _agent("ada")
    task = store.create_task(title="Twice", file_mutating=False).task
    for _ in range(2):
        claimed = store.claim(task.id, "ada")
        assert claimed.outcome == "ok"
        store.open_execution(task.id, claimed.ticket, runtime="command")
        store.release(task.id, ticket=claimed.ticket)
    runs = make_client("bea").get(f"/api/board/tasks/{task.id}/executions").json()
    assert [(r["run"], r["attempt"]) for r in runs] == [(2, 2), (1, 1)]
    assert runs[0]["id"] > runs[1]["id"]


def test_an_agent_paused_or_resumed_is_a_line_in_the_team_chat():
    _agent("ada")
    registry.pause_agent("ada", "3 failed runs in a row", by="breaker")
    registry.resume_agent("ada", by="op")
    lines = [line["body"] for line in chat.recent("default")]
    assert lines[:2] == [
        "agent resumed: ada by op",
        "agent paused: ada: 3 failed runs in a row",
    ]
    assert Event.objects.filter(kind="agent_paused").count() == 1


def test_the_board_offers_people_not_machine_tokens_as_mentions(client):
    _agent("ada")
    token, _key = machines.mint("build-host", ["ada"])
    person = get_user_model().objects.create_user("bea", password="pw")
    registry.add_member("default", person)
    client.force_login(person)
    page = client.get("/board/")
    members = page.context["board_config"]["members"]
    assert "bea" in members
    assert token.user.username not in members
