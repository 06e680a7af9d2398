"""A merge-queue batch whose base could not be moved to what its gate passed is
abandoned, and the drain stacks its line again only where that can help: on a base
that moved under it (a person's commit, another host's landing), once per drain.
Before, the drain took an abandoned batch for progress and ran the next at once --
the same line, the same gate run again -- up to its limit of batches (50 gate runs
in one drain, and as many in the next minute's) while the base's checkout had local
changes in the way, or the base moved under each gate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from board import store
from executor import merge_queue
from tests.fixtures.gitrepos import git
from tests.worktrees.queue_fixtures import Harness
from worktrees import queue, service
from worktrees.models import MergeBatch


def _two_in_line(harness: Harness) -> list[str]:
    ids = [harness.in_review(f"T{n}", {f"t{n}.txt": f"{n}\n"}) for n in range(2)]
    for task_id in ids:
        assert service.approve(task_id, by="reviewer")["result"] == "queued"
    return ids


def _commit_on_main(repo: Path, name: str) -> None:
    """A person's commit in their checkout of main: the base moves."""
    (repo / name).write_text(f"{name}\n")
    git(repo, "add", name)
    git(repo, "commit", "-qm", f"a person's {name}")


def _base_moves_under_the_gate(harness: Harness, monkeypatch: Any, times: int) -> None:
    gate = merge_queue._gate
    moved: list[str] = []

    def gate_then_move(*args: Any, **kwargs: Any) -> Any:
        verdict = gate(*args, **kwargs)
        if len(moved) < times:
            moved.append(f"person{len(moved)}.txt")
            _commit_on_main(harness.repo, moved[-1])
        return verdict

    monkeypatch.setattr(merge_queue, "_gate", gate_then_move)


def test_a_base_whose_checkout_cannot_be_fast_forwarded_ends_the_drain_after_one_batch(
    queue_harness: Harness,
):
    ids = _two_in_line(queue_harness)
    # A person's own file in their checkout of main, where the change would go.
    stray = queue_harness.repo / "t0.txt"
    stray.write_text("mine, not committed\n")

    report = merge_queue.drain(str(queue_harness.repo))

    assert (report["batches"], report["gate_runs"], report["landed"]) == (1, 1, [])
    [batch] = MergeBatch.objects.all()
    assert batch.state == "abandoned" and "could not move main" in batch.note
    assert all(store.get_task(t).status == "in_review" for t in ids)  # still in line

    stray.unlink()  # the person tidies up; the next drain lands the line
    report = merge_queue.drain(str(queue_harness.repo))
    assert (report["batches"], report["landed"]) == (1, ids)
    assert all(store.get_task(t).status == "done" for t in ids)


def test_a_base_moved_under_the_gate_is_stacked_on_and_gated_once_more_and_lands(
    queue_harness: Harness, monkeypatch: Any
):
    ids = _two_in_line(queue_harness)
    _base_moves_under_the_gate(queue_harness, monkeypatch, times=1)

    report = merge_queue.drain(str(queue_harness.repo))

    assert (report["batches"], report["gate_runs"], report["landed"]) == (2, 2, ids)
    states = list(MergeBatch.objects.order_by("pk").values_list("state", flat=True))
    assert states == ["abandoned", "landed"]
    assert "person0.txt" in git(queue_harness.repo, "ls-tree", "--name-only", "main").split()


def test_a_base_moving_under_every_gate_is_gated_again_once_per_drain_not_to_the_limit(
    queue_harness: Harness, monkeypatch: Any
):
    ids = _two_in_line(queue_harness)
    _base_moves_under_the_gate(queue_harness, monkeypatch, times=100)

    report = merge_queue.drain(str(queue_harness.repo))

    assert (report["batches"], report["gate_runs"], report["landed"]) == (2, 2, [])
    assert MergeBatch.objects.filter(state="abandoned").count() == 2
    assert all(store.get_task(t).status == "in_review" for t in ids)

    monkeypatch.undo()  # the base holds still: the next drain lands the line
    monkeypatch.setattr(queue, "kick", queue_harness.kicks.append)
    report = merge_queue.drain(str(queue_harness.repo))
    assert report["landed"] == ids and report["batches"] == 1
