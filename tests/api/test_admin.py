"""The admin as operator console: every write through the data layer, declines shown."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board import store
from board.models import Task
from core import registry
from core.models import Event

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def messages_of(response):
    return [str(m) for m in response.context["messages"]] if response.context else []


def test_task_changelist_filters_and_search(operator):
    store.create_task(title="Fix login", labels=["ui"])
    store.create_task(title="Write docs")
    page = operator.get("/admin/board/task/?q=login")
    assert page.status_code == 200 and b"Fix login" in page.content
    assert b"Write docs" not in page.content
    assert operator.get("/admin/board/task/?status__exact=todo&label=ui").status_code == 200


def test_status_field_offers_only_legal_targets(operator):
    task = store.create_task(title="t", status="backlog").task
    page = operator.get(f"/admin/board/task/{task.id}/change/")
    choices = [value for value, _ in page.context["adminform"].form.fields["status"].choices]
    assert choices == ["backlog", "todo", "blocked", "cancelled"]


def test_saving_a_status_change_goes_through_the_data_layer(operator):
    task = store.create_task(title="t", status="backlog").task
    form = {
        "title": "t2",
        "description": "",
        "status": "todo",
        "priority": "0",
        "labels": "[]",
        "metadata": "{}",
        "override_reason": "",
        "comments-TOTAL_FORMS": "0",
        "comments-INITIAL_FORMS": "0",
        "executions-TOTAL_FORMS": "0",
        "executions-INITIAL_FORMS": "0",
    }
    response = operator.post(f"/admin/board/task/{task.id}/change/", form)
    assert response.status_code == 302, response.content[:2000]
    task = store.get_task(task.id)
    assert task.status == "todo" and task.title == "t2"
    assert task.revision == 3  # create, edit, transition: each a data-layer write


def test_adding_a_task_in_the_admin_uses_create_task(operator):
    form = {
        "id": "",
        "team": "default",
        "title": "From admin",
        "description": "",
        "status": "todo",
        "priority": "2",
        "labels": '["ops"]',
        "metadata": "{}",
        "file_mutating": "on",
        "max_attempts": "",
        "comments-TOTAL_FORMS": "0",
        "comments-INITIAL_FORMS": "0",
        "executions-TOTAL_FORMS": "0",
        "executions-INITIAL_FORMS": "0",
    }
    response = operator.post("/admin/board/task/add/", form)
    assert response.status_code == 302, response.content[:3000]
    task = Task.objects.get(title="From admin")
    assert task.labels == ["ops"] and task.incarnation_id and task.revision == 1


def test_actions_report_each_rows_outcome(operator):
    a = store.create_task(title="a").task
    b = store.create_task(title="b").task
    store.claim(a.id, "ada")
    store.transition(b.id, "cancelled")
    response = operator.post(
        "/admin/board/task/",
        {"action": "cancel_tasks", "apply": "1", "_selected_action": [a.id, b.id]},
        follow=True,
    )
    texts = messages_of(response)
    assert any(a.id in t for t in texts if t.startswith("Cancelled"))
    assert any("declined (terminal" in t and b.id in t for t in texts)


def test_illegal_move_action_is_reported_not_swallowed(operator):
    task = store.create_task(title="a", status="backlog").task
    response = operator.post(
        "/admin/board/task/", {"action": "move_to_done", "_selected_action": [task.id]}, follow=True
    )
    assert any(
        "refused" in t and "cannot move from backlog to done" in t for t in messages_of(response)
    )
    assert store.get_task(task.id).status == "backlog"


def test_override_action_asks_why_then_records_it_as_the_logged_in_user(operator):
    task = store.create_task(title="a").task
    store.claim(task.id, "ada")
    store.set_verdict(task.id, "fail", "tests red")
    ask = operator.post(
        "/admin/board/task/", {"action": "override_verification", "_selected_action": [task.id]}
    )
    assert ask.status_code == 200 and b"as\nyours (<strong>op</strong>)" in ask.content
    page = ask.content.decode()
    assert f"{task.id} — a (verdict: fail, status: in_progress)" in page
    assert 'value="Record override"' in page
    done = operator.post(
        "/admin/board/task/",
        {
            "action": "override_verification",
            "_selected_action": [task.id],
            "apply": "1",
            "by": "grace",  # a typed name is not who is recorded
            "reason": "known flake",
        },
        follow=True,
    )
    assert done.status_code == 200
    task = store.get_task(task.id)
    assert task.status == "done" and task.human_override["by"] == "op"
    assert "known flake" in task.comments.get().body


def test_reconcile_button_runs_the_pass(operator):
    response = operator.post("/admin/board/task/reconcile/", {"pass": "stale"}, follow=True)
    assert any("stale pass released 0" in t for t in messages_of(response))


def test_the_task_list_offers_every_recovery_pass_as_a_button(operator):
    page = operator.get("/admin/board/task/").content.decode()
    for name in store.RECOVERY_PASSES:
        assert f'name="pass" value="{name}"' in page, name


def test_read_only_ledgers_cannot_be_edited(operator):
    assert operator.get("/admin/board/executionprocess/add/").status_code == 403
    assert operator.get("/admin/clawboo/event/add/").status_code == 403


def test_agent_admin_validates_through_the_registry(operator):
    response = operator.post(
        "/admin/clawboo/agent/add/",
        {
            "id": "bot",
            "display_name": "Bot",
            "team": "default",
            "runtime": "codex",
            "participant_kind": "agent",
            "settings": "{}",
        },
    )
    assert response.status_code == 302
    from core.models import Agent

    assert Agent.objects.get(pk="bot").runtime == "codex"


def test_a_refused_save_is_shown_and_writes_nothing(operator):
    task = store.create_task(title="t").task
    store.claim(task.id, "ada")
    store.set_verdict(task.id, "fail", "red")
    before = store.get_task(task.id).revision
    form = {
        "title": "renamed",
        "description": "",
        "status": "done",
        "priority": "0",
        "labels": "[]",
        "metadata": "{}",
        "override_reason": "",
        "comments-TOTAL_FORMS": "0",
        "comments-INITIAL_FORMS": "0",
        "executions-TOTAL_FORMS": "0",
        "executions-INITIAL_FORMS": "0",
    }
    response = operator.post(f"/admin/board/task/{task.id}/change/", form, follow=True)
    assert any("Not saved" in t and "verdict" in t for t in messages_of(response))
    task = store.get_task(task.id)
    assert task.status == "in_progress" and task.title == "t" and task.revision == before


def test_a_refused_add_keeps_what_was_typed_and_names_the_field(operator):
    # A refusal used to redirect to an empty add form: id, name, team and runtime gone.
    response = operator.post(
        "/admin/clawboo/agent/add/",
        {
            "id": "sh-bot",
            "display_name": "Shell bot",
            "team": "default",
            "runtime": "command",
            "participant_kind": "agent",
            "settings": '{"argv": "echo hi > out.txt"}',
        },
    )
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form["id"].value() == "sh-bot" and form["display_name"].value() == "Shell bot"
    assert form["team"].value() == "default" and form["runtime"].value() == "command"
    assert "settings.argv" in " ".join(form.errors["settings"])
    assert any("Not saved" in t for t in messages_of(response))
    from core.models import Agent

    assert not Agent.objects.filter(pk="sh-bot").exists()


def test_a_refusal_naming_no_field_of_the_form_is_shown_above_it(operator):
    task = store.create_task(title="t").task
    store.claim(task.id, "ada")
    store.set_verdict(task.id, "fail", "red")
    form = {
        "title": "renamed",
        "description": "",
        "status": "done",
        "priority": "0",
        "labels": "[]",
        "metadata": "{}",
        "override_reason": "",
        "comments-TOTAL_FORMS": "0",
        "comments-INITIAL_FORMS": "0",
        "executions-TOTAL_FORMS": "0",
        "executions-INITIAL_FORMS": "0",
    }
    response = operator.post(f"/admin/board/task/{task.id}/change/", form)
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form["title"].value() == "renamed"
    assert "verdict" in " ".join(form.non_field_errors())


def test_the_admin_approves_waiting_work_and_answers_tool_calls_as_the_operator(operator):
    waiting = store.create_task(title="risky", labels=["risk"]).task
    plain = store.create_task(title="plain").task
    response = operator.post(
        "/admin/board/task/",
        {"action": "approve_work", "_selected_action": [waiting.id, plain.id]},
        follow=True,
    )
    texts = messages_of(response)
    assert any(t.startswith("Approved") and waiting.id in t for t in texts)
    assert any("needs no approval" in t and plain.id in t for t in texts)
    approval = store.get_task(waiting.id).approval
    assert approval["state"] == "approved" and approval["by"] == "op"

    asked = store.ask_tool_call(plain.id, "bot", "Bash", {"command": "ls"})
    operator.post(
        "/admin/board/toolapproval/",
        {"action": "deny", "_selected_action": [asked.id]},
        follow=True,
    )
    row = store.list_approvals(teams=None, state=None).get()
    assert (row.state, row.decided_by) == ("denied", "op")


def test_the_task_page_shows_the_structured_verdict(operator):
    task = store.create_task(title="Judged").task
    detail = {
        "gate": {
            "command": "pytest -q",
            "exit_code": 0,
            "duration_ms": 812,
            "timed_out": False,
            "output_tail": "3 passed",
        },
        "findings": [
            {"severity": "crash", "title": "None deref", "file": "app.py", "line": 3},
        ],
        "reviewer": {"agent": "critic", "runtime": "codex", "model": None},
        "attempts": [],
    }
    store.record_verification(task.id, "fail", "the reviewer found 1 blocking issue", detail)
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert "<code>pytest -q</code> exit 0 in 812 ms" in page
    assert "<b>crash</b> None deref <code>app.py:3</code>" in page
    assert "reviewer: critic" in page


def test_the_team_page_names_its_reviewer_agent(operator):
    from core import registry

    registry.create_agent(id="critic", display_name="Critic", team="default", runtime="command")
    page = operator.get("/admin/clawboo/team/default/change/")
    assert page.status_code == 200 and "reviewer_agent" in page.context["adminform"].form.fields


def test_the_agent_admin_pauses_and_resumes_and_sets_labels_and_limit(operator):
    from core.models import Agent

    response = operator.post(
        "/admin/clawboo/agent/add/",
        {
            "id": "gpu",
            "display_name": "GPU",
            "team": "default",
            "runtime": "codex",
            "participant_kind": "agent",
            "settings": "{}",
            "labels": "gpu, ssd",
            "max_concurrent": "2",
        },
    )
    assert response.status_code == 302
    agent = Agent.objects.get(pk="gpu")
    assert (agent.labels, agent.max_concurrent) == (["gpu", "ssd"], 2)
    operator.post("/admin/clawboo/agent/", {"action": "pause_agents", "_selected_action": ["gpu"]})
    paused = Agent.objects.get(pk="gpu")
    assert paused.state == "paused" and paused.paused_by == "op"
    operator.post("/admin/clawboo/agent/", {"action": "resume_agents", "_selected_action": ["gpu"]})
    assert Agent.objects.get(pk="gpu").state == "active"


def test_pause_and_resume_in_the_agent_admin_say_what_they_did(operator):
    # Both actions answered with the bare list: no word that anything happened.
    for agent_id in ("gpu", "cpu"):
        registry.create_agent(id=agent_id, display_name=agent_id, team="default", runtime="codex")
    registry.pause_agent("cpu", "", by="op")

    def act(action):
        answer = operator.post(
            "/admin/clawboo/agent/",
            {"action": action, "_selected_action": ["gpu", "cpu"]},
            follow=True,
        )
        return messages_of(answer)

    assert act("pause_agents") == ["Paused 1 agent(s): gpu; already paused: cpu"]
    assert act("resume_agents") == ["Resumed 2 agent(s): cpu, gpu"]
    assert act("resume_agents") == ["Resumed 0 agent(s); not paused: cpu, gpu"]


def test_the_task_admin_sets_a_route(operator):
    registry.create_agent(id="bob", display_name="Bob", team="default", runtime="codex")
    response = operator.post(
        "/admin/board/task/add/",
        {
            "title": "routed",
            "team": "default",
            "status": "todo",
            "priority": "0",
            "labels": "",
            "metadata": "{}",
            "file_mutating": "on",
            "route_agent_id": "bob",
            "route_runtime": "",
            "route_labels": "gpu",
            "comments-TOTAL_FORMS": "0",
            "comments-INITIAL_FORMS": "0",
            "executions-TOTAL_FORMS": "0",
            "executions-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302, messages_of(response)
    task = store.list_tasks().get(title="routed")
    assert task.as_dict()["route"] == {"agent": "bob", "runtime": None, "labels": ["gpu"]}


def staff_with(client, *codenames: str):
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("viewer", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


VIEW_ONLY = ("view_task", "view_agent", "view_toolapproval")


def test_staff_granted_only_view_runs_no_admin_action(client):
    from core.models import Agent

    viewer = staff_with(client, *VIEW_ONLY)
    waiting = store.create_task(title="risky", labels=["risk"]).task
    registry.create_agent(id="gpu", display_name="GPU", team="default", runtime="codex")
    store.pause_agent("gpu", "tripped", by="breaker")
    asked = store.ask_tool_call(waiting.id, "gpu", "Bash", {"command": "rm -rf /"})
    assert viewer.get("/admin/board/task/").status_code == 200  # it reads
    for url, action, row in (
        ("/admin/board/task/", "approve_work", waiting.id),
        ("/admin/board/task/", "move_to_done", waiting.id),
        ("/admin/clawboo/agent/", "resume_agents", "gpu"),
        ("/admin/board/toolapproval/", "allow_once", asked.id),
    ):
        refused = viewer.post(url, {"action": action, "_selected_action": [row]})
        assert refused.status_code == 403, action
        assert b"needs the change permission" in refused.content, action
    assert store.get_task(waiting.id).approval["state"] == "required"
    assert store.get_task(waiting.id).status == "todo"
    assert Agent.objects.get(pk="gpu").state == "paused"
    assert store.list_approvals(teams=None, state=None).get().state == "pending"
    refused = viewer.post("/admin/board/task/reconcile/", {"pass": "stale"})
    assert refused.status_code == 403


def test_staff_granted_change_runs_the_admin_actions_of_that_model(client):
    changer = staff_with(client, *VIEW_ONLY, "change_task")
    waiting = store.create_task(title="risky", labels=["risk"]).task
    changer.post("/admin/board/task/", {"action": "approve_work", "_selected_action": [waiting.id]})
    assert store.get_task(waiting.id).approval["state"] == "approved"
    registry.create_agent(id="gpu", display_name="GPU", team="default", runtime="codex")
    store.pause_agent("gpu", "tripped", by="breaker")
    refused = changer.post(
        "/admin/clawboo/agent/", {"action": "resume_agents", "_selected_action": ["gpu"]}
    )
    assert refused.status_code == 403  # change on tasks is not change on agents


def test_staff_without_the_delete_permission_withdraw_no_tool_grant(client):
    """A grant's own delete page asked only whether the person was staff: one granted
    only view withdrew an ``allow_always`` a person had given (the changelist's
    "Delete selected" already asked for the delete permission)."""
    from board.models import ToolGrant

    registry.create_agent(id="gpu", display_name="GPU", team="default", runtime="codex")
    grant = ToolGrant.objects.create(
        agent_id="gpu", tool="Bash", granted_by="ada", created_at=store.now()
    )
    viewer = staff_with(client, "view_toolgrant")
    assert viewer.get("/admin/board/toolgrant/").status_code == 200  # it reads
    url = f"/admin/board/toolgrant/{grant.pk}/delete/"
    assert viewer.get(url).status_code == 403
    assert viewer.post(url, {"post": "yes"}).status_code == 403
    assert ToolGrant.objects.filter(pk=grant.pk).exists()


def test_staff_with_the_delete_permission_withdraw_a_tool_grant(client):
    from board.models import ToolGrant

    registry.create_agent(id="gpu", display_name="GPU", team="default", runtime="codex")
    grant = ToolGrant.objects.create(
        agent_id="gpu", tool="Bash", granted_by="ada", created_at=store.now()
    )
    deleter = staff_with(client, "view_toolgrant", "delete_toolgrant")
    answer = deleter.post(f"/admin/board/toolgrant/{grant.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302
    assert not ToolGrant.objects.filter(pk=grant.pk).exists()


# --- a person's powers: only a superuser grants them -----------------------------------


def change_form(user, **changes):
    """The users page's change form as a person would send it back, with ``changes``."""
    data = {
        "username": user.username,
        "first_name": "",
        "last_name": "",
        "email": "",
        "is_active": "on",
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }
    data.update(changes)
    return data


