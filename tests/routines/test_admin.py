"""Routines in the admin: added and changed through routines.store (its checks shown
beside their fields), paused as an action, ledger stamps shown as local dates."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from routines import store
from routines.models import Routine, RoutineFire, RoutineStatus

pytestmark = pytest.mark.django_db

FORM = {
    "team": "ops",
    "agent": "ada",
    "cron_spec": "0 9 * * 1-5",
    "timezone": "America/New_York",
    "catch_up": "latest",
    "title": "Standup notes",
    "description": "",
    "kind": "research",
    "priority": "1",
    "repo_path": "",
    "model": "",
    "max_node_cents": "",
    "team_task_id": "",
}


@pytest.fixture
def operator(clock, client, agent):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_a_routine_is_added_changed_and_paused_in_the_admin(operator):
    added = operator.post("/admin/routines/routine/add/", FORM)
    assert added.status_code == 302, added.content.decode()[:3000]
    routine = Routine.objects.get()
    assert routine.timezone == "America/New_York" and routine.scheduled_by == "clawboo"
    assert routine.task_template["title"] == "Standup notes"
    assert routine.next_run_at is not None  # armed by the store, not left for a save()

    page = operator.get(f"/admin/routines/routine/{routine.id}/change/")
    assert page.status_code == 200
    assert "Mon 7 Jan 2030, 09:00 EST" in page.content.decode()
    changed = operator.post(
        f"/admin/routines/routine/{routine.id}/change/",
        {**FORM, "cron_spec": "0 12 * * *", "timezone": "UTC", "title": "Lunch notes"},
    )
    assert changed.status_code == 302
    routine = store.get_routine(routine.id)
    assert (routine.cron_spec, routine.timezone) == ("0 12 * * *", "UTC")
    assert routine.task_template["title"] == "Lunch notes"

    paused = operator.post(
        "/admin/routines/routine/",
        {"action": "pause", "_selected_action": [routine.id]},
        follow=True,
    )
    assert any(m.startswith("Paused 1 routine(s): ") for m in messages_of(paused))
    assert store.get_routine(routine.id).status == RoutineStatus.PAUSED


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"cron_spec": "0 25 * * *"}, "cron_spec", "is not a valid cron expression"),
        ({"cron_spec": "* * *"}, "cron_spec", "has 3 fields"),
        ({"title": "   "}, "title", "This field is required"),
    ],
)
def test_an_invalid_routine_is_refused_beside_its_field(operator, change, field, message):
    response = operator.post("/admin/routines/routine/add/", {**FORM, **change})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field]), errors
    assert not Routine.objects.exists()


def test_an_agent_of_another_team_is_refused(operator):
    from core import registry

    registry.ensure_team("other", "Other")
    registry.create_agent(id="bo", display_name="Bo", team="other", runtime="command")
    response = operator.post("/admin/routines/routine/add/", {**FORM, "agent": "bo"})
    assert response.status_code == 200
    assert "is not on team 'ops'" in " ".join(response.context["adminform"].form.errors["agent"])
    assert not Routine.objects.exists()


def test_ledger_stamps_show_as_dates_in_the_routines_timezone(operator):
    routine = store.create_routine(
        agent_id="ada", team="ops", cron_spec="0 9 * * *", timezone="America/New_York"
    )
    RoutineFire.objects.create(
        routine=routine, slot_at=routine.next_run_at, fired_at=routine.created_at
    )
    listing = operator.get("/admin/routines/routine/").content.decode()
    assert "Mon 7 Jan 2030, 09:00 EST" in listing
    assert str(routine.next_run_at) not in listing  # no raw epoch milliseconds
    assert "armed" in listing and "At 09:00" in listing
    fires = operator.get("/admin/routines/routinefire/").content.decode()
    assert "Mon 7 Jan 2030, 09:00 EST" in fires and str(routine.next_run_at) not in fires
    fire = RoutineFire.objects.get()
    detail = operator.get(f"/admin/routines/routinefire/{fire.pk}/change/").content.decode()
    assert "Mon 7 Jan 2030, 09:00 EST" in detail and str(routine.next_run_at) not in detail


def test_run_now_on_a_paused_routine_is_explained_not_a_500(operator):
    routine = store.create_routine(agent_id="ada", team="ops", cron_spec="0 9 * * *")
    store.pause_routine(routine.id)
    response = operator.post(
        "/admin/routines/routine/",
        {"action": "run_now", "_selected_action": [routine.id]},
        follow=True,
    )
    assert response.status_code == 200
    said = messages_of(response)
    assert any("cannot be run now: it is paused (resume it first)" in m for m in said), said


def test_deleting_in_the_admin_goes_through_the_store(operator):
    routine = store.create_routine(agent_id="ada", team="ops", cron_spec="0 9 * * *")
    before = store.poke_seq()
    response = operator.post(f"/admin/routines/routine/{routine.id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Routine.objects.exists() and store.poke_seq() == before + 1


def test_a_bound_task_with_another_firing_owner_is_refused_and_nothing_saved(operator):
    from board import store as board_store

    task = board_store.create_task(title="Fired elsewhere", team="ops").task
    board_store.set_scheduled_by(task.id, "openclaw")
    response = operator.post(
        "/admin/routines/routine/add/",
        {**FORM, "cron_spec": "once@2030-02-01T09:00", "team_task_id": task.id},
        follow=True,
    )
    assert any("already fired by 'openclaw'" in m for m in messages_of(response))
    assert not Routine.objects.exists()


def test_the_list_says_how_many_of_each_routines_fires_wait_in_review(operator):
    from tests.routines.test_page import fires_in_review

    routine = store.create_routine(agent_id="ada", team="ops", cron_spec="*/2 * * * *")
    fires_in_review(routine, "ada", 2)
    body = operator.get("/admin/routines/routine/").content.decode()
    assert "<span>In review</span>" in body  # the column's header
    assert f'<a href="/board/?team=ops&amp;routine={routine.id}">2</a>' in body


def test_two_routines_of_one_title_and_schedule_are_named_apart(agent):
    # Both read "Tidy the notes (0 9 * * *)" in the admin and the board's filter.
    made = [
        store.create_routine(
            agent_id=agent.id,
            team=agent.team_id,
            cron_spec="0 9 * * *",
            task_template={"title": "Tidy the notes"},
        )
        for _ in range(2)
    ]
    names = [str(r) for r in made]
    assert names == [f"Tidy the notes · 0 9 * * * · {r.id[:6]}" for r in made]
    assert names[0] != names[1]
    assert [r.as_dict()["name"] for r in made] == names


def test_a_routine_added_in_the_admin_is_named_by_its_title(operator):
    from django.contrib.admin.models import LogEntry

    added = operator.post("/admin/routines/routine/add/", FORM, follow=True)
    routine = Routine.objects.get()
    said = messages_of(added)
    assert len(said) == 1 and "Standup notes · 0 9 * * 1-5" in said[0], said
    assert LogEntry.objects.get().object_repr == str(routine)


def test_the_routine_actions_name_the_routines_they_moved(operator):
    template = {"title": "Standup notes"}
    first = store.create_routine(
        agent_id="ada", team="ops", cron_spec="0 9 * * *", task_template=template
    )
    second = store.create_routine(agent_id="ada", team="ops", cron_spec="0 17 * * *")
    store.pause_routine(second.id)
    answer = operator.post(
        "/admin/routines/routine/",
        {"action": "run_now", "_selected_action": [first.id, second.id]},
        follow=True,
    )
    said = messages_of(answer)
    first = store.get_routine(first.id)
    assert f"Queued 1 routine(s): {first}" in said, said
    assert any(m.startswith(f"{store.get_routine(second.id)}: ") for m in said), said
