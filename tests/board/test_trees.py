"""Trees and ceilings (issue 3): depth, live children (raced by 20 processes),
root-create rate, and the create-vs-dispatch asymmetry of seed 000."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.utils import timezone

from board import ceilings, store
from board.errors import DepthExceeded, RootRateLimited, TooManyChildren
from board.models import Task


@pytest.mark.django_db(transaction=True)
def test_twenty_processes_creating_children_under_a_cap_of_five_make_exactly_five(
    default_team, race
):
    parent = store.create_task(title="parent").task

    results = race(
        [
            ["create-child", parent.id, "--agent", f"w{i}", "--max-live-children", "5"]
            for i in range(20)
        ],
        # The cap is what is raced, not the write budget (see tests/core/test_storage.py).
        extra_env={"CLAWBOO_DB_WRITE_BUDGET_MS": "20000"},
    )

    assert sum(1 for r in results if r["ok"]) == 5
    assert {r["code"] for r in results if not r["ok"]} == {"too_many_children"}
    assert Task.objects.filter(parent_task_id=parent.id).count() == 5


@pytest.mark.django_db
def test_live_children_are_capped_and_settled_ones_do_not_count(default_team, monkeypatch):
    monkeypatch.setattr(ceilings, "MAX_LIVE_CHILDREN", 2)
    parent = store.create_task(title="p").task
    first = store.create_task(title="c1", parent_task_id=parent.id).task
    store.create_task(title="c2", parent_task_id=parent.id)
    with pytest.raises(TooManyChildren):
        store.create_task(title="c3", parent_task_id=parent.id)
    store.cancel(first.id)
    store.create_task(title="c3", parent_task_id=parent.id)


def test_the_default_ceilings_are_the_specs():
    assert (store.MAX_DEPTH, store.MAX_LIVE_CHILDREN, store.ROOT_RATE_LIMIT) == (2, 24, 30)


@pytest.mark.django_db
def test_create_is_refused_past_depth_two_but_a_task_at_the_ceiling_dispatches(default_team):
    root = store.create_task(title="root", id="root").task
    child = store.create_task(title="child", id="child", parent_task_id=root.id).task
    grandchild = store.create_task(title="gc", id="gc", parent_task_id=child.id).task
    assert store.ancestor_ids(grandchild.id) == ["child", "root"]
    assert store.depth_of(grandchild.id) == 2
    with pytest.raises(DepthExceeded):
        store.create_task(title="too deep", parent_task_id=grandchild.id)
    # Anything creatable is dispatchable: depth 2 == the ceiling still runs.
    store.check_dispatch_depth(grandchild.id, store.MAX_DEPTH)
    with pytest.raises(DepthExceeded):
        store.check_dispatch_depth(grandchild.id, 1)


@pytest.mark.django_db
def test_agent_root_creates_are_rate_limited_per_rolling_five_minutes(default_team):
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        for i in range(30):
            store.create_task(title=f"root {i}", created_by_agent_id="looping-agent")
            clock.shift(dt.timedelta(seconds=1))
        with pytest.raises(RootRateLimited):
            store.create_task(title="one too many", created_by_agent_id="looping-agent")
        # An operator creating a root by hand is not capped.
        store.create_task(title="by hand")
        clock.shift(dt.timedelta(minutes=5))  # the first creates leave the window
        store.create_task(title="later", created_by_agent_id="looping-agent")
