"""The admin as the Clawboo console: its name, and every model named in good English."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model

OUR_APPS = {"clawboo", "board", "worktrees", "boardmcp", "executor", "routines", "ops"}


@pytest.fixture
def operator(client, db):
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def test_the_admin_is_branded_clawboo(operator):
    site = admin.site
    assert (site.site_header, site.site_title, site.index_title) == (
        "Clawboo console",
        "Clawboo console",
        "Operator console",
    )
    index = operator.get("/admin/").content.decode()
    assert "<title>Operator console | Clawboo console</title>" in index
    assert 'id="site-name"><a href="/admin/">Clawboo console</a>' in index
    assert 'href="/board/">View site</a>' in index


def _bad_plural(name: str) -> bool:
    # What Django's "add an s" makes of words that take "es" or "ies".
    return bool(re.search(r"(ss|xs|chs|shs|[^aeiou]ys)$", name))


def test_no_model_has_a_misspelt_plural():
    bad = [
        f"{m._meta.app_label}.{m.__name__}: {m._meta.verbose_name_plural}"
        for m in apps.get_models()
        if _bad_plural(str(m._meta.verbose_name_plural))
    ]
    assert bad == []


@pytest.mark.parametrize(
    ("label", "model", "plural"),
    [
        ("board", "ExecutionProcess", "execution processes"),
        ("board", "TaskDep", "task dependencies"),
        ("ops", "NotificationDelivery", "notification deliveries"),
        ("routines", "RoutineFire", "routine fires"),
    ],
)
def test_the_plurals_that_needed_fixing(label, model, plural):
    assert apps.get_model(label, model)._meta.verbose_name_plural == plural


def test_the_admin_index_names_each_model_in_the_plural(operator):
    index = operator.get("/admin/").content.decode()
    assert "Execution processes" in index and "Notification deliveries" in index
    assert "processs" not in index and "deliverys" not in index