@pytest.fixture
def user_operator(client):
    """Staff, not a superuser, granted to view and change users and groups."""
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("clerk", password="pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            codename__in=("view_user", "change_user", "view_group", "change_group")
        )
    )
    client.force_login(user)
    return user


def test_a_staff_person_who_is_not_superuser_cannot_grant_themselves_any_power(
    client, user_operator
):
    from django.contrib.auth.models import Group, Permission

    every = Permission.objects.get(codename="delete_user")
    admins = Group.objects.create(name="admins")
    admins.permissions.add(every)
    bob = get_user_model().objects.create_user("bob", password="pw")
    for person in (user_operator, bob):
        sent = client.post(
            f"/admin/auth/user/{person.pk}/change/",
            change_form(
                person,
                is_superuser="on",
                is_staff="on",
                groups=[admins.pk],
                user_permissions=[every.pk],
                first_name="renamed",
            ),
        )
        assert sent.status_code == 302, sent.content[:500]
        person.refresh_from_db()
        assert person.first_name == "renamed"  # the rest of the row still saves
        assert not person.is_superuser and not person.groups.exists()
        assert not person.user_permissions.filter(pk=every.pk).exists()
    assert not bob.is_staff
    page = client.get(f"/admin/auth/user/{user_operator.pk}/change/")
    assert "is_superuser" not in page.context["adminform"].form.fields


