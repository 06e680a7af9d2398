"""Claims a cap budget covers go side by side while it is far from its limit and take
turns near it (board.store.cap_lanes): far, a claim holds one of the budget's lanes
and not its row (finding every lane busy, it waits for one); near, it waits for the
row like every claim the budget covers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections, transaction

from board import store
from board.models import Budget, Task
from board.store import cap_lanes, spend
from board.store.cap_lanes import CAP_LANES
from core import registry

pytestmark = [pytest.mark.postgresql_only, pytest.mark.django_db(transaction=True)]
CEILING = 10


def claim_while_another_holds_the_budget_row(budget_id: int) -> tuple[bool, Any]:
    """Claim-next by ``a1`` while another transaction holds the budget's row
    ``FOR UPDATE`` (as a usage report or a claim taking turns does): whether it
    finished within 5 s, and its result once the row is let go."""
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic():
                # As a usage report locks it (ordered by id: the model's default order
                # would join and lock the team row too).
                list(Budget.objects.select_for_update().filter(pk=budget_id).order_by("id"))
                held.set()
                release.wait(30)
        finally:
            connections.close_all()

    result: dict[str, Any] = {}

    def claimer() -> None:
        try:
            result["claim"] = store.claim_next("a1")
        finally:
            connections.close_all()

    hold = threading.Thread(target=holder)
    hold.start()
    assert held.wait(10)
    claim = threading.Thread(target=claimer)
    claim.start()
    claim.join(5)
    finished = not claim.is_alive()
    release.set()
    hold.join(30)
    claim.join(30)
    return finished, result.get("claim")


def setup_board(limit_cents: int) -> Budget:
    registry.create_agent(
        id="a1", display_name="A1", team="default", runtime="command",
        settings={"max_run_cents": CEILING},
    )  # fmt: skip
    store.create_task(title="work", file_mutating=False)
    return spend.create_budget(
        "default",
        {"scope": "team", "scope_id": "default", "window": "month",
         "limit_cents": limit_cents, "mode": "cap"},
    )  # fmt: skip


def test_a_claim_far_from_its_cap_goes_side_by_side_without_the_budget_row():
    # Eight lanes of a 10¢ ceiling are well within half of 10,000¢.
    budget = setup_board(10_000)
    finished, claimed = claim_while_another_holds_the_budget_row(budget.pk)
    assert finished
    assert claimed is not None and claimed.ok


def test_a_claim_near_its_cap_takes_turns_for_the_budget_row():
    # Eight lanes of a 10¢ ceiling are more than half of 100¢: the claim takes turns.
    budget = setup_board(100)
    finished, claimed = claim_while_another_holds_the_budget_row(budget.pk)
    assert not finished
    assert claimed is not None and claimed.ok  # admitted once the row was let go


PROCESSES = 12


def setup_agents(limit_cents: int, tasks: int, max_concurrent: int) -> Budget:
    for i in range(PROCESSES):
        registry.create_agent(
            id=f"w{i}", display_name=f"W{i}", team="default", runtime="command",
            max_concurrent=max_concurrent, settings={"max_run_cents": CEILING},
        )  # fmt: skip
    for n in range(tasks):
        store.create_task(title=f"work {n}", file_mutating=False)
    return spend.create_budget(
        "default",
        {"scope": "team", "scope_id": "default", "window": "month",
         "limit_cents": limit_cents, "mode": "cap"},
    )  # fmt: skip


def hold_until(lock: Callable[[], None], held: threading.Event, release: threading.Event) -> None:
    """In a transaction of its own: ``lock``, say so, and keep it until ``release``."""
    try:
        with transaction.atomic():
            lock()
            held.set()
            release.wait(90)
    finally:
        connections.close_all()


def lane_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return int(cursor.fetchone()[0])


def test_processes_far_from_the_cap_finding_every_lane_busy_wait_for_a_lane_not_the_row(race):
    # Twelve claims of 10¢ ceilings are far from half of 10,000¢. Every lane is held
    # (by this test) and so is the budget's row: a claim taking turns would wait for
    # the row; each waits for one lane instead, and all are admitted side by side
    # once the lanes are let go, the row still held.
    budget = setup_agents(10_000, PROCESSES, max_concurrent=1)
    row_held, row_release = threading.Event(), threading.Event()
    lanes_held, lanes_release = threading.Event(), threading.Event()

    def lock_row() -> None:
        list(Budget.objects.select_for_update().filter(pk=budget.pk).order_by("id"))

    def lock_lanes() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, %s * %s + lane) "
                "FROM generate_series(0, %s - 1) AS lane",
                [cap_lanes._LANE_KEY, budget.pk, CAP_LANES, CAP_LANES],
            )

    seen: dict[str, int] = {}

    def let_lanes_go_once_all_wait() -> None:
        try:
            deadline = time.monotonic() + 60
            while (waiting := lane_waiters()) < PROCESSES and time.monotonic() < deadline:
                time.sleep(0.02)
            seen["waiting"] = waiting
        finally:
            connections.close_all()
            lanes_release.set()

    holders = [
        threading.Thread(target=hold_until, args=(lock_row, row_held, row_release)),
        threading.Thread(target=hold_until, args=(lock_lanes, lanes_held, lanes_release)),
    ]
    for holder in holders:
        holder.start()
    assert row_held.wait(10) and lanes_held.wait(10)
    releaser = threading.Thread(target=let_lanes_go_once_all_wait)
    releaser.start()
    try:
        results = race([["cap-claims", "--agent", f"w{i}"] for i in range(PROCESSES)])
        row_still_held = not row_release.is_set()
    finally:
        lanes_release.set()
        row_release.set()
        for thread in (*holders, releaser):
            thread.join(30)

    assert seen["waiting"] == PROCESSES  # each waited on a lane, none on the row
    assert row_still_held
    assert [len(r["claimed"]) for r in results] == [1] * PROCESSES
    assert Task.objects.filter(status="in_progress").count() == PROCESSES


def test_processes_claiming_up_to_the_cap_are_admitted_exactly_what_it_allows(race):
    # 1,000¢ of 10¢ ceilings: side by side while far (lanes busy, claims wait for
    # one), taking turns near; the exact rule admits while the runs in flight hold
    # under 1,000¢ -- 100 runs, not one more, whatever the interleaving.
    setup_agents(1_000, 150, max_concurrent=100)

    results = race([["cap-claims", "--agent", f"w{i}", "--count", "150"] for i in range(PROCESSES)])

    assert sum(len(r["claimed"]) for r in results) == 100
    assert {r["stopped"] for r in results} == {"budget_paused"}
    assert Task.objects.filter(status="in_progress").count() == 100


def test_a_usage_report_committing_between_a_side_by_side_claims_reads_is_counted(monkeypatch):
    # Two runs in flight, 60¢ ceilings each, nothing spent yet: a 100¢ cap admitted
    # both (0 and then 60 spent-or-reserved, each under 100). A claim of a 6¢ task
    # reads the budget (nothing spent), and before it reads the runs in flight both
    # runs report their 60¢ and commit: the budget is spent past its limit and
    # paused. The claim must see those reports in one of its reads -- in any order
    # of the three transactions it is refused (either the 120¢ held in flight or
    # the 120¢ spent); counted in neither, it was admitted side by side (0 + 8 × 6
    # is within half of 100) and its run could take the scope to 126¢, past the cap
    # by more than the ceiling of the run admitted last.
    registry.create_agent(id="a1", display_name="A1", team="default", runtime="command")
    runs = []
    for n in (1, 2):
        registry.create_agent(id=f"r{n}", display_name=f"R{n}", team="default", runtime="command")
        task = store.create_task(title=f"big {n}", file_mutating=False, max_run_cents=60).task
        runs.append(task)
    spend.create_budget(
        "default",
        {"scope": "team", "scope_id": "default", "window": "month",
         "limit_cents": 100, "mode": "cap"},
    )  # fmt: skip
    executions = []
    for n, task in enumerate(runs, start=1):
        got = store.claim(task.id, f"r{n}")
        assert got.ok, got.detail
        executions.append(store.open_execution(task.id, got.ticket).id)
    small = store.create_task(title="small", file_mutating=False, max_run_cents=6).task

    in_flight = spend._in_flight
    reported: list[bool] = []

    def report_first(budget: Budget) -> Any:
        if not reported:  # once: the claim's first attempt, between its two reads
            reported.append(True)

            def report() -> None:
                try:
                    for execution in executions:
                        spend.record_usage(
                            execution, spend.Usage(cost_cents=60, cost_status="reported")
                        )
                finally:
                    connections.close_all()

            reporter = threading.Thread(target=report)
            reporter.start()
            reporter.join(30)
            assert not reporter.is_alive()
        return in_flight(budget)

    monkeypatch.setattr(spend, "_in_flight", report_first)
    claimed = store.claim(small.id, "a1")

    assert reported
    assert Budget.objects.get().spent_cents == 120  # the reports committed
    assert (claimed.ok, claimed.outcome) == (False, "budget_paused")
    assert store.get_task(small.id).status == "todo"
