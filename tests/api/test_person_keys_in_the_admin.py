"""A person's API key is theirs alone (GOVERNANCE §6: the governed never hold the
keys). The REST framework's own admin page for keys listed every person's key in
plain text -- a superuser's too -- to any staff person allowed to view it, let its
change form hand a key to another user, and answered a filter on the key (on the
keys' page, and through the users' page), so even a hidden key could be read one
character at a time. A key in the admin now shows as its first characters only,
is never made or moved there, and no filter of the admin reaches it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


@pytest.fixture
def root_key() -> str:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    return Token.objects.create(user=root).key


def staff(client, *codenames: str):
    """A staff person granted only these model permissions, signed in."""
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def test_a_staff_viewer_never_reads_another_persons_key_in_the_admin(client, root_key):
    staff(client, "view_tokenproxy", "view_user")
    listed = client.get("/admin/authtoken/tokenproxy/")
    assert listed.status_code == 200
    assert b"root" in listed.content  # the row is there: whose key, and when
    assert root_key.encode() not in listed.content
    root = get_user_model().objects.get(username="root")
    shown = client.get(f"/admin/authtoken/tokenproxy/{root.pk}/change/")
    assert shown.status_code == 200 and root_key.encode() not in shown.content


@pytest.mark.parametrize(
    "page",
    [
        "/admin/authtoken/tokenproxy/?key__startswith={}",
        "/admin/authtoken/tokenproxy/?pk__startswith={}",
        "/admin/auth/user/?auth_token__key__startswith={}",
        "/admin/auth/user/?auth_token__pk__startswith={}",
        "/admin/auth/user/?auth_token__key__gt={}",
    ],
)
def test_no_admin_filter_answers_whether_a_key_starts_so(client, root_key, page):
    """A filter that keeps the row for the right first characters and drops it for
    wrong ones would spell the key out one character at a time."""
    staff(client, "view_tokenproxy", "view_user")
    right = client.get(page.format(root_key[:2]))
    wrong = client.get(page.format("zz" if not root_key.startswith("zz") else "yy"))
    # Refused (Django answers a disallowed lookup with a 400), never an oracle.
    assert right.status_code == wrong.status_code == 400, (right.status_code, wrong.status_code)


def test_the_admin_never_hands_a_key_to_another_user(client, root_key):
    """The key the staff person knows (their own) moved to the superuser would be
    the superuser's key in their hands."""
    me = staff(client, "view_tokenproxy", "change_tokenproxy", "add_tokenproxy")
    mine = Token.objects.create(user=me).key
    bob = get_user_model().objects.create_user("bob", password="pw")
    moved = client.post(f"/admin/authtoken/tokenproxy/{me.pk}/change/", {"user": bob.pk})
    assert moved.status_code == 403
    assert Token.objects.get(key=mine).user == me
    # Nor mints one for another person: a person's key comes from their own password
    # (POST /api/auth/token) or the server's own command.
    made = client.post("/admin/authtoken/tokenproxy/add/", {"user": bob.pk})
    assert made.status_code == 403
    assert not Token.objects.filter(user=bob).exists()


def test_a_staff_person_with_the_delete_permission_still_revokes_a_key(client, root_key):
    staff(client, "view_tokenproxy", "delete_tokenproxy")
    root = get_user_model().objects.get(username="root")
    gone = client.post(f"/admin/authtoken/tokenproxy/{root.pk}/delete/", {"post": "yes"})
    assert gone.status_code == 302
    assert not Token.objects.filter(key=root_key).exists()


def test_no_registered_admin_filters_through_a_key_or_a_secret():
    """Every admin page, on a stored key or write-only secret or one relation away
    from it (a user's keys, an agent's keys and settings, a forge's token, a key's
    own page): the filter is refused. An admin added later for a model that holds or
    relates to one fails here until it keeps them hidden."""
    from django.contrib import admin

    from core.admin_forms import key_models, secret_fields

    keys = {m._meta.concrete_model for m in key_models()}
    secrets = {(m._meta.concrete_model, name) for m, name, _ in secret_fields()}
    reached = []
    for model, model_admin in admin.site._registry.items():
        concrete = model._meta.concrete_model
        paths = ["key__startswith", "pk__gt"] if concrete in keys else []
        paths += [f"{name}__startswith" for m, name in secrets if m is concrete]
        paths += [f"{name}__api_key__startswith" for m, name in secrets if m is concrete]
        for field in model._meta.get_fields():
            related = getattr(field, "related_model", None)
            if not field.is_relation or related is None or related == "self":
                continue
            if related._meta.concrete_model in keys:
                paths += [f"{field.name}__pk__startswith", f"{field.name}__gt"]
                paths += [f"{field.name}__key__startswith"]
        for path in paths:
            reached.append(path)
            assert not model_admin.lookup_allowed(path, "ab", None), (model, path)
    for path in (
        "auth_token__key__startswith",
        "settings__api_key__startswith",
        "token__startswith",
    ):
        assert path in reached


def test_no_admin_filter_reads_an_agents_secret_or_a_forges_token(client):
    """Agent secrets and a forge's token are write-only (the admin masks them): a
    filter on them answered whether they start so."""
    from core import registry

    boss = get_user_model().objects.create_superuser("boss", "b@example.com", "pw")
    registry.create_agent(
        id="bot",
        display_name="Bot",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "api_key": "sk-live-123"},
        owner=boss,
    )
    staff(client, "view_agent", "view_forge")
    right = client.get("/admin/clawboo/agent/?settings__api_key__startswith=sk-")
    wrong = client.get("/admin/clawboo/agent/?settings__api_key__startswith=zz")
    assert right.status_code == wrong.status_code == 400
    for page in (
        "/admin/clawboo/forge/?token__startswith=gh",
        "/admin/clawboo/forge/?webhook_secret__startswith=a",
    ):
        assert client.get(page).status_code == 400, page


def test_a_staff_viewer_reads_no_agent_secret_nor_forge_token_on_their_pages(client, tmp_path):
    """Granted *view* only, a staff person met the agent's and the forge's pages read
    only: Django showed each read-only field's stored value as it is, where the form
    a changer sees masks it."""
    from core import registry
    from core.models import Forge, Repository

    boss = get_user_model().objects.create_superuser("boss", "b@example.com", "pw")
    registry.create_agent(
        id="bot",
        display_name="Bot",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "env": {"OPENAI_API_KEY": "sk-live-123"}},
        owner=boss,
    )
    repo = Repository.objects.create(id="r1", team_id="default", path=str(tmp_path))
    forge = Forge.objects.create(
        repository=repo,
        kind="github",
        api_url="https://api.github.com",
        repo="o/n",
        token="ghp_SECRET",
        webhook_secret="HOOKSECRET",
    )
    staff(client, "view_agent", "view_forge")
    agent_page = client.get("/admin/clawboo/agent/bot/change/")
    assert agent_page.status_code == 200
    assert b"sk-live-123" not in agent_page.content
    assert b"OPENAI_API_KEY" in agent_page.content and b"********" in agent_page.content
    forge_page = client.get(f"/admin/clawboo/forge/{forge.pk}/change/")
    assert forge_page.status_code == 200
    assert b"ghp_SECRET" not in forge_page.content and b"HOOKSECRET" not in forge_page.content
    # Stored as they were: the mask is the page's, not the row's.
    assert Forge.objects.get(pk=forge.pk).token == "ghp_SECRET"
    from core.models import Agent

    assert Agent.objects.get(pk="bot").settings["env"]["OPENAI_API_KEY"] == "sk-live-123"