def test_nor_take_a_superusers_or_another_staff_persons_row(client, user_operator):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    other = get_user_model().objects.create_user("ops", password="pw", is_staff=True)
    for person in (root, other):
        password = client.post(
            f"/admin/auth/user/{person.pk}/password/",
            {"password1": "taken-over-9", "password2": "taken-over-9"},
        )
        assert password.status_code == 403
        changed = client.post(
            f"/admin/auth/user/{person.pk}/change/",
            change_form(person, is_active="", first_name="x"),
        )
        assert changed.status_code == 403
        person.refresh_from_db()
        assert person.check_password("pw") and person.is_active and person.first_name == ""


def test_nor_take_over_a_member_of_a_team_they_are_not_in(client, user_operator):
    from django.contrib.auth.models import Permission

    user_operator.user_permissions.add(Permission.objects.get(codename="delete_user"))
    registry.create_team("ours")
    registry.create_team("theirs")
    registry.update_team("ours", members=[user_operator])
    people = get_user_model().objects
    stranger = people.create_user("stranger", password="pw")  # a member of theirs
    registry.update_team("theirs", members=[stranger])
    owner = people.create_user("owner", password="pw")  # ours, with an agent in theirs
    registry.update_team("ours", members=[user_operator, owner])
    registry.create_agent(
        id="their-bot",
        display_name="Their bot",
        team="theirs",
        runtime="command",
        settings={"argv": ["true"]},
        owner=owner,
    )
    for person in (stranger, owner):
        password = client.post(
            f"/admin/auth/user/{person.pk}/password/",
            {"password1": "taken-over-9", "password2": "taken-over-9"},
        )
        assert password.status_code == 403
        changed = client.post(
            f"/admin/auth/user/{person.pk}/change/", change_form(person, first_name="x")
        )
        assert changed.status_code == 403
        deleted = client.post(
            "/admin/auth/user/",
            {"action": "delete_selected", "_selected_action": [person.pk], "post": "yes"},
        )
        assert deleted.status_code == 403
        person.refresh_from_db()
        assert person.check_password("pw") and person.first_name == ""


