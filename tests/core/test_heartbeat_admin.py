"""The Heartbeats list says which beats are stale, by /healthz's own rule."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core import beats
from ops import health

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=dt.UTC)


@pytest.fixture
def operator(client, settings):
    settings.CLAWBOO_HEALTH_BEAT_STALE_MS = 60_000
    settings.CLAWBOO_HEALTH_PARTS = ["ticker", "qcluster"]
    settings.TIME_ZONE = "UTC"
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw")
    client.force_login(user)
    return client


def parts_listed(client, query: str = "") -> list[str]:
    page = client.get(f"/admin/clawboo/heartbeat/{query}")
    assert page.status_code == 200
    return sorted(beat.part for beat in page.context["cl"].result_list)


def test_the_heartbeats_list_marks_stale_beats_and_filters_them(operator):
    with time_machine.travel(T0, tick=False):
        beats.beat("ticker")
        beats.beat("qcluster")
    # Two minutes on: the ticker's 60 s window has passed, the cluster's 3 min has not.
    with time_machine.travel(T0 + dt.timedelta(minutes=2), tick=False):
        text = operator.get("/admin/clawboo/heartbeat/").content.decode()
        assert "stale since 2026-03-02 09:01:00" in text
        assert text.count("stale since") == 1 and 'class="field-freshness">fresh<' in text
        assert parts_listed(operator, "?fresh=no") == ["ticker"]
        assert parts_listed(operator, "?fresh=yes") == ["qcluster"]
        assert parts_listed(operator) == ["qcluster", "ticker"]
        # /healthz says the same of the same rows.
        said = {part.name: part.ok for part in health.check_beats()}
        assert said == {"ticker": False, "qcluster": True}


def test_the_part_menu_offers_the_parts_that_beat_without_reading_the_beats(operator):
    """The menu read a DISTINCT over every process's row (one a process, kept a day
    after it dies) on each load; it offers the parts that beat, and still filters."""
    beats.beat("ticker")
    beats.beat("workers")
    with CaptureQueriesContext(connection) as seen:
        page = operator.get("/admin/clawboo/heartbeat/")
    assert not [q["sql"] for q in seen.captured_queries if "DISTINCT" in q["sql"]]
    [spec] = [s for s in page.context["cl"].filter_specs if s.title == "part"]
    offered = [c["display"] for c in spec.choices(page.context["cl"])][1:]
    assert offered == ["qcluster", "remote-worker", "ticker", "workers"]
    assert parts_listed(operator, "?part__exact=workers") == ["workers"]
