"""The Heartbeats list says which beats are stale, by /healthz's own rule."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model

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
