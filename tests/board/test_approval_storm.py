"""Approval before work under real OS-process races (issue 34): claim-next by many
processes never takes a task a person has not approved, and once they have, each
is handed out exactly once."""

from __future__ import annotations

from collections import Counter

import pytest

from board import store
from board.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


def _delegated(n: int) -> list[str]:
    """Tasks that wait for a person: every third filed by an agent (delegation; the
    root rate limit caps those), the others labelled ``risk``."""
    return [
        store.create_task(title=f"delegated {i}", created_by_agent_id="planner").task.id
        if i % 3 == 0
        else store.create_task(title=f"risky {i}", labels=["risk"]).task.id
        for i in range(n)
    ]


def test_twelve_processes_claim_none_of_the_tasks_waiting_for_approval(default_team, race):
    waiting = _delegated(40)

    results = race([["drain", "--agent", f"w{i}"] for i in range(12)])

    assert [r["claimed"] for r in results] == [[]] * 12
    assert set(Task.objects.filter(pk__in=waiting).values_list("status", flat=True)) == {"todo"}
    assert not Task.objects.filter(assignee_agent_id__isnull=False).exists()


def test_after_approval_twelve_processes_claim_each_task_exactly_once(default_team, race):
    approved = _delegated(60)
    still_waiting = _delegated(20)
    for task_id in approved:
        store.decide_approval(task_id, "approve", by="alice")

    results = race([["drain", "--agent", f"w{i}"] for i in range(12)])

    claimed = [task_id for r in results for task_id in r["claimed"]]
    assert Counter(claimed).most_common(1)[0][1] == 1  # nobody got a task twice
    assert set(claimed) == set(approved)  # every approved one, and only those
    waiting = Task.objects.filter(pk__in=still_waiting)
    assert {(t.status, t.assignee_agent_id, t.approval_state) for t in waiting} == {
        ("todo", None, "required")
    }


def test_a_task_edited_after_approval_is_claimed_by_no_racer(default_team, race):
    task = _delegated(1)[0]
    store.decide_approval(task, "approve", by="alice")
    store.update_task(task, {"description": "now also delete the production database"})
    assert store.get_task(task).approval["state"] == "required"

    results = race([["claim", task, "--agent", f"w{i}"] for i in range(12)])

    assert Counter(r["outcome"] for r in results) == {"approval_required": 12}
    store.decide_approval(task, "approve", by="alice")
    results = race([["claim", task, "--agent", f"w{i}"] for i in range(12)])
    assert Counter(r["outcome"] for r in results) == {"ok": 1, "conflict": 11}
