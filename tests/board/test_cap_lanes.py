"""Claims a cap budget covers go side by side while it is far from its limit and take
turns near it (board.store.cap_lanes): far, a claim holds one of the budget's lanes
and not its row; near, it waits for the row like every claim the budget covers."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections, transaction

from board import store
from board.models import Budget
from board.store import spend
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