def test_a_staff_person_still_resets_the_password_of_a_member_of_their_own_team(
    client, user_operator
):
    registry.create_team("ours")
    colleague = get_user_model().objects.create_user("colleague", password="pw")
    registry.update_team("ours", members=[user_operator, colleague])
    reset = client.post(
        f"/admin/auth/user/{colleague.pk}/password/",
        {"password1": "fresh-pass-9", "password2": "fresh-pass-9"},
    )
    assert reset.status_code == 302, reset.content[:500]
    colleague.refresh_from_db()
    assert colleague.check_password("fresh-pass-9")


def team_form(team_id, members, **changes):
    """A team's change form as a person would send it back, with ``members``."""
    return {"name": team_id, "members": [m.pk for m in members], **changes}


def grant(user, *codenames):
    from django.contrib.auth.models import Permission

    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))


def test_nor_join_a_team_they_are_not_in_to_take_over_its_members(client, user_operator):
    """Staff granted "change team" added themselves to another team, then reset its
    member's password (people wholly of the asker's teams) and held its approvals."""
    grant(user_operator, "view_team", "change_team")
    registry.create_team("ours")
    registry.create_team("theirs")
    registry.update_team("ours", members=[user_operator])
    stranger = get_user_model().objects.create_user("stranger", password="pw")
    registry.update_team("theirs", members=[stranger])
    joined = client.post(
        "/admin/clawboo/team/theirs/change/", team_form("theirs", [stranger, user_operator])
    )
    assert joined.status_code == 302, messages_of(joined)
    assert set(registry.get_team("theirs").members.all()) == {stranger}
    reset = client.post(
        f"/admin/auth/user/{stranger.pk}/password/",
        {"password1": "taken-over-9", "password2": "taken-over-9"},
    )
    assert reset.status_code == 403
    stranger.refresh_from_db()
    assert stranger.check_password("pw")


