"""A notification channel's signing secret and webhook URL (a chat's incoming-webhook
URL is its credential) are write-only in the admin, like a forge's token: no page
shows them -- the change form, the view-only page -- and no filter or search of the
admin reaches them, so neither can be spelled out one character at a time."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from ops import notify
from ops.models import NotificationChannel

pytestmark = pytest.mark.django_db

TOKEN = "T0SECRET/B0SECRET/xoxwebhooktoken42"
URL = f"https://hooks.chat.example/services/{TOKEN}"
SECRET = "s" * 40 + "signingkey"


@pytest.fixture
def channel() -> NotificationChannel:
    return notify.create_channel("default", "hook", "webhook", url=URL, secret=SECRET)


def sign_in(client, *codenames: str, superuser: bool = False):
    if superuser:
        user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    else:
        user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return user


def shows_a_secret(page) -> bool:
    text = page.content.decode()
    return TOKEN in text or SECRET in text or "xoxwebhook" in text


@pytest.mark.parametrize("who", ["superuser", "viewer"])
def test_no_page_of_a_channel_shows_its_url_or_secret(client, channel, who):
    if who == "superuser":
        sign_in(client, superuser=True)
    else:
        sign_in(client, "view_notificationchannel", "view_notificationdelivery")
    for page in (
        "/admin/ops/notificationchannel/",
        f"/admin/ops/notificationchannel/{channel.pk}/change/",
    ):
        shown = client.get(page)
        assert shown.status_code == 200, page
        assert not shows_a_secret(shown), page
    # Where it goes is still said.
    detail = client.get(f"/admin/ops/notificationchannel/{channel.pk}/change/")
    assert "https://hooks.chat.example/" in detail.content.decode()


def test_leaving_them_blank_keeps_them_and_typing_replaces_them(client, channel):
    sign_in(client, superuser=True)
    form = {
        "team": "default",
        "name": "renamed",
        "kind": "webhook",
        "url": "",
        "secret": "",
        "recipients": "",
        "reasons": ["review"],
        "enabled": "on",
    }
    kept = client.post(f"/admin/ops/notificationchannel/{channel.pk}/change/", form)
    assert kept.status_code == 302, kept.content[:2000]
    channel.refresh_from_db()
    assert (channel.name, channel.url, channel.secret) == ("renamed", URL, SECRET)
    replaced = client.post(
        f"/admin/ops/notificationchannel/{channel.pk}/change/",
        {**form, "url": "https://other.example/hook", "secret": "n" * 32},
    )
    assert replaced.status_code == 302
    channel.refresh_from_db()
    assert (channel.url, channel.secret) == ("https://other.example/hook", "n" * 32)


@pytest.mark.parametrize(
    "page",
    [
        "/admin/ops/notificationchannel/?secret__startswith={}",
        "/admin/ops/notificationchannel/?url__startswith={}",
        "/admin/ops/notificationchannel/?url__contains={}",
        "/admin/ops/notificationdelivery/?channel__secret__startswith={}",
        "/admin/ops/notificationdelivery/?channel__url__startswith={}",
    ],
)
def test_no_admin_filter_answers_whether_they_start_so(client, channel, page):
    sign_in(client, "view_notificationchannel", "view_notificationdelivery")
    right = client.get(page.format(SECRET[:3] if "secret" in page else URL[:30]))
    wrong = client.get(page.format("zzz"))
    assert right.status_code == wrong.status_code == 400


def test_the_search_does_not_read_the_url(client, channel):
    sign_in(client, superuser=True)
    found = client.get("/admin/ops/notificationchannel/", {"q": "xoxwebhooktoken"})
    assert found.status_code == 200
    assert found.context["cl"].result_count == 0


def test_a_secret_made_for_a_new_channel_is_shown_once(client):
    sign_in(client, superuser=True)
    added = client.post(
        "/admin/ops/notificationchannel/add/",
        {
            "team": "default",
            "name": "hook",
            "kind": "webhook",
            "url": URL,
            "secret": "",
            "recipients": "",
            "reasons": ["review"],
            "enabled": "on",
        },
        follow=True,
    )
    made = NotificationChannel.objects.get()
    assert len(made.secret) >= 32
    said = [str(m) for m in added.context["messages"]]
    assert any(made.secret in m and "shown once" in m for m in said)
    assert (
        made.secret
        not in client.get(f"/admin/ops/notificationchannel/{made.pk}/change/").content.decode()
    )
