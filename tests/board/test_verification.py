"""The verification gate (issue 3): a non-promotable verdict blocks done unless a
human override, which is audited; release clears the verdict."""

from __future__ import annotations

import pytest

from board import store
from board.errors import VerificationRequired
from core.models import Event
from tests.board.states import task_in

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("verdict", ["fail", "completed_with_debt"])
def test_a_non_promotable_verdict_blocks_done(default_team, verdict):
    task, ticket = task_in("in_progress")
    store.set_verdict(task.id, verdict, "3 tests red")
    with pytest.raises(VerificationRequired) as refused:
        store.complete(task.id, ticket=ticket)
    assert refused.value.code == "verification_required"  # the API's 409
    with pytest.raises(VerificationRequired):
        store.transition(task.id, "done")
    assert store.get_task(task.id).status == "in_progress"


@pytest.mark.parametrize("verdict", [None, "pass"])
def test_no_verdict_or_a_pass_lands_done(default_team, verdict):
    task, ticket = task_in("in_progress")
    if verdict:
        store.set_verdict(task.id, verdict)
    assert store.complete(task.id, ticket=ticket).recorded


def test_a_human_override_is_recorded_as_comment_and_event(default_team):
    task, ticket = task_in("in_progress")
    store.set_verdict(task.id, "fail", "lint red")
    override = {"by": "grace", "reason": "lint rule is wrong; tracked in #12"}
    assert store.complete(task.id, ticket=ticket, human_override=override).recorded

    done = store.get_task(task.id)
    assert done.status == "done"
    assert done.human_override["by"] == "grace"
    assert done.human_override["reason"] == override["reason"]
    assert done.human_override["verdict"] == "fail" and done.human_override["at"]
    comments = list(store.list_comments(task.id))
    assert [c.author for c in comments] == ["grace"]
    assert override["reason"] in comments[0].body
    assert Event.objects.filter(task_id=task.id, kind="verification_overridden").exists()


def test_release_clears_the_verdict_so_the_next_runtime_can_finish(default_team):
    task, _ = task_in("in_progress")
    store.set_verdict(task.id, "fail", "red")
    assert store.release(task.id).recorded
    assert store.get_task(task.id).verdict is None
    again = store.claim(task.id, "bob", "codex")
    assert store.complete(task.id, ticket=again.ticket).recorded


def test_a_verdict_under_the_builders_claim_renews_its_lease(default_team):
    task, ticket = task_in("in_progress")
    recorded = store.record_verification(task.id, "pass", "exit 0", {}, ticket=ticket)
    assert recorded is not None and recorded.verdict == "pass"
    fresh = store.get_task(task.id)
    assert fresh.verdict == "pass" and fresh.lease_until > task.lease_until
    assert Event.objects.filter(task_id=task.id, kind="verification_recorded").count() == 1


def test_a_verdict_under_a_lost_claim_records_nothing(default_team):
    task, ticket = task_in("in_progress")
    store.release(task.id)
    store.claim(task.id, "bob")
    before = store.get_task(task.id)
    assert store.record_verification(task.id, "pass", "exit 0", {}, ticket=ticket) is None
    fresh = store.get_task(task.id)
    assert fresh.verdict is None and fresh.assignee_agent_id == "bob"
    assert (fresh.lease_until, fresh.revision) == (before.lease_until, before.revision)
    assert not Event.objects.filter(task_id=task.id, kind="verification_recorded").exists()
