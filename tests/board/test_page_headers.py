"""The board's pages share their header's words: moving between the board, the
routines page and the usage page, the same button read "log out" and "Log out"."""

from __future__ import annotations

import re

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


def _header(html: str) -> str:
    """The page's header, its CSRF token (masked anew on every page) left out."""
    header = html[html.index('<header class="top">') : html.index("</header>")]
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", header)


def test_every_board_page_has_one_header_with_its_own_page_marked(default_team, client):
    # Routines and Usage had a header of their own (no logo, other links' look).
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    client.force_login(user)
    pages = {"Board": "/board/", "Routines": "/board/routines/", "Usage": "/board/usage/"}
    headers = {
        name: _header(client.get(url, {"team": "default"}).content.decode())
        for name, url in pages.items()
    }
    for name, header in headers.items():
        assert header.count('aria-current="page"') == 1, name
        assert f'aria-current="page">{name}</a>' in header, name
        assert '<img src="/static/board/favicon.svg"' in header, name
        assert 'id="who"' in header and ">Log out</button>" in header, name
    # Apart from the page marked and the board's own controls, the same markup.
    routines = headers["Routines"].replace(' aria-current="page"', "")
    assert headers["Usage"].replace(' aria-current="page"', "") == routines
    board = headers["Board"].replace(' aria-current="page"', "")
    assert board.startswith(routines[: routines.index("</nav>")])
    new_routine = _header(client.get("/board/routines/new/?team=default").content.decode())
    assert new_routine == headers["Routines"]
