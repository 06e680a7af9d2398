"""Ticker bench (issue 7): 100,000 idle routines, 1,000 of them due.

Measures a tick with nothing due, then due-pass + claim + dispatch-enqueue for the
1,000 due rows (enqueue into django-q2's ORM broker, not executed). Run against a
scratch database:

    CLAWBOO_STATE_DIR=/tmp/bench DJANGO_SETTINGS_MODULE=clawboo.settings \\
        python bench/ticker.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawboo.settings")

import logging  # noqa: E402

import django  # noqa: E402

django.setup()
logging.getLogger("django-q").setLevel(logging.WARNING)  # one line per enqueue skews timing

from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from core import registry  # noqa: E402
from routines.models import Routine  # noqa: E402
from routines.ticker import Ticker  # noqa: E402

TOTAL, DUE = 100_000, 1_000


def main() -> None:
    call_command("migrate", verbosity=0)
    registry.ensure_team("bench", "Bench")
    if not registry.Agent.objects.filter(pk="bench-agent").exists():
        registry.create_agent(id="bench-agent", display_name="B", team="bench", runtime="command")
    Routine.objects.all().delete()  # bench setup only: a scratch database
    now = int(time.time() * 1000)
    stamp = timezone.now()
    rows = [
        Routine(
            id=f"b{i:07d}",
            agent_id="bench-agent",
            team_id="bench",
            cron_spec="0 * * * *",
            task_template={},
            status="idle",
            next_run_at=now + 3_600_000,
            created_at=stamp,
            updated_at=stamp,
        )
        for i in range(TOTAL)
    ]
    Routine.objects.bulk_create(rows, batch_size=5_000)
    ticker = Ticker()
    samples = []
    for _ in range(50):
        t0 = time.perf_counter()
        ticker.tick()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    print(f"no-due tick over {TOTAL} rows: median {samples[25]:.2f} ms, p90 {samples[45]:.2f} ms")
    due_ids = [f"b{i:07d}" for i in range(0, TOTAL, TOTAL // DUE)]
    Routine.objects.filter(id__in=due_ids).update(next_run_at=now - 1_000)
    t0 = time.perf_counter()
    report = ticker.tick()
    elapsed = time.perf_counter() - t0
    print(f"{len(report.claimed)} due fires: due-pass + claim + enqueue in {elapsed:.3f} s")


if __name__ == "__main__":
    main()
