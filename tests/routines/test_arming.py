"""The ticker arms at the next due time, also for a row that was in flight."""

from __future__ import annotations

import threading
import time

import pytest

from routines import fire, store
from routines.models import RoutineFire
from routines.ticker import Ticker

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_one_second_routine_fires_about_every_second(agent):
    routine = store.create_routine(agent_id=agent.id, team=agent.team_id, cron_spec="* * * * * *")
    workers: list[threading.Thread] = []

    def enqueue(routine_id: str) -> None:
        # As a django-q2 worker would: the fire settles after the ticker re-armed.
        worker = threading.Thread(target=fire.run_fire, args=(routine_id,))
        workers.append(worker)
        worker.start()

    ticker = Ticker(enqueue=enqueue)
    loop = threading.Thread(target=ticker.run_forever)
    loop.start()
    started = time.monotonic()
    fired = 0
    try:
        # Polled with a deadline: ten seconds would see one fire if the ticker stayed
        # blind to the re-armed row until its 60 s rescan.
        while fired < 6 and time.monotonic() - started < 10:
            time.sleep(0.2)
            fired = RoutineFire.objects.filter(routine_id=routine.id).count()
    finally:
        ticker.stop()
        loop.join(timeout=30)
        for worker in workers:
            worker.join(timeout=30)
    assert fired >= 6, f"{fired} fires in 10 s"
    # Six slots of a one-second routine take about six seconds, not minutes.
    assert time.monotonic() - started < 10
