"""``CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS``: a routine fire on the queue is ended by
django-q2 once it has run that long (docs/operating.md), and never started a second
time while it is still within it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.conftest import ROOT
from tests.test_knobs import settings_seen_with

# A django-q2 worker, as the qcluster runs it, given the fire the ticker enqueued;
# the fire itself never ends. Its own process: django-q2 arms SIGALRM for the deadline.
WORKER = """
import json, time
import django
django.setup()
from multiprocessing import Queue, Value
from django_q.brokers import get_broker
from django_q.signing import SignedPackage
from django_q.worker import worker
import routines.fire
routines.fire.run_fire = lambda routine_id: time.sleep(120)  # a fire that hangs
from routines.ticker import enqueue_fire
enqueue_fire("r1")
[(_, payload)] = get_broker().dequeue()
tasks, results = Queue(), Queue()
tasks.put(SignedPackage.loads(payload))
tasks.put("STOP")
started = time.monotonic()
worker(tasks, results, Value("f", -1))
done = results.get(timeout=30)
print(json.dumps({"after_s": time.monotonic() - started, "success": done["success"],
                  "result": str(done["result"]).splitlines()[0]}))
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_fire_that_runs_past_the_dispatch_deadline_is_ended_at_it(database_url, tmp_path):
    done = subprocess.run(  # noqa: S603 - this interpreter, an argv list
        [sys.executable, "-c", WORKER],
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "PYTHONPATH": str(ROOT),
            "CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS": "2000",
        },
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ended = json.loads(done.stdout.strip().splitlines()[-1])
    assert ended["success"] is False
    assert "exceeded maximum timeout value (2 seconds)" in ended["result"]
    # Ended at two seconds, not after the two minutes it would have taken (nor the
    # default's fifteen).
    assert 2 <= ended["after_s"] < 60


def test_a_fire_within_a_long_deadline_is_never_handed_to_a_second_worker():
    """django-q2 hands a task nobody acknowledged within ``retry`` to another worker:
    with a deadline past the fixed 960 s retry, a fire still running at 16 minutes
    was started again beside itself."""
    seen = settings_seen_with(
        {"CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS": str(30 * 60 * 1000)},
        ["CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS", "Q_CLUSTER"],
    )
    assert seen["CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS"] == 30 * 60 * 1000
    assert seen["Q_CLUSTER"]["retry"] > 30 * 60
    assert seen["Q_CLUSTER"]["retry"] > seen["Q_CLUSTER"]["timeout"]  # django-q2's own rule


def test_a_dispatch_deadline_under_a_second_reads_as_the_default_not_as_no_deadline():
    """django-q2's timeout is whole seconds, and 0 arms no alarm: 500 ms was a fire
    with no deadline at all."""
    seen = settings_seen_with(
        {"CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS": "500"}, ["CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS"]
    )
    assert seen["CLAWBOO_ROUTINE_DISPATCH_DEADLINE_MS"] == 900_000
