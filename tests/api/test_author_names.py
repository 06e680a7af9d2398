"""GOVERNANCE §6: people and agents sign with one namespace of names. A comment, a
chat line and the narration name their author by a bare name -- a username, an
agent's id, or the server's own (``clawboo``, ``forge``) -- and the board, the
@-mentions and the notifications read it as one author. A member could register an
agent as another member's username (or as ``clawboo``): its key's comments then
read as that person's (or the server's narration). A new agent's id may now be no
username and no server name (409, nothing written), and a new username no agent's
id (the user model's validation: the admin's form, ``createsuperuser``)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from board import store
from core import machines, registry
from core.models import Agent
from tests.api.conftest import key_client, make_client
from tests.api.test_comment_after_approval import comment_over_mcp

pytestmark = pytest.mark.django_db


def agent_body(agent_id: str) -> dict[str, str]:
    return {"id": agent_id, "display_name": "x", "team": "default", "runtime": "human"}


@pytest.mark.parametrize("name", ["bob", "Bob", "clawboo", "forge"])
def test_an_agent_may_not_take_a_persons_or_the_servers_name(api, name):
    make_client("bob")
    before = list(Agent.objects.values_list("pk", flat=True))

    answer = api.post("/api/agents", agent_body(name), format="json")

    assert answer.status_code == 409, answer.json()
    assert answer.json()["error"] == "conflict" and answer.json()["field"] == "id"
    assert list(Agent.objects.values_list("pk", flat=True)) == before


def test_a_new_username_may_not_be_an_agents_id(api):
    registry.create_agent(id="helper", display_name="h", team="default", runtime="human")
    user = get_user_model()(username="Helper")
    with pytest.raises(ValidationError) as refused:
        user.full_clean()
    assert "agent 'helper'" in str(refused.value)
    with pytest.raises(ValidationError):
        get_user_model()(username="clawboo").full_clean()


def test_the_admins_add_user_form_refuses_an_agents_id(api, client):
    registry.create_agent(id="helper", display_name="h", team="default", runtime="human")
    root = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(root)
    users = get_user_model().objects.count()

    page = client.post(
        "/admin/auth/user/add/",
        {"username": "helper", "password1": "a-long-pass-1", "password2": "a-long-pass-1"},
    )

    assert page.status_code == 200  # the form again, with the error
    assert "is the id of agent" in page.content.decode()
    assert get_user_model().objects.count() == users


def test_other_names_still_register(api):
    make_client("bob")
    made = api.post("/api/agents", agent_body("bob-bot"), format="json")
    assert made.status_code == 201, made.json()


@pytest.mark.django_db(transaction=True)
def test_a_machine_signs_its_comments_alike_over_mcp_and_rest():
    """A machine token's MCP comments were signed with its host's name, an
    operator's free text: a host called ``bob`` signed as the person bob."""
    bob = make_client("bob")
    registry.create_agent(id="a", display_name="a", team="default", runtime="human")
    task = store.create_task(title="t").task
    store.claim(task.id, "a", "human")
    token, key = machines.mint("bob", ["a"])

    over_rest = key_client(key).post(f"/api/board/tasks/{task.id}/comments", {"body": "rest"})
    assert over_rest.status_code == 201, over_rest.json()
    over_mcp = comment_over_mcp(key, task.id, "mcp")

    assert over_mcp["author"] == over_rest.json()["author"] == token.user.get_username()
    assert over_mcp["author"] != bob.user.get_username()


def test_a_person_named_before_the_rule_is_still_saved(api):
    """A pair made before the rule stays (docs/governance.md: rename one): staff can
    still change that person, to deactivate them say."""
    registry.create_agent(id="helper", display_name="h", team="default", runtime="human")
    old = get_user_model().objects.create_user("helper")
    old.full_clean()  # their own name, unchanged
    with pytest.raises(ValidationError):
        get_user_model()(username="HELPER").full_clean()