def test_nor_take_a_shared_member_out_of_a_team_they_are_not_in(client, user_operator):
    """Taking a colleague out of the one team the asker did not share made them wholly
    of the asker's teams: then their password was the asker's to set."""
    grant(user_operator, "view_team", "change_team")
    registry.create_team("ours")
    registry.create_team("theirs")
    colleague = get_user_model().objects.create_user("colleague", password="pw")
    registry.update_team("ours", members=[user_operator, colleague])
    registry.update_team("theirs", members=[colleague])
    taken_out = client.post("/admin/clawboo/team/theirs/change/", team_form("theirs", []))
    assert taken_out.status_code == 302
    assert set(registry.get_team("theirs").members.all()) == {colleague}
    page = client.get("/admin/clawboo/team/theirs/change/")
    assert "members" not in page.context["adminform"].form.fields


def test_a_staff_person_still_changes_the_members_of_their_own_team(client, user_operator):
    grant(user_operator, "view_team", "change_team")
    registry.create_team("ours")
    registry.update_team("ours", members=[user_operator])
    newcomer = get_user_model().objects.create_user("newcomer", password="pw")
    sent = client.post(
        "/admin/clawboo/team/ours/change/", team_form("ours", [user_operator, newcomer])
    )
    assert sent.status_code == 302, messages_of(sent)
    assert set(registry.get_team("ours").members.all()) == {user_operator, newcomer}


def test_the_registry_refuses_a_membership_change_asked_by_a_non_member(user_operator):
    from core.errors import Forbidden

    registry.create_team("theirs")
    with pytest.raises(Forbidden):
        registry.update_team("theirs", members=[user_operator], by=user_operator)
    assert not registry.get_team("theirs").members.exists()


def test_a_superuser_still_changes_any_teams_members(operator):
    registry.create_team("theirs")
    bob = get_user_model().objects.create_user("bob", password="pw")
    sent = operator.post("/admin/clawboo/team/theirs/change/", team_form("theirs", [bob]))
    assert sent.status_code == 302, messages_of(sent)
    assert set(registry.get_team("theirs").members.all()) == {bob}


def test_nor_add_a_permission_to_a_group(client, user_operator):
    from django.contrib.auth.models import Group, Permission

    mine = Group.objects.create(name="mine")
    user_operator.groups.add(mine)
    every = list(Permission.objects.values_list("pk", flat=True))
    sent = client.post(
        f"/admin/auth/group/{mine.pk}/change/", {"name": "mine", "permissions": every}
    )
    assert sent.status_code == 302
    assert not mine.permissions.exists()


def test_a_superuser_still_grants_them(operator):
    bob = get_user_model().objects.create_user("bob", password="pw")
    sent = operator.post(
        f"/admin/auth/user/{bob.pk}/change/", change_form(bob, is_staff="on", is_superuser="on")
    )
    assert sent.status_code == 302
    bob.refresh_from_db()
    assert bob.is_staff and bob.is_superuser


def test_the_add_task_page_saves_as_it_is_shown(operator):
    """Its metadata box showed ``null``, which the field then refused: an operator
    could not add a task without typing ``{}`` first."""
    page = operator.get("/admin/board/task/add/")
    shown = page.context["adminform"].form["metadata"].value()
    assert shown == "{}"
    answer = operator.post(
        "/admin/board/task/add/",
        {
            "team": "default",
            "title": "As shown",
            "status": "todo",
            "priority": "0",
            "metadata": shown,
            "comments-TOTAL_FORMS": "0",
            "comments-INITIAL_FORMS": "0",
            "executions-TOTAL_FORMS": "0",
            "executions-INITIAL_FORMS": "0",
        },
    )
    assert answer.status_code == 302, messages_of(answer)
    assert Task.objects.get(title="As shown").metadata == {}


def test_the_agent_list_says_why_an_agent_takes_no_work(operator):
    for agent_id in ("tripped", "sick", "fine"):
        registry.create_agent(id=agent_id, display_name=agent_id, team="default", runtime="codex")
    registry.pause_agent(
        "tripped", "breaker: 3 consecutive failed runs; last: exit 3", by="breaker"
    )
    registry.record_health("sick", False, "codex: not found on PATH")
    page = operator.get("/admin/clawboo/agent/").content.decode()
    assert "breaker: 3 consecutive failed runs; last: exit 3" in page
    assert "codex: not found on PATH" in page


def test_an_agents_page_links_to_its_tasks_runs_budgets_and_routines(operator):
    from board.store import spend
    from routines import store as routines

    for agent_id in ("mine", "other"):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id,
            team="default",
            runtime="command",
            settings={"argv": ["true"]},
        )
        task = store.create_task(id=f"{agent_id}-task", title=f"{agent_id} task").task
        run = store.open_execution(task.id, store.claim(task.id, agent_id).ticket)
        store.close_execution(run.id, "failed", error=f"{agent_id} failed")
        spend.create_budget(
            "default",
            {"scope": "agent", "scope_id": agent_id, "window": "day", "limit_cents": 1},
        )
        routines.create_routine(
            agent_id=agent_id,
            team="default",
            cron_spec="0 9 * * *",
            task_template={"title": f"{agent_id} routine"},
        )
    page = operator.get("/admin/clawboo/agent/mine/change/").content.decode()
    links = re.findall(r'<a href="([^"]+)">(tasks|runs|budgets|routines)</a>', page)
    assert [label for _, label in links] == ["tasks", "runs", "budgets", "routines"]
    for href, label in links:
        listed = operator.get(html.unescape(href))
        assert listed.status_code == 200, (label, href)
        rows = list(listed.context["cl"].result_list)
        assert len(rows) == 1, (label, rows)


