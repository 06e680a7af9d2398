"""The ticker arms at the next due time, also for a row that was in flight."""

from __future__ import annotations

import threading
import time

import pytest

from routines import fire, store
from routines.models import RoutineFire
from routines.ticker import MAX_ARM_MS, Ticker

pytestmark = pytest.mark.django_db(transaction=True)

# Well under MAX_ARM_MS (60 s), the rescan a ticker blind to re-armed rows waits for.
SIX_FIRES_WITHIN_S = 30


def test_a_one_second_routine_fires_about_every_second(agent):
    assert SIX_FIRES_WITHIN_S * 1000 < MAX_ARM_MS
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
    six_after_s = None
    try:
        # Polled with a deadline well under the 60 s rescan: a ticker blind to the
        # re-armed row until then would see one fire in it, two at most, never six.
        # Six slots take about six seconds on a quiet machine; the room above that is
        # for a loaded one, where each fire's writes and threads wait for a core.
        while time.monotonic() - started < SIX_FIRES_WITHIN_S:
            time.sleep(0.2)
            fired = RoutineFire.objects.filter(routine_id=routine.id).count()
            if fired >= 6:
                # Timed here, not after the teardown below (joining the ticker and
                # the fire threads is no part of how soon the slots fired).
                six_after_s = time.monotonic() - started
                break
    finally:
        ticker.stop()
        loop.join(timeout=30)
        for worker in workers:
            worker.join(timeout=30)
    assert six_after_s is not None, f"{fired} fires in {SIX_FIRES_WITHIN_S} s"


def test_a_poke_while_the_ticker_chooses_its_delay_wakes_it_at_once(agent, monkeypatch):
    # A fire re-arms its row and pokes while the ticker, which saw the row in flight,
    # is choosing a minute's delay: the poke counts from before the tick, so the ticker
    # ticks again at once (it slept the minute, blind to the slot, under load).
    calls: list[float] = []
    ticker = Ticker(enqueue=lambda routine_id: None)

    def tick_and_arm() -> int:
        calls.append(time.monotonic())
        if len(calls) == 1:
            store.poke()
            return MAX_ARM_MS
        ticker.stop_event.set()
        return 0

    monkeypatch.setattr(ticker, "_tick_and_arm", tick_and_arm)
    loop = threading.Thread(target=ticker.run_forever)
    loop.start()
    loop.join(timeout=10)
    ticker.stop()
    loop.join(timeout=30)
    assert len(calls) == 2, "the ticker slept through the poke"
    assert calls[1] - calls[0] < 5
