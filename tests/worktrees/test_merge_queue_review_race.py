"""A reviewer's request for changes racing the merge queue's batch that holds the
task: the reviewer's decision holds and nothing lands twice. Sent back while the
batch gates (a real drain process, its gate parked on a file), the task's change
does not land and the rest of the line lands once, gated again without it; once
the gate decided, the request waits (409 landing_underway) until the batch lands
the task, or lets it go when the batch is abandoned."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from board.errors import LandingUnderway
from core import repositories
from executor import merge_queue
from tests.conftest import ROOT
from tests.worktrees.queue_fixtures import Harness, host_env
from worktrees import landing, service
from worktrees import queue as mq
from worktrees.models import BatchState, EntryState, MergeBatch, QueuedLanding

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

DRAIN = (
    "import json, sys, django; django.setup(); "
    "from executor import merge_queue; print(json.dumps(merge_queue.drain(sys.argv[1])))"
)
# The gate says it runs, then waits for the test's word (a file) before it passes.
PARKED_GATE = "touch {dir}/gating.$$; while [ ! -e {dir}/go ]; do sleep 0.02; done"


def queued_pair(harness: Harness) -> tuple[str, str]:
    ids = (
        harness.in_review("Sent back", {"back.txt": "back\n"}),
        harness.in_review("Lands", {"lands.txt": "lands\n"}),
    )
    for task_id in ids:
        assert service.approve(task_id, by="reviewer")["result"] == "queued"
    return ids


def test_a_task_sent_back_while_its_batch_gates_does_not_land_and_the_rest_land_once(
    queue_harness: Harness, database_url, tmp_path
):
    signals = tmp_path / "gate"
    signals.mkdir()
    repositories.update("app", {"verify_cmd": PARKED_GATE.format(dir=signals)})
    back, lands = queued_pair(queue_harness)
    drain = subprocess.Popen(
        [sys.executable, "-c", DRAIN, str(queue_harness.repo)],
        env=host_env(database_url, Path(settings.CLAWBOO_STATE_DIR), CLAWBOO_MERGE_BATCH="2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not list(signals.glob("gating.*")):
            assert drain.poll() is None, drain.communicate()
            assert time.monotonic() < deadline, "the batch never gated"
            time.sleep(0.02)

        # The reviewer changes their mind while the batch that holds both gates.
        assert store.request_changes(back, "not this", by="rita").task.status == "in_progress"
        (signals / "go").touch()
        out, err = drain.communicate(timeout=120)
    finally:
        drain.kill()
        drain.wait()
    assert drain.returncode == 0, err[-3000:]

    assert queue_harness.landed_ids() == [lands], json.loads(out)  # once, and only it
    assert store.get_task(lands).status == "done"
    assert store.get_task(back).status == "in_progress"
    assert QueuedLanding.objects.get(task_id=back).state == EntryState.WITHDRAWN
    ws = store.live_workspace(back)
    assert ws is not None and (ws.landing or {}).get("state") != store.LANDING_QUEUED
    notes = list(MergeBatch.objects.values_list("state", "note").order_by("pk"))
    assert notes == [
        (BatchState.ABANDONED, mq.LEFT_REVIEW_WHILE_GATING),
        (BatchState.LANDED, ""),
    ]


def test_once_the_gate_decided_a_request_for_changes_waits_for_the_batch_to_land_it(
    queue_harness: Harness, monkeypatch
):
    back, lands = queued_pair(queue_harness)
    refused: list[str] = []
    push_base = merge_queue.intake.push_base

    def request_while_advancing(repo, branch):  # the base moved; the board not yet
        try:
            store.request_changes(back, "not this", by="rita")
        except LandingUnderway as exc:
            refused.append(exc.code)
        return push_base(repo, branch)

    monkeypatch.setattr(merge_queue.intake, "push_base", request_while_advancing)

    assert sorted(merge_queue.drain(str(queue_harness.repo))["landed"]) == sorted([back, lands])

    assert refused == ["landing_underway"]
    assert sorted(queue_harness.landed_ids()) == sorted([back, lands])
    assert store.get_task(back).status == "done"  # landed, and not sent back to be redone


def test_an_abandoned_batch_lets_its_tasks_be_sent_back(queue_harness: Harness):
    back, lands = queued_pair(queue_harness)
    repo, base = str(queue_harness.repo), landing.base_branch_of(queue_harness.repo)
    entries = {e.task_id: e.pk for e in QueuedLanding.objects.all()}
    stack = [{"entry": entries[t], "task_id": t, "commit": None} for t in (back, lands)]
    batch = mq.open_batch(repo, base, "0" * 40, stack)
    assert batch is not None
    assert mq.decide(batch.pk, "1" * 40, stack, []) is not None
    with pytest.raises(LandingUnderway):
        store.request_changes(back, "not this", by="rita")

    # The base moved under it (a person, another host): nothing landed.
    mq.close_batch(batch.pk, BatchState.ABANDONED, "the base moved under the batch")

    assert store.request_changes(back, "not this", by="rita").task.status == "in_progress"
    assert store.live_workspace(lands).landing is None  # as it was before the batch


def test_two_approvals_of_one_task_at_once_put_it_in_line_once_and_it_lands_once(
    queue_harness: Harness, race
):
    task_id = queue_harness.in_review("Approved twice", {"twice.txt": "twice\n"})
    roots = os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS)

    results = race([["approve", task_id, "--refusal"]] * 2, extra_env={"CLAWBOO_REPO_ROOTS": roots})

    assert [r.get("result") for r in results] == ["queued", "queued"], results
    assert QueuedLanding.objects.filter(task_id=task_id).count() == 1
    assert merge_queue.drain(str(queue_harness.repo))["landed"] == [task_id]
    assert queue_harness.landed_ids() == [task_id]
