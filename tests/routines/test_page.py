"""The routines page (/board/routines/): what a team member sees and what they can do
there, every write through routines.store and the API's permission rule."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from core import registry
from routines import store
from routines.models import Routine, RoutineStatus

pytestmark = pytest.mark.django_db

FORM = {
    "team": "ops",
    "agent": "mine",
    "cron_spec": "0 9 * * 1-5",
    "timezone": "America/New_York",
    "catch_up": "latest",
    "title": "Morning triage",
    "description": "Sort the new issues",
    "kind": "research",
    "priority": "2",
    "repo_path": "",
    "model": "",
    "max_node_cents": "",
    "team_task_id": "",
}


@pytest.fixture
def member(team):
    user = get_user_model().objects.create_user("mia", "mia@example.com", "pw")
    registry.add_member(team, user)
    registry.create_agent(id="mine", display_name="Mine", team=team, runtime="command", owner=user)
    return user


@pytest.fixture
def browser(clock, client, member):
    # Logged in on the frozen clock: a session from today would have expired by 2030.
    client.force_login(member)
    return client


def text_of(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def test_it_asks_for_a_login(client):
    response = client.get("/board/routines/")
    assert response.status_code == 302 and response["Location"].startswith("/board/login/")


def test_it_shows_the_next_fire_in_each_routines_own_timezone(browser, member, clock):
    ny = store.create_routine(
        agent_id="mine", team="ops", cron_spec="0 9 * * *", timezone="America/New_York"
    )
    utc = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * *")
    page = browser.get("/board/routines/")
    assert page.status_code == 200
    body = page.content.decode()
    # 08:00 UTC now: 09:00 UTC is an hour away, 09:00 in New York six.
    ny_row = body[body.index(f'id="routine-{ny.id}"') :]
    utc_row = body[body.index(f'id="routine-{utc.id}"') :]
    assert "Mon 7 Jan 2030, 09:00 EST" in ny_row.split("</tbody>")[0]
    assert "Mon 7 Jan 2030, 09:00 UTC" in utc_row.split("</tbody>")[0]
    assert "At 09:00" in text_of(page) and "armed" in text_of(page)


def test_it_lists_only_the_teams_the_person_can_see(browser, agent, clock):
    registry.ensure_team("other", "Other")
    registry.create_agent(id="stranger", display_name="S", team="other", runtime="command")
    theirs = store.create_routine(agent_id="stranger", team="other", cron_spec="0 * * * *")
    ours = store.create_routine(agent_id="mine", team="ops", cron_spec="0 * * * *")
    body = browser.get("/board/routines/").content.decode()
    assert ours.id in body and theirs.id not in body
    assert browser.get(f"/board/routines/{theirs.id}/edit/").status_code == 404
    assert browser.post(f"/board/routines/{theirs.id}/pause/").status_code == 404
    assert store.get_routine(theirs.id).status == RoutineStatus.IDLE


def test_a_routine_is_created_edited_and_paused_from_the_page(browser, clock):
    created = browser.post("/board/routines/new/", FORM)
    assert created.status_code == 302, text_of(created)[:2000]
    routine = Routine.objects.get()
    assert (routine.agent_id, routine.team_id, routine.cron_spec) == ("mine", "ops", "0 9 * * 1-5")
    assert routine.timezone == "America/New_York"
    assert routine.task_template["title"] == "Morning triage"
    assert routine.task_template["kind"] == "research" and routine.task_template["priority"] == 2

    edit = browser.get(f"/board/routines/{routine.id}/edit/")
    assert edit.status_code == 200 and 'value="Morning triage"' in edit.content.decode()
    saved = browser.post(
        f"/board/routines/{routine.id}/edit/", {**FORM, "cron_spec": "30 7 * * *", "priority": "5"}
    )
    assert saved.status_code == 302
    routine = store.get_routine(routine.id)
    assert routine.cron_spec == "30 7 * * *" and routine.task_template["priority"] == 5
    assert routine.next_run_at is not None

    paused = browser.post(f"/board/routines/{routine.id}/pause/", follow=True)
    assert store.get_routine(routine.id).status == RoutineStatus.PAUSED
    assert "Paused" in text_of(paused)
    # A paused routine fires nothing: no next fire is promised until it is resumed.
    assert (
        '<td class="next" data-label="Next fire"><span class="quiet">when resumed</span></td>'
        in paused.content.decode()
    )
    resumed = browser.post(f"/board/routines/{routine.id}/resume/", follow=True)
    assert store.get_routine(routine.id).status == RoutineStatus.IDLE
    assert "Resumed" in text_of(resumed)
    browser.post(f"/board/routines/{routine.id}/run-now/")
    assert store.get_routine(routine.id).status == RoutineStatus.QUEUED


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"cron_spec": "61 * * * *"}, "cron_spec", "is not a valid cron expression"),
        ({"cron_spec": "once@2020-01-01T00:00"}, "cron_spec", "is in the past"),
        ({"cron_spec": "0 9 * * *", "team_task_id": "t1"}, "team_task_id", "must be a one-shot"),
        ({"timezone": "Mars/Olympus"}, "timezone", "Select a valid choice"),
        ({"title": ""}, "title", "This field is required"),
    ],
)
def test_a_refused_create_is_explained_beside_its_field_and_writes_nothing(
    browser, clock, change, field, message
):
    response = browser.post("/board/routines/new/", {**FORM, **change})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert message in " ".join(errors[field]), errors
    assert not Routine.objects.exists()


def test_creating_as_an_agent_of_someone_else_is_refused_inline(browser, agent, clock):
    # "ada" is on the team but has no owner: only staff may act as it (the API's rule).
    response = browser.post("/board/routines/new/", {**FORM, "agent": "ada"})
    assert response.status_code == 200
    assert "you may not act as agent 'ada'" in " ".join(response.context["form"].errors["agent"])
    assert not Routine.objects.exists()


def test_a_move_the_ledger_refuses_is_shown_on_its_routine(browser, clock):
    routine = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * *")
    store.pause_routine(routine.id)
    response = browser.post(f"/board/routines/{routine.id}/run-now/", follow=True)
    assert response.status_code == 200
    row = response.content.decode().split(f'id="routine-{routine.id}"')[1].split("</tbody>")[0]
    # It read "cannot move from paused to queued": the ledger's words, shown nowhere else.
    assert "Not done: routine" in row and "cannot be run now: it is paused (resume it first)" in row
    assert store.get_routine(routine.id).status == RoutineStatus.PAUSED
    assert browser.post(f"/board/routines/{routine.id}/explode/").status_code == 404
    assert browser.get(f"/board/routines/{routine.id}/pause/").status_code == 405


def test_an_edit_while_a_fire_is_in_flight_is_refused_inline(browser, clock):
    routine = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * *")
    store.run_routine_now(routine.id)
    response = browser.post(
        f"/board/routines/{routine.id}/edit/", {**FORM, "cron_spec": "0 10 * * *"}
    )
    assert response.status_code == 200
    assert "edit it after the fire settles" in str(response.context["form"].non_field_errors())
    assert store.get_routine(routine.id).cron_spec == "0 9 * * *"


def test_writes_need_the_csrf_token(clock, member):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(member)
    routine = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * *")
    assert csrf_client.post(f"/board/routines/{routine.id}/pause/").status_code == 403
    assert csrf_client.post("/board/routines/new/", FORM).status_code == 403
    assert store.get_routine(routine.id).status == RoutineStatus.IDLE
    page = csrf_client.get("/board/routines/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None
    ok = csrf_client.post(
        f"/board/routines/{routine.id}/pause/", {"csrfmiddlewaretoken": token.group(1)}
    )
    assert ok.status_code == 302
    assert store.get_routine(routine.id).status == RoutineStatus.PAUSED


def test_recent_fires_link_to_their_tasks(browser, clock):
    from board import store as board_store
    from routines.models import RoutineFire

    routine = store.create_routine(
        agent_id="mine", team="ops", cron_spec="0 9 * * *", timezone="America/New_York"
    )
    task = board_store.create_task(title="Triage of the day", team="ops").task
    # A fired slot as the fire path records it (routines.fire is tested on its own).
    RoutineFire.objects.create(
        routine=routine,
        slot_at=routine.next_run_at,
        task_id=task.id,
        outcome="dispatched",
        fired_at=routine.created_at,
    )
    body = browser.get("/board/routines/").content.decode()
    assert f'href="/board/?team=ops&amp;task={task.id}"' in body  # the task on the board
    assert "Triage of the day" in body and "Mon 7 Jan 2030, 09:00 EST" in body


def test_a_task_another_owner_fires_is_refused_on_the_page(browser, clock):
    from board import store as board_store

    task = board_store.create_task(title="Fired elsewhere", team="ops").task
    board_store.set_scheduled_by(task.id, "openclaw")
    response = browser.post(
        "/board/routines/new/",
        {**FORM, "cron_spec": "once@2030-02-01T09:00", "team_task_id": task.id},
    )
    assert response.status_code == 200
    errors = response.context["form"].errors["team_task_id"]
    assert errors == [f"task {task.id!r} is already fired by 'openclaw'"]
    assert not Routine.objects.exists()
    assert board_store.get_task(task.id).scheduled_by == "openclaw"


def test_a_bad_schedule_is_named_even_when_other_fields_are_missing(browser, clock):
    response = browser.post(
        "/board/routines/new/", {**FORM, "agent": "", "cron_spec": "99 * * * *"}
    )
    errors = response.context["form"].errors
    assert "This field is required." in errors["agent"]
    assert "is not a valid cron expression" in " ".join(errors["cron_spec"])


def test_gateway_cron_jobs_offer_staff_their_domains_actions_and_the_seeded_ones_none(
    browser, member, settings
):
    from tests.routines.fake_gateway import FakeGateway

    fake = FakeGateway()
    try:
        settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
        settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
        fake.jobs["hb"] = {
            "id": "hb",
            "declarationKey": "heartbeat:main",
            "displayName": "Heartbeat (main)",
            "name": "heartbeat-main",
            "enabled": True,
            "schedule": {"kind": "every", "everyMs": 1800000},
            "state": {},
            "effectiveAgentId": "main",
        }
        fake.jobs["job1"] = {
            "id": "job1",
            "name": "Compaction",
            "enabled": True,
            "schedule": {"kind": "cron", "expr": "0 3 * * *"},
            "state": {},
            "effectiveAgentId": "main",
        }
        # A member sees the jobs; only staff get their actions.
        page = browser.get("/board/routines/").content.decode()
        assert "Heartbeat (main)" in page and "gateway/job1/pause/" not in page
        assert browser.post("/board/routines/gateway/job1/pause/").status_code == 302
        assert fake.jobs["job1"]["enabled"] is True  # refused: staff only
        member.is_staff = True
        member.save()
        # Staff operate them with the routine permissions the admin asks for too.
        from django.contrib.auth.models import Permission

        member.user_permissions.set(
            Permission.objects.filter(codename__in=("change_routine", "delete_routine"))
        )
        page = browser.get("/board/routines/").content.decode()
        assert "/board/routines/gateway/job1/pause/" in page
        assert "/board/routines/gateway/hb/" not in page  # the gateway's own: read only
        browser.post("/board/routines/gateway/job1/pause/", {"team": "ops"})
        assert fake.jobs["job1"]["enabled"] is False
        asked = browser.get("/board/routines/gateway/job1/delete/")
        assert asked.status_code == 200 and "Compaction" in text_of(asked)
        assert "job1" in fake.jobs  # asking removes nothing
        done = browser.post("/board/routines/gateway/job1/delete/", {"team": "ops"})
        assert done["Location"] == "/board/routines/?team=ops#gateway-cron"
        assert "job1" not in fake.jobs
        # The gateway refuses to remove its own job; the page says so.
        browser.post("/board/routines/gateway/hb/delete/")
        assert "hb" in fake.jobs
        assert "system-owned" in text_of(browser.get("/board/routines/"))
        assert browser.get("/board/routines/gateway/nope/delete/").status_code == 404
    finally:
        fake.close()


def test_a_fire_under_a_minute_ago_reads_just_now_not_0_minutes_ago(browser, clock):
    from datetime import timedelta

    routine = store.create_routine(agent_id="mine", team="ops", cron_spec="* * * * *")
    Routine.objects.filter(pk=routine.pk).update(last_run_at=store.now_ms() - 20_000)
    clock.shift(timedelta(seconds=30))  # the next slot (every minute) is 30 s away
    text = text_of(browser.get("/board/routines/"))
    assert "just now" in text and "in under a minute" in text, text
    assert "0 minutes" not in text
    clock.shift(timedelta(minutes=5))  # five minutes after the fire: the usual words
    text = text_of(browser.get("/board/routines/"))
    assert "minutes ago" in text and "just now" not in text


def test_the_pages_links_keep_the_chosen_team(browser, clock):
    # "Board" on Ops's routines page went to /board/, the default team's board.
    for path in ("/board/routines/?team=ops", "/board/usage/?team=ops"):
        body = browser.get(path).content.decode()
        for page in ("/board/", "/board/routines/", "/board/usage/"):
            assert f'href="{page}?team=ops"' in body, (path, page)
    everyone = browser.get("/board/routines/").content.decode()
    assert 'href="/board/"' in everyone and "?team=" not in everyone


def test_an_armed_routine_whose_agent_is_paused_says_its_fires_wait(browser, clock):
    # It read "armed" and nothing else while each fire piled up in todo.
    armed = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * *")
    assert "fires wait" not in text_of(browser.get("/board/routines/"))
    registry.pause_agent("mine", "", by="op")
    row = browser.get("/board/routines/").content.decode()
    row = row[row.index(f'id="routine-{armed.id}"') :].split("</tbody>")[0]
    assert "its agent is paused: fires wait in todo" in text_of_html(row)
    store.pause_routine(armed.id)  # a paused routine fires nothing: no word needed
    assert "fires wait" not in text_of(browser.get("/board/routines/"))


def text_of_html(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_staff_without_the_routine_permission_move_no_other_teams_routine(client, agent, clock):
    # Staff's powers on the page are the admin's: pausing another team's routine
    # needs routines.change_routine (403 naming it, nothing written); with it, it works.
    from django.contrib.auth.models import Permission

    registry.ensure_team("other", "Other")
    registry.create_agent(id="stranger", display_name="S", team="other", runtime="command")
    theirs = store.create_routine(agent_id="stranger", team="other", cron_spec="0 * * * *")
    staff = get_user_model().objects.create_user("op", "op@example.com", "pw", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename="view_routine"))
    client.force_login(staff)
    assert theirs.id in client.get("/board/routines/").content.decode()  # staff read it
    refused = client.post(f"/board/routines/{theirs.id}/pause/")
    assert refused.status_code == 403
    assert b"routines.change_routine" in refused.content
    assert store.get_routine(theirs.id).status == RoutineStatus.IDLE
    staff.user_permissions.add(Permission.objects.get(codename="change_routine"))
    staff = get_user_model().objects.get(pk=staff.pk)  # permissions are cached per object
    client.force_login(staff)
    assert client.post(f"/board/routines/{theirs.id}/pause/").status_code == 302
    assert store.get_routine(theirs.id).status == RoutineStatus.PAUSED


def test_new_and_edit_from_a_teams_list_keep_that_team_and_title_the_tab_in_words(browser, clock):
    # From Ops's list, New routine opened on "---------" and every link on the form
    # (All routines, Cancel, Board) went back to all teams; the tab read
    # 'New routine<script type="module" …></script> — Clawboo'.
    listing = browser.get("/board/routines/?team=ops").content.decode()
    assert 'href="/board/routines/new/?team=ops"' in listing
    form = browser.get("/board/routines/new/?team=ops").content.decode()
    assert re.search(r'<option value="ops" selected>', form)
    assert re.search(r"<title>New routine — Clawboo</title>", form)
    for page in ("/board/", "/board/routines/"):
        assert f'href="{page}?team=ops"' in form, page
    assert ">← All routines<" in form and 'href="/board/routines/">' not in form
    created = browser.post("/board/routines/new/?team=ops", FORM)
    routine = Routine.objects.get()
    assert created["Location"] == f"/board/routines/?team=ops#routine-{routine.id}"
    assert f'href="/board/routines/{routine.id}/edit/?team=ops"' in (
        browser.get("/board/routines/?team=ops").content.decode()
    )
    edit = browser.get(f"/board/routines/{routine.id}/edit/?team=ops").content.decode()
    assert re.search(r"<title>Edit routine — Clawboo</title>", edit)
    assert 'href="/board/routines/?team=ops"' in edit
    saved = browser.post(f"/board/routines/{routine.id}/edit/?team=ops", FORM)
    assert saved["Location"] == f"/board/routines/?team=ops#routine-{routine.id}"


def fires_in_review(routine, agent_id: str, count: int) -> list[str]:
    """``count`` fires of ``routine`` worked and waiting in review."""
    from board import store as board_store

    ids = []
    for n in range(count):
        task = board_store.create_task(
            title="Tidy the notes",
            team=routine.team_id,
            metadata={"routine_id": routine.id, "slot_at": n},
            file_mutating=False,
        ).task
        assert board_store.claim(task.id, agent_id, "command").ok
        board_store.await_review(task.id)
        ids.append(task.id)
    return ids


def test_each_routine_says_how_many_of_its_fires_wait_in_review_linking_to_them(browser, clock):
    """A routine firing every two minutes filed 24 tasks into review in 45 minutes and
    nothing on the page said so."""
    from board import store as board_store

    busy = store.create_routine(agent_id="mine", team="ops", cron_spec="*/2 * * * *")
    quiet = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * *")
    waiting = fires_in_review(busy, "mine", 3)
    board_store.drop_task(waiting[0])  # deleted: not on the board, not counted
    board_store.create_task(title="Not yet worked", team="ops", metadata={"routine_id": busy.id})
    body = browser.get("/board/routines/?team=ops").content.decode()
    link = re.search(rf'<a href="([^"]+)" id="in-review-{busy.id}"[^>]*>([^<]+)</a>', body)
    assert link is not None, body
    assert link.group(2) == "2 in review"
    assert link.group(1) == f"/board/?team=ops&amp;routine={busy.id}"  # the board, filtered
    assert re.search(rf'id="in-review-{quiet.id}"[^>]*>0 in review<', body)
