"""A real ticker process for the multi-process tests (run by test_processes.py).

    ticker_proc.py race <start_epoch_s> <minutes>   tick once per simulated minute
    ticker_proc.py hold-after-claim <epoch_s>       claim, then block until killed
    ticker_proc.py hold-after-dispatch <epoch_s>    dispatch, then block before recording

Time is driven with time_machine, never slept. Dispatch runs through django-q2 with
``sync`` on, i.e. inline in this process, exactly as the cluster would run it.
"""

from __future__ import annotations

import datetime as dt
import sys

import django

django.setup()

import time_machine  # noqa: E402
from django_q.conf import Conf  # noqa: E402

from routines import fire  # noqa: E402
from routines.ticker import Ticker  # noqa: E402

Conf.SYNC = True


def block_forever(marker: str) -> None:
    print(marker, flush=True)
    sys.stdin.read()  # the parent SIGKILLs us here
    raise SystemExit(3)


def main() -> None:
    mode, start = sys.argv[1], float(sys.argv[2])
    when = dt.datetime.fromtimestamp(start, tz=dt.UTC)
    with time_machine.travel(when, tick=False) as traveller:
        if mode == "race":
            ticker = Ticker()
            won = 0
            for minute in range(int(sys.argv[3]) + 1):
                traveller.move_to(when + dt.timedelta(minutes=minute))
                try:
                    won += len(ticker.tick().claimed)
                except Exception as exc:  # like run_forever: a bad tick is not fatal
                    print(f"tick failed: {exc}", file=sys.stderr, flush=True)
            print(f"WON {won}", flush=True)
        elif mode == "hold-after-claim":
            ticker = Ticker(enqueue=lambda rid: block_forever(f"CLAIMED {rid}"))
            ticker.due_pass()
            ticker.claim_phase()
        elif mode == "hold-after-dispatch":
            original = fire.fire_slot

            def dispatch_then_hold(routine, agent, slot):
                original(routine, agent, slot)
                block_forever(f"DISPATCHED {routine.id}")

            fire.fire_slot = dispatch_then_hold
            Ticker().tick()


if __name__ == "__main__":
    main()
