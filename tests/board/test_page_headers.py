"""The board's pages share their header's words: moving between the board, the
routines page and the usage page, the same button read "log out" and "Log out"."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from core import registry

pytestmark = pytest.mark.django_db


def test_every_board_page_says_log_out_in_the_same_words(default_team, client):
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    client.force_login(user)
    for url in ("/board/", "/board/routines/", "/board/usage/"):
        html = client.get(url).content.decode()
        assert '<button type="submit" class="link">Log out</button>' in html, url
