"""The local worker threads of ``manage.py work``: one per agent, each claiming and
working its team's ready tasks with an :class:`executor.runner.Executor`, and one that
looks for agents registered since and beats for ``/healthz``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from core import beats, reconnect, wakeups
from executor import health
from executor.runner import Executor, WorkReport

log = logging.getLogger("executor.runner")

# How often work --all looks for agents registered since it started.
DISCOVER_S = 5.0


def _unavailable_detail(error: str | None) -> bool:
    """A run that failed because the database went away mid-run (the executor
    settles what it can and reports the error as text)."""
    return bool(error) and any(
        name in (error or "") for name in ("OperationalError", "InterfaceError")
    )


def _work_agent(
    agent_id: str,
    stop: threading.Event,
    poll_s: float,
    once: bool,
    report: Callable[[WorkReport], None] | None,
    lease_ms: int | None,
    runs_here: Callable[[str], bool] | None = None,
) -> None:
    """One agent's thread of :func:`work_loop`: claim and work until stopped."""
    outage = reconnect.Outage(f"worker {agent_id}")
    executor: Executor | None = None
    last_refusal: str | None = None
    try:
        while not stop.is_set():
            reconnect.fresh()
            since = wakeups.seen(wakeups.BOARD)  # before the look: no lost wake
            try:
                if executor is None:
                    executor = Executor(agent_id, lease_ms=lease_ms)
                # Right before the claim: a binding made a moment ago counts.
                if runs_here is not None and not runs_here(agent_id):
                    if once:
                        return
                    wakeups.wait(wakeups.BOARD, since, poll_s)
                    continue
                result = executor.work_once()
            except Exception as exc:
                if not reconnect.is_unavailable(exc):
                    raise
                # The database went away (restart, terminated connection, a file
                # that stays locked): wait, reconnect, carry on working.
                stop.wait(outage.lost(exc))
                continue
            if result.outcome != "failed" or not _unavailable_detail(result.error):
                outage.ok()
            # A refusal (e.g. an agent no operator approved) is reported once, not at
            # every poll, until it changes.
            refusal = result.error if result.outcome == "refused" else None
            fresh = refusal is None or refusal != last_refusal
            if result.outcome != "idle" and report is not None and fresh:
                report(result)
            last_refusal = refusal
            if result.outcome in ("idle", "refused"):
                if once:
                    return
                # At least every probe interval: a runtime fixed meanwhile (the
                # preflight) is noticed within CLAWBOO_HEALTH_PROBE_MS.
                wakeups.wait(wakeups.BOARD, since, min(poll_s, health.probe_interval_s()))
    except Exception:
        log.exception("worker for agent %s stopped", agent_id)
    finally:
        from django.db import connection

        connection.close()


def work_loop(
    agent_ids: list[str],
    stop: threading.Event,
    *,
    poll_s: float = 5.0,
    once: bool = False,
    report: Callable[[WorkReport], None] | None = None,
    discover: Callable[[], list[str]] | None = None,
    lease_ms: int | None = None,
    runs_here: Callable[[str], bool] | None = None,
) -> None:
    """One thread per agent, each claiming and working its team's ready tasks until
    ``stop`` is set (or, with ``once``, until nothing is ready). With ``discover``,
    agents registered later get a thread of their own too. ``lease_ms``: the lease
    of each claim (the board's default when None). ``runs_here``, asked before each
    claim: False leaves the agent's tasks to another host (a machine token bound
    since this loop began) until it says True again.

    An idle thread waits for the board to change (:mod:`core.wakeups`), so work that
    becomes claimable is claimed at once; ``poll_s`` is only the safety net."""
    threads: dict[str, threading.Thread] = {}

    def start(agent_id: str) -> None:
        args = (agent_id, stop, poll_s, once, report, lease_ms, runs_here)
        thread = threading.Thread(
            target=_work_agent, args=args, name=f"work-{agent_id}", daemon=True
        )
        threads[agent_id] = thread
        thread.start()

    for agent_id in agent_ids:
        start(agent_id)
    if not once:
        _discover(threads, stop, start, discover)
    for thread in list(threads.values()):
        thread.join()


def _discover(
    threads: dict[str, threading.Thread],
    stop: threading.Event,
    start: Callable[[str], None],
    discover: Callable[[], list[str]] | None,
) -> None:
    """Until stopped: look for agents registered since (on a board change, or every
    DISCOVER_S), and beat for /healthz while any worker thread runs. Whoever sets
    ``stop`` calls wakeups.wake_all()."""
    beater = beats.Beater("workers")
    outage = reconnect.Outage("workers")
    try:
        while not stop.is_set():
            reconnect.fresh()
            since = wakeups.seen(wakeups.BOARD)
            if not threads or any(t.is_alive() for t in threads.values()):
                beater.maybe_beat()
            try:
                for agent_id in discover() if discover is not None else ():
                    if agent_id not in threads:
                        start(agent_id)
            except Exception as exc:
                if not reconnect.is_unavailable(exc):
                    raise
                stop.wait(outage.lost(exc))
                continue
            outage.ok()
            wakeups.wait(wakeups.BOARD, since, min(DISCOVER_S, beater.interval_s))
    finally:
        beater.stop()
    wakeups.wake_all()  # idle threads return to see the stop
