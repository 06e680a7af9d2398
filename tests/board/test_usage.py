"""The usage page: spend per team and agent today, this week and this month, and a
30-day chart drawn as plain SVG."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.contrib.auth import get_user_model

from board import store
from board.store import spend

pytestmark = pytest.mark.django_db


def spend_on(agent: str, cents: int, team: str = "default") -> None:
    task = store.create_task(title="t", team=team).task
    claimed = store.claim(task.id, agent, "command")
    run = store.open_execution(task.id, claimed.ticket)
    store.close_execution(run.id, "succeeded", cost_cents=cents)


def test_usage_adds_up_runs_by_team_agent_and_period(default_team):
    monday = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    with time_machine.travel(monday - dt.timedelta(days=3), tick=False):  # Friday, Nov 27
        spend_on("ada", 7)
    with time_machine.travel(monday, tick=False):
        spend_on("ada", 5)
        spend_on("bob", 11)
    with time_machine.travel(monday + dt.timedelta(days=1), tick=False):  # Tuesday, Dec 1
        spend_on("bob", 2)
        report = spend.usage_report(["default"], store.now())
    (team,) = report.teams
    assert (team["today"], team["week"], team["month"]) == (2, 18, 2)
    agents = {row["id"]: row for row in report.agents}
    assert (agents["ada"]["today"], agents["ada"]["week"]) == (0, 5)
    assert (agents["bob"]["today"], agents["bob"]["week"]) == (2, 13)
    assert len(report.daily) == 30
    assert report.daily[-1] == {"day": "2026-12-01", "cents": 2}
    assert report.daily[-2] == {"day": "2026-11-30", "cents": 16}
    assert sum(d["cents"] for d in report.daily) == 25


def test_the_usage_page_shows_the_figures_and_a_chart(default_team, client):
    user = get_user_model().objects.create_user("ada", password="pw")
    from core import registry

    registry.add_member("default", user)
    client.force_login(user)
    spend_on("ada", 9)
    page = client.get("/board/usage/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<tr data-team="default"><td>default</td><td>9¢</td>' in html
    assert 'data-agent="ada"' in html
    assert html.count('class="bar"') == 30
    # The team picker names the team, as the board's does.
    assert '<option value="default">Default team</option>' in html


def test_the_usage_page_says_nothing_was_spent_instead_of_an_empty_chart(default_team, client):
    # It drew thirty empty bars under a scale of "1¢".
    user = get_user_model().objects.create_user("ada", password="pw")
    from core import registry

    registry.add_member("default", user)
    client.force_login(user)
    html = client.get("/board/usage/").content.decode()
    assert "No spend in the last 30 days" in html and 'id="usage-chart"' not in html
    spend_on("ada", 1)
    html = client.get("/board/usage/").content.decode()
    assert "No spend in the last 30 days" not in html and 'id="usage-chart"' in html


def test_the_usage_pages_team_picker_names_the_teams_as_the_routines_page_does(
    default_team, client
):
    user = get_user_model().objects.create_user("ada", password="pw")
    from core import registry

    registry.create_team("qa", "Quality")
    registry.add_member("default", user)
    registry.add_member("qa", user)
    client.force_login(user)
    for url in ("/board/usage/?team=qa", "/board/routines/?team=qa"):
        html = client.get(url).content.decode()
        assert '<option value="qa" selected>Quality</option>' in html, url
        assert '<option value="default">' in html, url


def test_runs_that_reported_no_cost_are_counted_beside_the_cents_not_read_as_free(
    default_team, client
):
    # The board's card said "cost unknown" for a command agent's runs while the usage
    # page said "0¢" for the same runs, as if they had cost nothing.
    from core import registry

    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    client.force_login(user)
    spend_on("ada", 0)  # no cost reported: unknown
    spend_on("ada", 0)
    spend_on("bob", 4)
    report = spend.usage_report(["default"], store.now())
    agents = {row["id"]: row for row in report.agents}
    assert agents["ada"]["unpriced"] == {"today": 2, "week": 2, "month": 2}
    assert agents["bob"]["unpriced"] == {"today": 0, "week": 0, "month": 0}
    assert report.teams[0]["unpriced"]["today"] == 2
    html = client.get("/board/usage/").content.decode()
    ada = html.split('data-agent="ada"', 1)[1].split("</tr>", 1)[0]
    assert "0¢ + 2 runs unpriced" in " ".join(re.sub(r"<[^>]+>", " ", ada).split())
    bob = html.split('data-agent="bob"', 1)[1].split("</tr>", 1)[0]
    assert "unpriced" not in bob
