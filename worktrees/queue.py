"""The merge queue's rows: the only writer of :class:`~worktrees.models.QueuedLanding`
and :class:`~worktrees.models.MergeBatch` (the queue's job, the approval that
enqueues, the board's view all come through here).

An approval of a task whose repository lands by ``queue`` is an entry here; the
task stays ``in_review`` (waiting to land) until a batch lands it ``done``. The
job that stacks, gates and lands a batch is the executor's
(:mod:`executor.merge_queue`); what it decides is written here before git moves,
and each entry's end is written in the same transaction as its task's.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Max, Q, QuerySet, Subquery, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from board import store
from board.models import Task
from board.transitions import Status
from core import storage
from worktrees.models import (
    LIVE_ENTRY_STATES,
    OPEN_BATCH_STATES,
    BatchState,
    EntryState,
    MergeBatch,
    QueuedLanding,
)

# The dotted function a django-q2 worker runs to drain one repository's queue.
DRAIN_TASK = "executor.merge_queue.drain"
# Who the queue's own board writes are by (comments, sent-back feedback).
QUEUE_ACTOR = "merge-queue"


def batch_size() -> int:
    return int(settings.CLAWBOO_MERGE_BATCH)


def max_rebase_rounds() -> int:
    """Rebase rounds a conflicting entry gets before it is blocked for a person. A
    conflict with the base is not the builder's failure (the work ahead of it landed
    first), so it is not a fix round of CLAWBOO_MAX_FIX_CYCLES; each rebase round lands
    work ahead of it, and this bounds the rounds two builders could trade all the same."""
    return int(settings.CLAWBOO_MAX_REBASE_ROUNDS)


def kick(repo_path: str) -> None:
    """Hand the repository's queue to a django-q2 worker (inline when Q_CLUSTER
    sync is on). Called after commit; the periodic drain picks up whatever a lost
    kick left."""
    from django_q.tasks import async_task

    async_task(DRAIN_TASK, repo_path, task_name=f"merge queue {repo_path}"[:100])


def _kick_on_commit(repo_path: str) -> None:
    transaction.on_commit(lambda: kick(repo_path), robust=True)


def _update(qs: QuerySet[Any], **fields: Any) -> int:
    """One conditional UPDATE in its own write (its row count says who won)."""
    return storage.write(lambda: qs.update(**fields))


@dataclass(frozen=True)
class Enqueued:
    entry: QueuedLanding
    position: int
    created: bool


def position_of(entry: QueuedLanding) -> int:
    """1 for the next to be stacked; 0 for an entry not waiting in line."""
    if entry.state != EntryState.QUEUED:
        return 0
    ahead = QueuedLanding.objects.filter(
        repo_path=entry.repo_path, state=EntryState.QUEUED, queued_at__lt=entry.queued_at
    ).count()
    same_instant = QueuedLanding.objects.filter(
        repo_path=entry.repo_path,
        state=EntryState.QUEUED,
        queued_at=entry.queued_at,
        id__lt=entry.id,
    ).count()
    return ahead + same_instant + 1


def live_entry(task_id: str) -> QueuedLanding | None:
    return QueuedLanding.objects.filter(task_id=task_id, state__in=LIVE_ENTRY_STATES).first()


STALE_REASON = "its task was claimed again after the approval: that work is not approved"


def attempts_of(task_id: str) -> int | None:
    return Task.objects.filter(pk=task_id).values_list("attempts", flat=True).first()


def is_stale(entry: QueuedLanding, attempts: int | None) -> bool:
    """Whether an entry waiting in line approved other work than its task's now: the
    task was claimed again since (a person's request changes, a move back to todo),
    so what would land is work no person approved. Entries the queue itself sent
    back are not waiting in line; their re-entry takes the new attempt."""
    return (
        entry.state == EntryState.QUEUED
        and entry.attempt is not None
        and attempts is not None
        and attempts != entry.attempt
    )


def enqueue(
    task_id: str, *, repo_path: str, base_branch: str, by: str, human_override: Any = None
) -> Enqueued:
    """Put an approved task in line (idempotent: approving a task already in line
    answers its place). The queue's job is kicked after commit."""
    attempt = attempts_of(task_id)
    existing = live_entry(task_id)
    if existing is not None and existing.state == EntryState.RETURNED:
        return _requeue(existing, by=by, human_override=human_override, attempt=attempt)
    if existing is not None and not is_stale(existing, attempt):
        return Enqueued(existing, position_of(existing), False)
    if existing is not None:
        # The approval of earlier work: this one is of the work now in review.
        withdraw(existing.pk, STALE_REASON)

    def run() -> QueuedLanding:
        return QueuedLanding.objects.create(
            task_id=task_id,
            repo_path=repo_path,
            base_branch=base_branch,
            **_in_line(by, human_override, attempt),
        )

    try:
        entry = storage.write(run)
    except IntegrityError:  # a concurrent approval of the same task got there first
        raced = live_entry(task_id)
        if raced is None:
            raise
        return Enqueued(raced, position_of(raced), False)
    transaction.on_commit(lambda: kick(repo_path), robust=True)
    return Enqueued(entry, position_of(entry), True)


def _in_line(by: str, human_override: Any, attempt: int | None) -> dict[str, Any]:
    """An entry's fields as a person's approval puts it in line: approved now, at the
    line's end, of the work at ``attempt``."""
    at = timezone.now()
    return {
        "state": EntryState.QUEUED,
        "by": by,
        "human_override": human_override,
        "approved_at": at,
        "queued_at": at,
        "attempt": attempt,
    }


def _requeue(
    entry: QueuedLanding, *, by: str, human_override: Any, attempt: int | None
) -> Enqueued:
    """A person approves the work an entry's fix or rebase round handed back: the
    entry goes back in line, at its end, with its rounds still counted."""
    moved = _update(
        QueuedLanding.objects.filter(pk=entry.pk, state=EntryState.RETURNED),
        **_in_line(by, human_override, attempt),
    )
    entry.refresh_from_db()
    if moved:
        transaction.on_commit(lambda: kick(entry.repo_path), robust=True)
    return Enqueued(entry, position_of(entry), bool(moved))


def waiting(repo_path: str, limit: int) -> list[QueuedLanding]:
    """The next entries of the repository's line, in approval order."""
    return list(
        QueuedLanding.objects.filter(repo_path=repo_path, state=EntryState.QUEUED).order_by(
            "queued_at", "id"
        )[:limit]
    )


def repos_waiting() -> list[str]:
    """Repositories with an entry in line, one sent back, or a batch left open."""
    paths = set(
        QueuedLanding.objects.filter(state__in=LIVE_ENTRY_STATES).values_list(
            "repo_path", flat=True
        )
    )
    paths |= set(
        MergeBatch.objects.filter(state__in=OPEN_BATCH_STATES).values_list("repo_path", flat=True)
    )
    return sorted(paths)


def settle_returned(repo_path: str | None = None, task_id: str | None = None) -> int:
    """Entries sent back to their builder (a fix or rebase round) whose task left
    review otherwise (done with nothing to land, cancelled) are withdrawn; returns
    how many. One whose task is in review again stays ``returned``: what its builder
    handed back is not the work a person approved -- the round could change anything
    -- so it goes back in line on a person's approval (:func:`enqueue`), its rounds
    still counted (GOVERNANCE §6: approving, landing, is a person's)."""
    qs = QueuedLanding.objects.filter(state=EntryState.RETURNED)
    if repo_path is not None:
        qs = qs.filter(repo_path=repo_path)
    if task_id is not None:
        qs = qs.filter(task_id=task_id)
    gone = 0
    for entry in qs:
        status = Task.objects.filter(pk=entry.task_id).values_list("status", flat=True).first()
        if status in (Status.DONE, Status.CANCELLED, None):
            gone += _update(
                QueuedLanding.objects.filter(pk=entry.pk, state=EntryState.RETURNED),
                state=EntryState.WITHDRAWN,
                reason=f"left review as {status}",
            )
    return gone


def withdraw(entry_id: int, reason: str) -> None:
    _update(
        QueuedLanding.objects.filter(pk=entry_id, state__in=LIVE_ENTRY_STATES),
        state=EntryState.WITHDRAWN,
        reason=reason[:2000],
    )


def mark_landed(entry_id: int, commit: str | None, batch_id: int) -> bool:
    """The entry landed (call it in the transaction that records its task done).
    False when it already had: each entry lands once."""
    return bool(
        QueuedLanding.objects.filter(pk=entry_id, state=EntryState.QUEUED).update(
            state=EntryState.LANDED,
            commit=commit or "",
            batch_id=batch_id,
            landed_at=timezone.now(),
        )
    )


def mark_returned(entry_id: int, reason: str, *, rebase: bool, blocked: bool = False) -> bool:
    """Sent back to its builder (a fix round, or a rebase round for a conflict,
    counted), or blocked when its rounds are spent (call it in the transaction that
    moves its task)."""
    entry = QueuedLanding.objects.filter(pk=entry_id, state=EntryState.QUEUED).first()
    if entry is None:
        return False
    counted = 0 if blocked else 1
    return bool(
        QueuedLanding.objects.filter(pk=entry_id, state=EntryState.QUEUED).update(
            state=EntryState.BLOCKED if blocked else EntryState.RETURNED,
            rounds=entry.rounds + (0 if rebase else counted),
            rebases=entry.rebases + (counted if rebase else 0),
            reason=reason[:4000],
        )
    )


# --- batches -----------------------------------------------------------------------


def open_batch(
    repo_path: str, base_branch: str, base_before: str, stack: list[dict[str, Any]]
) -> MergeBatch | None:
    """Write the batch record (``gating``) before any gate runs or the base moves.
    None when the repository already has an open batch (another host's job)."""

    def run() -> MergeBatch:
        at = timezone.now()
        return MergeBatch.objects.create(
            repo_path=repo_path,
            base_branch=base_branch,
            state=BatchState.GATING,
            base_before=base_before,
            stack=stack,
            host=socket.gethostname(),
            pid=os.getpid(),
            started_at=at,
            updated_at=at,
        )

    try:
        return storage.write(run)
    except IntegrityError:
        return None


def gate_started(batch_id: int, commit: str) -> None:
    _update(MergeBatch.objects.filter(pk=batch_id), running_gate=commit, updated_at=timezone.now())


def gate_finished(batch_id: int, record: dict[str, Any]) -> None:
    """One gate run kept on the batch (the board shows it; bisect reads it)."""

    def run() -> None:
        batch = MergeBatch.objects.select_for_update().get(pk=batch_id)
        batch.gates = [*batch.gates, record]
        batch.gate_runs += 1
        batch.running_gate = ""
        batch.updated_at = timezone.now()
        batch.save(update_fields=["gates", "gate_runs", "running_gate", "updated_at"])

    storage.write(run)


# The note of a batch abandoned because a reviewer sent one of its tasks back while
# it gated (the rest are gated again without it).
LEFT_REVIEW_WHILE_GATING = "a task left review while its batch gated"


def decide(
    batch_id: int, target: str, landing: list[dict[str, Any]], culprits: list[dict[str, Any]]
) -> MergeBatch | None:
    """What the gate decided, written before the base moves: the commit the base
    goes to (``target``), the entries that land with it, the culprits sent back.
    The landing tasks are held in review until the batch settles
    (:func:`board.store.hold_for_batch`). None when one of them left review while
    the batch gated: the batch is abandoned and that entry withdrawn, nothing
    moves, and the others are gated again without it in the next batch (its
    reviewer's request for changes holds)."""

    def run() -> MergeBatch | None:
        batch = MergeBatch.objects.select_for_update().get(pk=batch_id)
        tasks = [item["task_id"] for item in landing]
        left = store.hold_for_batch(tasks, batch.pk, batch.base_branch)
        if left:
            for entry in QueuedLanding.objects.filter(task_id__in=left, state=EntryState.QUEUED):
                withdraw(entry.pk, "left review while its batch gated")
            close_batch(batch.pk, BatchState.ABANDONED, LEFT_REVIEW_WHILE_GATING)
            return None
        batch.state = BatchState.ADVANCING
        batch.target, batch.landing, batch.culprits = target, landing, culprits
        batch.updated_at = timezone.now()
        batch.save(update_fields=["state", "target", "landing", "culprits", "updated_at"])
        return batch

    return storage.write(run)


def close_batch(batch_id: int, state: str, note: str = "") -> None:
    """Close the batch; abandoned, the tasks it held in review are let go."""
    assert state in (BatchState.LANDED, BatchState.ABANDONED)
    at = timezone.now()

    def run() -> None:
        MergeBatch.objects.filter(pk=batch_id, state__in=OPEN_BATCH_STATES).update(
            state=state, note=note[:4000], finished_at=at, updated_at=at, running_gate=""
        )
        if state == BatchState.ABANDONED:
            store.release_batch(batch_id)

    storage.write(run)


def open_batches(repo_path: str) -> list[MergeBatch]:
    return list(MergeBatch.objects.filter(repo_path=repo_path, state__in=OPEN_BATCH_STATES))


# A batch another host opened is judged dead only this long after its last word:
# its host's landing lock is not ours to see, and a gate may run for ten minutes.
FOREIGN_BATCH_S = 900.0


# The note of a batch the recovery abandoned because its job died while gating.
KILLED_WHILE_GATING = "killed while gating"


def batches_died_with(entry: QueuedLanding) -> int:
    """How many batches that stacked ``entry`` since it last entered the line died
    while gating (abandoned by the recovery, :data:`KILLED_WHILE_GATING`)."""
    stacks = MergeBatch.objects.filter(
        repo_path=entry.repo_path,
        state=BatchState.ABANDONED,
        note=KILLED_WHILE_GATING,
        started_at__gte=entry.queued_at,
    ).values_list("stack", flat=True)
    return sum(1 for stack in stacks if any(i.get("entry") == entry.pk for i in stack or ()))


def is_dead(batch: MergeBatch, held_here: bool) -> bool:
    """Whether recovery may settle ``batch``: one this host opened (the caller holds
    the repository's landing lock, so it is not running here), or another host's
    silent for FOREIGN_BATCH_S."""
    if batch.host in ("", socket.gethostname()):
        return held_here
    return (timezone.now() - batch.updated_at) >= dt.timedelta(seconds=FOREIGN_BATCH_S)


# --- what people see ------------------------------------------------------------------


def entry_body(entry: QueuedLanding, position: int | None = None) -> dict[str, Any]:
    return {
        "task_id": entry.task_id,
        "title": entry.task.title,
        "state": entry.state,
        "position": position_of(entry) if position is None else position,
        "base_branch": entry.base_branch,
        "rounds": entry.rounds,
        "rebases": entry.rebases,
        "approved_at": entry.approved_at.isoformat(),
        "queued_at": entry.queued_at.isoformat(),
        "reason": entry.reason,
    }


def batch_body(batch: MergeBatch, theirs: set[str] | None = None) -> dict[str, Any]:
    """A batch as people see it; with ``theirs`` (the ids of one team's tasks in it),
    naming that team's tasks only (two teams may register one checkout: its line is
    one, what each is told is not)."""
    tasks = [item["task_id"] for item in batch.stack]
    culprits = [c["task_id"] for c in batch.culprits]
    if theirs is not None:
        tasks = [t for t in tasks if t in theirs]
        culprits = [t for t in culprits if t in theirs]
    return {
        "id": batch.pk,
        "state": batch.state,
        "base_branch": batch.base_branch,
        "base_before": batch.base_before,
        "target": batch.target,
        "tasks": tasks,
        "running_gate": batch.running_gate or None,
        "gate_runs": batch.gate_runs,
        "gates": [{k: g.get(k) for k in ("commit", "passed", "exit_code")} for g in batch.gates],
        "culprits": culprits,
        "started_at": batch.started_at.isoformat(),
        "finished_at": batch.finished_at.isoformat() if batch.finished_at else None,
    }


RECENT_BATCHES = 10


def queue_of(repo_path: str, team_id: str | None = None) -> dict[str, Any]:
    """The repository's queue as people see it: who waits (and where), who was sent
    back, the batch running (its gate), the last batch that bisected, and the recent
    batches. With ``team_id``: that team's tasks only, at their places in the whole
    line (``length`` is the whole line's), since two teams may register one path."""
    return queues_of([(repo_path, team_id)])[repo_path, team_id]


def queues_of(
    repos: list[tuple[str, str | None]],
) -> dict[tuple[str, str | None], dict[str, Any]]:
    """:func:`queue_of` of each (path, team), in four queries however many there are
    (the board's first view reads every queue of a team): the live entries of all;
    their open and last bisected batches; their recent batches; which team each
    batch's tasks are of."""
    paths = sorted({path for path, _ in repos})
    if not paths:
        return {}
    line: dict[str, list[QueuedLanding]] = {path: [] for path in paths}
    entries = (
        QueuedLanding.objects.filter(repo_path__in=paths, state__in=LIVE_ENTRY_STATES)
        .select_related("task")
        .order_by("queued_at", "id")
    )
    for entry in entries:
        line[entry.repo_path].append(entry)
    last_bisects = (
        MergeBatch.objects.filter(repo_path__in=paths, gate_runs__gt=1)
        .order_by()  # the model's ordering would join the GROUP BY
        .values("repo_path")
        .annotate(last=Max("id"))
        .values("last")
    )
    running: dict[str, MergeBatch] = {}
    bisected: dict[str, MergeBatch] = {}
    batches = MergeBatch.objects.filter(repo_path__in=paths).filter(
        Q(state__in=OPEN_BATCH_STATES) | Q(pk__in=Subquery(last_bisects))
    )
    for batch in batches.order_by("-id"):
        if batch.state in OPEN_BATCH_STATES:
            running.setdefault(batch.repo_path, batch)
        if batch.gate_runs > 1:
            bisected.setdefault(batch.repo_path, batch)
    recent: dict[str, list[MergeBatch]] = {path: [] for path in paths}
    newest_first = Window(RowNumber(), partition_by=F("repo_path"), order_by=F("id").desc())
    for batch in (
        MergeBatch.objects.filter(repo_path__in=paths)
        .annotate(newest=newest_first)
        .filter(newest__lte=RECENT_BATCHES)
        .order_by("-id")
    ):
        recent[batch.repo_path].append(batch)
    shown_batches = [*running.values(), *bisected.values()]
    shown_batches += [b for batches_of in recent.values() for b in batches_of]
    team_of = _teams_of_batch_tasks(shown_batches)
    out = {}
    for path, team in repos:

        def shown(entry: QueuedLanding, team: str | None = team) -> bool:
            return team is None or entry.task.team_id == team

        theirs = None if team is None else {t for t, of in team_of.items() if of == team}
        queued = [e for e in line[path] if e.state == EntryState.QUEUED]
        run, bisect = running.get(path), bisected.get(path)
        out[path, team] = {
            "repo_path": path,
            "length": len(queued),
            "entries": [entry_body(e, n) for n, e in enumerate(queued, start=1) if shown(e)]
            + [entry_body(e, 0) for e in line[path] if e.state == EntryState.RETURNED and shown(e)],
            "running": batch_body(run, theirs) if run is not None else None,
            "last_bisect": batch_body(bisect, theirs) if bisect is not None else None,
            "batches": [batch_body(b, theirs) for b in recent[path]],
        }
    return out


def _teams_of_batch_tasks(batches: list[MergeBatch]) -> dict[str, str]:
    ids = {item["task_id"] for b in batches for item in b.stack}
    ids |= {c["task_id"] for b in batches for c in b.culprits}
    if not ids:
        return {}
    return dict(Task.objects.filter(pk__in=ids).values_list("pk", "team_id"))
