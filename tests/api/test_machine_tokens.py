from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from board import store
from core import machines, registry
from core.models import MachineToken

pytestmark = pytest.mark.django_db


def token_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def fleet(db):
    """Agents a, b on default (owned by nobody), and red-bot on another team."""
    for agent_id in ("a-bot", "b-bot"):
        registry.create_agent(id=agent_id, display_name=agent_id, team="default", runtime="human")
    registry.create_team("red", "Red")
    registry.create_agent(id="red-bot", display_name="R", team="red", runtime="human")


def mint(capsys, *argv: str) -> str:
    call_command("create_machine_token", *argv)
    return capsys.readouterr().out.strip()


def test_a_machine_token_is_stored_hashed_and_acts_as_its_agents(fleet, capsys):
    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot")
    token = MachineToken.objects.get(host="gpu-1")
    assert token.key_hash == machines.key_hash(key) and key not in token.key_hash
    assert not MachineToken.objects.filter(key_hash=key).exists()
    client = token_client(key)
    task = store.create_task(title="t").task
    claimed = client.post("/api/board/claim-next", {"agent_id": "a-bot"}, format="json")
    assert claimed.status_code == 200, claimed.json()
    assert claimed.json()["task"]["id"] == task.id
    ticket = claimed.json()["ticket"]
    beat = client.post(f"/api/board/tasks/{task.id}/heartbeat", {"ticket": ticket}, format="json")
    assert beat.status_code == 200
    done = client.post(f"/api/board/tasks/{task.id}/complete", {"ticket": ticket}, format="json")
    assert done.status_code == 200


def test_binding_an_agent_to_a_host_drops_the_servers_health_verdict_on_it(fleet, capsys):
    # Probed on the server ("no such file" there), then given to a host: the server's
    # workers stop probing it, so its verdict stuck, and the host's worker was told
    # "agent 'a-bot' is unhealthy: no such file" about a file on another machine.
    registry.record_health("a-bot", False, "no such file: /opt/tool")
    registry.record_health("b-bot", False, "no such file: /opt/tool")
    client = token_client(mint(capsys, "--host", "gpu-1", "--agent", "a-bot"))
    task = store.create_task(title="t").task
    claimed = client.post("/api/board/claim-next", {"agent_id": "a-bot"}, format="json")
    assert claimed.status_code == 200, claimed.json()
    assert claimed.json()["task"]["id"] == task.id
    assert registry.get_agent("a-bot").dispatch_state == "active"
    assert registry.get_agent("b-bot").dispatch_state == "unhealthy"  # still the server's


def test_a_machine_token_cannot_claim_or_settle_for_an_agent_it_is_not_bound_to(fleet, capsys):
    client = token_client(mint(capsys, "--host", "gpu-1", "--agent", "a-bot"))
    task = store.create_task(title="t").task
    for path in (f"/api/board/tasks/{task.id}/claim", "/api/board/claim-next"):
        refused = client.post(path, {"agent_id": "b-bot"}, format="json")
        assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert store.get_task(task.id).status == "todo"
    ticket = store.claim(task.id, "b-bot").ticket
    for verb, body in (
        ("heartbeat", {"ticket": ticket}),
        ("complete", {"ticket": ticket}),
        ("fail", {"error": "x", "ticket": ticket}),
    ):
        answer = client.post(f"/api/board/tasks/{task.id}/{verb}", body, format="json")
        assert answer.status_code == 403, (verb, answer.json())
    assert store.get_task(task.id).status == "in_progress"


def test_a_machine_token_cannot_read_another_teams_tasks(fleet, capsys):
    client = token_client(mint(capsys, "--host", "gpu-1", "--agent", "a-bot"))
    hidden = store.create_task(title="secret", team="red").task
    assert client.get(f"/api/board/tasks/{hidden.id}").status_code == 404
    listed = client.get("/api/board/tasks", {"team": "red"})
    assert hidden.id not in str(listed.content)
    refused = client.post("/api/board/claim-next", {"agent_id": "red-bot"}, format="json")
    assert refused.status_code == 400  # an agent of a team it cannot see: as unknown