def test_the_runs_list_says_why_each_run_failed_and_links_its_task_and_agent(operator):

    registry.create_agent(
        id="flaky", display_name="Flaky", team="default", runtime="command", settings={}
    )
    task = store.create_task(id="rotate-logs", title="Rotate logs").task
    run = store.open_execution(task.id, store.claim(task.id, "flaky").ticket)
    store.close_execution(
        run.id,
        "failed",
        error="exited with code 3: nope",
        error_class="environment",
        log="x" * 5000,
    )
    with CaptureQueriesContext(connection) as seen:
        page = operator.get("/admin/board/executionprocess/")
    text = page.content.decode()
    assert "exited with code 3: nope" in text
    assert 'href="/admin/board/task/rotate-logs/change/"' in text
    assert 'href="/admin/clawboo/agent/flaky/change/"' in text
    # The list reads no run's log (a run's page does).
    assert not any('"log"' in q["sql"] for q in seen.captured_queries)
    year = run.started_at.year
    drilled = operator.get(f"/admin/board/executionprocess/?started_at__year={year}")
    assert [r.pk for r in drilled.context["cl"].result_list] == [run.pk]
    detail = operator.get(f"/admin/board/executionprocess/{run.pk}/change/").content.decode()
    assert "x" * 5000 in detail and 'href="/admin/clawboo/agent/flaky/change/"' in detail


def test_a_tasks_page_links_to_its_runs_and_events_and_the_list_to_its_agent(operator):
    registry.create_agent(id="ada", display_name="Ada", team="default", runtime="codex")
    task = store.create_task(id="mine", title="Mine").task
    store.create_task(id="other", title="Other")
    store.claim(task.id, "ada")
    listed = operator.get("/admin/board/task/").content.decode()
    assert 'href="/admin/clawboo/agent/ada/change/"' in listed
    page = operator.get("/admin/board/task/mine/change/").content.decode()
    links = dict(
        (label, html.unescape(href))
        for href, label in re.findall(r'<a href="([^"]+)">(runs|events)</a>', page)
    )
    assert set(links) == {"runs", "events"}
    events = operator.get(links["events"])
    assert events.status_code == 200
    kinds = [e.kind for e in events.context["cl"].result_list]
    assert kinds and {e.task_id for e in events.context["cl"].result_list} == {"mine"}
    assert 'href="/admin/board/task/mine/change/"' in events.content.decode()
    runs = operator.get(links["runs"])
    assert runs.status_code == 200 and list(runs.context["cl"].result_list) == []


def test_the_add_task_page_shows_only_what_an_operator_sets(operator):
    form = operator.get("/admin/board/task/add/").content.decode()
    for written_by_the_board in ("Lease until", "Attempts", "Cost cents", "Verdict evidence"):
        assert f"<label>{written_by_the_board}:</label>" not in form
    assert 'name="executions-TOTAL_FORMS"' not in form
    assert 'name="comments-TOTAL_FORMS"' not in form
    task = store.create_task(title="t").task
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert "<label>Lease until:</label>" in page


def test_the_event_log_is_browsed_by_date(operator):
    store.create_task(title="t")
    event = Event.objects.order_by("-seq").first()
    at = event.created_at
    page = operator.get(
        f"/admin/clawboo/event/?created_at__year={at.year}&created_at__month={at.month}"
    )
    assert page.status_code == 200 and event in list(page.context["cl"].result_list)
    # Fixed spans in the filters, which read nothing to offer themselves (a date
    # hierarchy's menu scans the whole log for its years on every load).
    with CaptureQueriesContext(connection) as seen:
        listed = operator.get("/admin/clawboo/event/").content.decode()
    assert "Past 7 days" in listed
    assert not any("created_at" in q["sql"] and "MIN(" in q["sql"] for q in seen.captured_queries)
    assert not any(
        "DISTINCT" in q["sql"] and "created_at" in q["sql"] for q in seen.captured_queries
    )


def test_a_parent_task_is_picked_by_typing_not_from_every_task(operator):
    for n in range(30):
        store.create_task(id=f"old-{n}", title=f"Old work {n}")
    store.create_task(id="epic", title="The epic")
    form = operator.get("/admin/board/task/add/").content.decode()
    assert "Old work 17" not in form and "admin-autocomplete" in form
    found = operator.get(
        "/admin/autocomplete/",
        {"app_label": "board", "model_name": "task", "field_name": "parent_task", "term": "epic"},
    ).json()
    assert [row["id"] for row in found["results"]] == ["epic"]
    answer = operator.post(
        "/admin/board/task/add/",
        {
            "id": "child",
            "team": "default",
            "title": "A child",
            "status": "todo",
            "priority": "0",
            "metadata": "{}",
            "parent_task": "epic",
            "comments-TOTAL_FORMS": "0",
            "comments-INITIAL_FORMS": "0",
            "executions-TOTAL_FORMS": "0",
            "executions-INITIAL_FORMS": "0",
        },
    )
    assert answer.status_code == 302, messages_of(answer)
    assert Task.objects.get(pk="child").parent_task_id == "epic"


def test_a_machine_tokens_agents_are_picked_by_typing(operator):
    for n in range(20):
        registry.create_agent(
            id=f"bot-{n}", display_name=f"Bot {n}", team="default", runtime="human"
        )
    form = operator.get("/admin/clawboo/machinetoken/add/").content.decode()
    assert "Bot 13" not in form and "admin-autocomplete" in form
    found = operator.get(
        "/admin/autocomplete/",
        {
            "app_label": "clawboo",
            "model_name": "machinetoken",
            "field_name": "agents",
            "term": "bot-13",
        },
    ).json()
    assert [row["id"] for row in found["results"]] == ["bot-13"]


def test_a_teams_reviewer_is_offered_from_its_own_agents_only(operator):
    registry.create_team("ops", "Ops")
    for agent_id, team in (("ours", "default"), ("theirs", "ops")):
        registry.create_agent(
            id=agent_id, display_name=agent_id, team=team, runtime="command", settings={}
        )
    page = operator.get("/admin/clawboo/team/default/change/")
    offered = [a.pk for a in page.context["adminform"].form.fields["reviewer_agent"].queryset]
    assert offered == ["ours"]
    added = operator.get("/admin/clawboo/team/add/")
    assert list(added.context["adminform"].form.fields["reviewer_agent"].queryset) == []


def test_the_tool_approvals_list_shows_what_each_call_would_run(operator):
    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="codex")
    task = store.create_task(id="logs", title="Rotate logs").task
    store.ask_tool_call(task.id, "bot", "Bash", {"command": "rm -rf /var/log/old", "token": "s3"})
    page = operator.get("/admin/board/toolapproval/").content.decode()
    assert "rm -rf /var/log/old" in page
    assert "s3" not in page.split("<tbody>")[1]  # masked when it was asked
    assert 'href="/admin/board/task/logs/change/"' in page
    assert 'href="/admin/clawboo/agent/bot/change/"' in page


def test_agents_are_found_by_their_owners_name(operator):
    carol = get_user_model().objects.create_user("carol", password="x")
    registry.create_agent(id="c1", display_name="One", team="default", runtime="codex", owner=carol)
    registry.create_agent(id="x1", display_name="Other", team="default", runtime="codex")
    found = operator.get("/admin/clawboo/agent/?q=carol").context["cl"].result_list
    assert [a.pk for a in found] == ["c1"]


def test_the_event_log_says_who_moved_a_task_and_shows_the_payload_indented(operator):
    task = store.create_task(id="moved", title="Moved", status="backlog").task
    store.transition(task.id, "todo", actor="carol")
    event = Event.objects.filter(task_id="moved").order_by("-seq").first()
    listed = operator.get("/admin/clawboo/event/?task_id=moved").content.decode()
    assert '<td class="field-actor">carol</td>' in listed
    page = operator.get(f"/admin/clawboo/event/{event.pk}/change/").content.decode()
    assert "\n  &quot;actor&quot;: &quot;carol&quot;,\n" in page


def test_the_teams_list_counts_each_teams_agents_and_members(operator):
    registry.create_team("ops", "Ops")
    for n in range(3):
        registry.create_agent(id=f"o{n}", display_name=f"O{n}", team="ops", runtime="codex")
    people = [get_user_model().objects.create_user(f"p{n}", password="x") for n in range(2)]
    registry.update_team("ops", members=people)
    page = operator.get("/admin/clawboo/team/")
    rows = {t.pk: (t.agent_count, t.member_total) for t in page.context["cl"].result_list}
    assert rows["ops"] == (3, 2)
    text = page.content.decode()
    assert 'href="/admin/clawboo/agent/?team__id__exact=ops">3</a>' in text
    listed = operator.get("/admin/clawboo/agent/?team__id__exact=ops").context["cl"].result_list
    assert sorted(a.pk for a in listed) == ["o0", "o1", "o2"]


def test_a_tasks_runs_table_reads_no_runs_log(operator):

    registry.create_agent(id="bot", display_name="Bot", team="default", runtime="command")
    task = store.create_task(id="long", title="Long").task
    run = store.open_execution(task.id, store.claim(task.id, "bot").ticket)
    store.close_execution(run.id, "failed", error="boom", log="x" * 60_000)
    with CaptureQueriesContext(connection) as seen:
        page = operator.get("/admin/board/task/long/change/")
    assert page.status_code == 200 and "boom" in page.content.decode()
    runs = [q["sql"] for q in seen.captured_queries if 'FROM "execution_processes"' in q["sql"]]
    reading_logs = [sql for sql in runs if '"execution_processes"."log"' in sql]
    # The review panel reads each run's log for its tail; the runs table reads none.
    assert len(runs) == 2 and len(reading_logs) == 1, runs


def test_the_comments_list_shows_what_was_said(operator):
    task = store.create_task(title="t").task
    store.add_comment(task.id, "the staging database is read-only until noon", "carol")
    page = operator.get("/admin/board/taskcomment/").content.decode()
    assert "the staging database is read-only until noon" in page


def test_a_tasks_page_can_be_saved_from_its_top(operator):
    task = store.create_task(title="t").task
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert page.count('name="_continue"') == 2


def test_a_teams_page_links_its_agents_tasks_and_events_and_a_tasks_page_its_assignee(
    operator,
):
    """The chain an operator walks: team → its agents, tasks and events; task → the
    agent holding it (its page showed the agent's id as plain text)."""
    registry.create_team("blue", "Blue")
    registry.create_agent(id="ada", display_name="Ada", team="blue", runtime="codex")
    task = store.create_task(id="mine", title="Mine", team="blue").task
    store.create_task(id="other", title="Other")
    store.claim(task.id, "ada")
    page = operator.get("/admin/clawboo/team/blue/change/").content.decode()
    links = dict(
        (label, html.unescape(href))
        for href, label in re.findall(r'<a href="([^"]+)">(agents|tasks|events)</a>', page)
    )
    assert set(links) == {"agents", "tasks", "events"}
    listed = {label: operator.get(url) for label, url in links.items()}
    assert {a.pk for a in listed["agents"].context["cl"].result_list} == {"ada"}
    assert {t.pk for t in listed["tasks"].context["cl"].result_list} == {"mine"}
    assert {e.team_id for e in listed["events"].context["cl"].result_list} == {"blue"}
    task_page = operator.get("/admin/board/task/mine/change/").content.decode()
    assert 'href="/admin/clawboo/agent/ada/change/"' in task_page