def test_a_revoked_machine_token_authenticates_no_more(fleet, capsys):
    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot", "--agent", "b-bot")
    token = MachineToken.objects.get(host="gpu-1")
    client = token_client(key)
    assert client.get("/api/whoami").status_code == 200
    call_command("create_machine_token", "--revoke", str(token.pk))
    assert client.get("/api/whoami").status_code == 401
    with pytest.raises(CommandError):
        call_command("create_machine_token", "--revoke", str(token.pk))


def test_minting_for_an_unknown_agent_is_refused(fleet):
    with pytest.raises(CommandError, match="no agent 'ghost'"):
        call_command("create_machine_token", "--host", "h", "--agent", "ghost")
    assert not MachineToken.objects.exists()


def test_staff_mint_and_revoke_machine_tokens_in_the_admin(fleet, admin_client):
    added = admin_client.post(
        "/admin/clawboo/machinetoken/add/", {"host": "vm-7", "agents": ["a-bot"]}, follow=True
    )
    token = MachineToken.objects.get(host="vm-7")
    notes = [str(m) for m in added.context["messages"]]
    key = next(n.rsplit(" ", 1)[-1] for n in notes if "shown once" in n)
    assert machines.by_key(key) == token
    assert list(token.agents.values_list("id", flat=True)) == ["a-bot"]
    admin_client.post(
        "/admin/clawboo/machinetoken/",
        {"action": "revoke", "apply": "1", "_selected_action": [token.pk]},
    )
    assert machines.by_key(key) is None


def test_a_machine_token_beats_as_a_remote_worker_and_shows_in_healthz(
    fleet, capsys, client, settings
):
    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot")
    t1 = store.create_task(title="t1").task.id
    store.claim(t1, "a-bot", "human")
    beat = token_client(key).post(
        "/api/workers/beat", {"pid": 42, "agents": ["a-bot"], "running": [t1]}, format="json"
    )
    assert beat.status_code == 204
    # Hosts are for staff or the metrics token; anonymous callers see none (§6).
    assert "remote_workers" not in client.get("/healthz").json()
    settings.CLAWBOO_METRICS_TOKEN = "scrape-me"
    workers = client.get("/healthz", HTTP_AUTHORIZATION="Bearer scrape-me").json()
    assert [(w["host"], w["agents"], w["running"]) for w in workers["remote_workers"]] == [
        ("gpu-1", ["a-bot"], [t1])
    ]


def test_a_machine_tokens_beat_names_its_own_agents_only(fleet, capsys):
    # What a host says it runs is shown to staff: another host's agent (b-bot, of
    # no token here) is not its to claim; nothing is written.
    from core.models import Heartbeat

    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot")
    beat = token_client(key).post(
        "/api/workers/beat", {"pid": 42, "agents": ["a-bot", "b-bot"]}, format="json"
    )
    assert beat.status_code == 403, beat.json()
    assert (beat.json()["error"], beat.json()["field"]) == ("forbidden", "agents")
    assert not Heartbeat.objects.filter(part="remote-worker").exists()


def test_a_beat_shows_only_the_running_tasks_its_own_agents_hold(fleet, capsys):
    """What a host says it runs is shown to staff (/healthz, the admin's beats): a task
    another agent holds -- of its team, of another team, or one it no longer holds --
    is dropped from the beat, not shown as this host's; the beat itself stands."""
    from core.models import Heartbeat

    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot")
    done = store.create_task(title="done").task.id
    store.complete(done, ticket=store.claim(done, "a-bot", "human").ticket)
    ids = {}
    for name, agent, team in (
        ("mine", "a-bot", "default"),
        ("same team", "b-bot", "default"),
        ("other team", "red-bot", "red"),
        ("unheld", None, "default"),
    ):
        ids[name] = store.create_task(title=name, team=team).task.id
        if agent is not None:
            store.claim(ids[name], agent, "human")
    running = [*ids.values(), done, "no-such-task", ids["mine"]]
    beat = token_client(key).post(
        "/api/workers/beat", {"pid": 42, "agents": ["a-bot"], "running": running}, format="json"
    )
    assert beat.status_code == 204
    row = Heartbeat.objects.get(part="remote-worker")
    assert row.detail == {"agents": ["a-bot"], "running": [ids["mine"]]}


def test_only_a_machine_token_beats_as_a_remote_worker(api):
    refused = api.post("/api/workers/beat", {"pid": 1}, format="json")
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"


def test_a_machine_token_reads_the_settings_of_its_agents_only(fleet, capsys):
    registry.update_agent("a-bot", {"settings": {"note": "x"}})
    registry.update_agent("b-bot", {"settings": {"note": "y"}})
    client = token_client(mint(capsys, "--host", "gpu-1", "--agent", "a-bot"))
    assert client.get("/api/agents/a-bot").json()["settings"] == {"note": "x"}
    assert "settings" not in client.get("/api/agents/b-bot").json()


def test_an_agent_says_which_remote_host_runs_it_and_whether_its_worker_is_there(
    fleet, capsys, api, settings, django_assert_max_num_queries
):
    def runs_on(agent_id: str):
        listed = {a["id"]: a["runs_on"] for a in api.get("/api/agents?team=default").json()}
        one = api.get(f"/api/agents/{agent_id}").json()["runs_on"]
        assert listed[agent_id] == one
        return one

    # Not bound to a host: the server's own workers run it.
    assert runs_on("a-bot") is None
    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot")
    # Bound, but no worker has connected with the token: nothing runs its work.
    assert runs_on("a-bot") == {"host": "gpu-1", "seen_at": None, "live": False}
    assert runs_on("b-bot") is None
    beat = token_client(key).post("/api/workers/beat", {"pid": 7}, format="json")
    assert beat.status_code == 204
    seen = runs_on("a-bot")
    assert seen["host"] == "gpu-1" and seen["live"] is True and seen["seen_at"]
    # Its beat grows old: the host is named, not live.
    settings.CLAWBOO_HEALTH_BEAT_STALE_MS = 0
    assert runs_on("a-bot") == {**seen, "live": False}
    # The list reads every agent's host in a fixed number of queries.
    for n in range(8):
        registry.create_agent(id=f"bot-{n}", display_name="b", team="default", runtime="human")
    mint(capsys, "--host", "gpu-2", *[f"--agent=bot-{n}" for n in range(8)])
    with django_assert_max_num_queries(8):
        listed = api.get("/api/agents?team=default").json()
    assert {a["runs_on"]["host"] for a in listed if a["id"].startswith("bot-")} == {"gpu-2"}
    # Revoked: the server's workers run it again.
    machines.revoke(MachineToken.objects.get(host="gpu-1").pk)
    assert runs_on("a-bot") is None


def test_the_admin_says_where_an_agent_runs(fleet, capsys, admin_client):
    def said(agent_id: str) -> str:
        page = admin_client.get(f"/admin/clawboo/agent/{agent_id}/change/").content.decode()
        assert page.count("Runs on") == 1, page[:300]
        return page

    assert "the server&#x27;s workers" in said("b-bot")
    key = mint(capsys, "--host", "gpu-1", "--agent", "a-bot")
    assert "host gpu-1: no worker has connected, so nothing runs its work" in said("a-bot")
    token_client(key).post("/api/workers/beat", {"pid": 7}, format="json")
    assert "host gpu-1 (its worker beat " in said("a-bot")


def test_revoking_in_the_admin_says_which_tokens_it_revoked(fleet, admin_client):
    live, _ = machines.mint("vm-1", ["a-bot"])
    gone, _ = machines.mint("vm-2", ["a-bot"])
    machines.revoke(gone.pk)
    answer = admin_client.post(
        "/admin/clawboo/machinetoken/",
        {"action": "revoke", "apply": "1", "_selected_action": [live.pk, gone.pk]},
        follow=True,
    )
    said = [str(m) for m in answer.context["messages"]]
    assert said == [f"Revoked 1 machine token(s): {live}; revoked already: {gone}"]