def test_a_teams_page_says_what_each_governance_field_does(operator):
    """Approval required, the reviewer and the team limit: the page named them only."""
    form = operator.get("/admin/clawboo/team/default/change/").context["adminform"].form
    helps = {name: form.fields[name].help_text for name in TEAM_FIELDS}
    assert all(helps.values()), helps
    assert "no team limit" in helps["max_concurrent"]


TEAM_FIELDS = ("approval_required", "reviewer_agent", "max_concurrent")


def test_a_tasks_route_runtime_is_picked_from_the_runtimes_and_each_route_field_says_what_it_does(
    operator,
):
    """The runtime was a free text box (a typo was refused only on save) and the
    agent and runtime boxes said nothing of what they do."""
    task = store.create_task(id="r", title="r", route={"runtime": "codex"}).task
    form = operator.get(f"/admin/board/task/{task.id}/change/").context["adminform"].form
    runtimes = [value for value, _ in form.fields["route_runtime"].choices]
    assert runtimes[0] == "" and "codex" in runtimes and "command" in runtimes
    assert form["route_runtime"].value() == "codex"
    assert all(form.fields[f].help_text for f in ("route_agent_id", "route_runtime"))


def test_a_tasks_runs_table_shows_each_runs_commits_short(operator):
    """Two whole SHAs a row pushed the task page past a 1440 px screen."""
    registry.create_agent(id="ada", display_name="Ada", team="default", runtime="codex")
    task = store.create_task(id="t", title="t").task
    claimed = store.claim(task.id, "ada")
    run = store.open_execution(task.id, claimed.ticket)
    before, after = "a" * 40, "b" * 40
    store.close_execution(run.id, "succeeded", git_before=before, git_after=after)
    page = operator.get(f"/admin/board/task/{task.id}/change/").content.decode()
    assert f"{'a' * 10} → {'b' * 10}" in page and before not in page


def test_the_team_pages_member_picker_names_a_hosts_machine_user_as_its_host(operator):
    # A machine token's user is a member of its agents' teams: the picker listed it as
    # "machine-<16 hex digits>", which no person can tell apart or place.
    from core import machines

    registry.create_agent(id="builder", display_name="Builder", team="default", runtime="codex")
    token, _ = machines.mint("laptop-1", ["builder"])
    for path in ("/admin/clawboo/team/default/change/", "/admin/clawboo/team/add/"):
        field = operator.get(path).context["adminform"].form.fields["members"]
        labels = {user.pk: field.label_from_instance(user) for user in field.queryset}
        assert labels[token.user.pk] == "laptop-1 (host)", labels
        assert labels[get_user_model().objects.get(username="op").pk] == "op"


FORGED_ID = "9" * 20  # past any integer column either backend holds


@pytest.mark.parametrize("forged", [FORGED_ID, "-" + FORGED_ID])
def test_a_forged_id_past_the_column_in_a_many_to_many_box_is_a_form_error(operator, forged):
    """A team's members or a person's groups naming a twenty-digit id answered 500 on
    SQLite (its driver cannot bind it) and a form error on PostgreSQL."""
    registry.create_team("t")
    op = get_user_model().objects.get(username="op")
    sent = {
        "team members": (
            "/admin/clawboo/team/t/change/",
            {"name": "renamed", "members": [op.pk, forged]},
            "members",
        ),
        "user groups": (
            f"/admin/auth/user/{op.pk}/change/",
            change_form(op, is_staff="on", is_superuser="on", groups=[forged], first_name="x"),
            "groups",
        ),
        "group permissions": (
            "/admin/auth/group/add/",
            {"name": "g", "permissions": [forged]},
            "permissions",
        ),
    }
    for what, (url, data, field) in sent.items():
        answer = operator.post(url, data)
        assert answer.status_code == 200, what
        errors = answer.context["adminform"].form.errors
        assert list(errors) == [field], (what, errors)
    assert registry.get_team("t").name == "t" and not registry.get_team("t").members.exists()
    op.refresh_from_db()
    assert op.first_name == "" and not op.groups.exists()
    from django.contrib.auth.models import Group

    assert not Group.objects.exists()


def test_a_many_to_many_box_of_text_ids_takes_them_whatever_the_backends_integer_ranges(
    db, monkeypatch
):
    """A machine token's agents (text ids) are no integer column: asking the backend
    for that column's integer range raised KeyError on PostgreSQL (500 on the token's
    add page). Django's base range lookup, which PostgreSQL's is, stands in here so
    the SQLite pass holds it too."""
    from django.db import connection
    from django.db.backends.base.operations import BaseDatabaseOperations

    from core.admin_forms import StoredIdsField
    from core.models import Agent

    monkeypatch.setattr(
        connection.ops,
        "integer_field_range",
        lambda kind: BaseDatabaseOperations.integer_field_range(connection.ops, kind),
    )
    registry.create_agent(id="ada", display_name="Ada", team="default", runtime="codex")
    field = StoredIdsField(queryset=Agent.objects.all())
    assert [a.pk for a in field.clean(["ada"])] == ["ada"]
