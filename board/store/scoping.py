"""Scope-aware dispatch: which tasks a claim must not start now, because their
scope (:mod:`board.scope`) overlaps that of a task of the same repository that is
in progress or waiting to land (``in_review``: the merge queue keeps queued work
there until it lands).

"The same repository" is the task's registered repository; tasks naming none
compare with their team's other tasks naming none (they may share the agents'
default checkout). A task with no scope is never held back and holds nothing.

Read inside the claim's transaction (:mod:`board.store.claims`). On SQLite the
claim runs under the database's one write lock, so what it reads here is what it
races against. On PostgreSQL two claims run at once under READ COMMITTED: a claim
that started a scoped task takes an advisory lock keyed on that task's repository
(:func:`confirm_apart`) and looks again -- its new statement sees every claim
committed before it got the lock -- and a claim that finds an overlap there undoes
itself (:class:`ScopeRace`) and runs again. Claims of unscoped tasks take no lock.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection

from board.models import Task
from board.scope import one_budget, overlapping
from board.transitions import Status

_T = Task._meta.db_table
# Waiting to land holds its paths as much as working does. Literals, for the
# partial index tasks_scope_busy_idx.
BUSY_STATUSES = (Status.IN_PROGRESS, Status.IN_REVIEW)
_BUSY = f"{_T}.status IN ('{Status.IN_PROGRESS}', '{Status.IN_REVIEW}') AND {_T}.scope IS NOT NULL"
_COLUMNS = f"{_T}.id, {_T}.status, {_T}.repository_id, {_T}.team_id, {_T}.scope"
_BUSY_IN_REPOSITORY_SQL = (
    f"SELECT {_COLUMNS} FROM {_T} WHERE {_BUSY} AND {_T}.repository_id = %s "  # noqa: S608
    f"AND {_T}.id <> %s ORDER BY {_T}.id"
)
_BUSY_IN_TEAM_DEFAULT_SQL = (
    f"SELECT {_COLUMNS} FROM {_T} WHERE {_BUSY} AND {_T}.repository_id IS NULL "  # noqa: S608
    f"AND {_T}.team_id = %s AND {_T}.id <> %s ORDER BY {_T}.id"
)
# Every scoped task in flight: a walk of the partial index (its entries are the rows).
# SQLite is told the index: without statistics it would rather search the status
# index, whose in_review range grows with the work waiting for review.
_ALL_BUSY_SQL = {
    "sqlite": f"SELECT {_COLUMNS} FROM {_T} INDEXED BY tasks_scope_busy_idx WHERE {_BUSY}",  # noqa: S608
    "postgresql": f"SELECT {_COLUMNS} FROM {_T} WHERE {_BUSY}",  # noqa: S608
}


@dataclass(frozen=True)
class Hold:
    """Why a task waits: its glob ``mine`` overlaps ``theirs`` of task ``task_id``,
    which is ``status``."""

    task_id: str
    status: str
    mine: str
    theirs: str

    def sentence(self) -> str:
        doing = "in progress" if self.status == Status.IN_PROGRESS else "waiting to land"
        same = self.mine if self.mine == self.theirs else f"{self.mine} (it touches {self.theirs})"
        return f"waiting: touches {same} like task {self.task_id!r} {doing}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task_id,
            "status": self.status,
            "touches": self.mine,
            "theirs": self.theirs,
            "detail": self.sentence(),
        }


class ScopeRace(Exception):
    """A claim found, under its repository's lock, that a racer committed an
    overlapping start first: the claim's transaction is rolled back and run again
    (which then sees the racer's task and passes over, or refuses, this one)."""


def _scope(value: Any) -> list[str]:
    if isinstance(value, str):  # a raw row's JSON text (SQLite)
        value = json.loads(value)
    return [str(g) for g in value or ()]


def _key(repository_id: str | None, team_id: str) -> tuple[str, str]:
    return ("repository", repository_id) if repository_id is not None else ("team", team_id)


def hold_on(task: Task) -> Hold | None:
    """The first task of ``task``'s repository in progress or waiting to land whose
    scope overlaps ``task``'s, or None (also for a task with no scope)."""
    mine = _scope(task.scope)
    if not mine:
        return None
    if task.repository_id is not None:
        sql, params = _BUSY_IN_REPOSITORY_SQL, [task.repository_id, task.id]
    else:
        sql, params = _BUSY_IN_TEAM_DEFAULT_SQL, [task.team_id, task.id]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    with one_budget():
        for other_id, status, _repo, _team, theirs in rows:
            pair = overlapping(mine, _scope(theirs))
            if pair is not None:
                return Hold(other_id, status, *pair)
    return None


def held_back(candidate_teams: Iterable[str] | None = None) -> dict[str, Hold]:
    """Every ready, unassigned, scoped task a claim-next must pass over now, with
    why. One probe of the (nearly always empty) busy index first; with work in
    flight, the ready scoped tasks of those repositories only."""
    with connection.cursor() as cursor:
        cursor.execute(_ALL_BUSY_SQL[connection.vendor])
        busy = cursor.fetchall()
    if not busy:
        return {}
    by_key: dict[tuple[str, str], list[tuple[str, str, list[str]]]] = {}
    for other_id, status, repo, team, theirs in busy:
        by_key.setdefault(_key(repo, team), []).append((other_id, status, _scope(theirs)))
    repos = sorted({k[1] for k in by_key if k[0] == "repository"})
    teams = sorted({k[1] for k in by_key if k[0] == "team"})
    by_candidates: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    for task_id, repo, team, scope in _waiting_candidates(repos, teams, candidate_teams):
        by_candidates.setdefault(_key(repo, team), []).append((task_id, scope))
    holds: dict[str, Hold] = {}
    for key, candidates in by_candidates.items():
        # One budget per repository: its hard scopes hold its own tasks, no one else's.
        with one_budget():
            for task_id, scope in candidates:
                mine = _scope(scope)  # once per task, not per task it is compared with
                for other_id, status, theirs in by_key.get(key, ()):
                    pair = overlapping(mine, theirs)
                    if pair is not None:
                        holds[task_id] = Hold(other_id, status, *pair)
                        break
    return holds


def _waiting_candidates(
    repos: list[str], teams: list[str], candidate_teams: Iterable[str] | None
) -> list[tuple[Any, ...]]:
    chosen = None if candidate_teams is None else list(candidate_teams)
    if chosen == []:
        return []
    with connection.cursor() as cursor:
        cursor.execute(*waiting_sql(repos, teams, chosen))
        return cursor.fetchall()


def waiting_sql(
    repos: list[str], teams: list[str], chosen: list[str] | None
) -> tuple[str, list[Any]]:
    """The todo, unassigned, scoped tasks of these repositories (and of these teams'
    unnamed one; of the ``chosen`` teams only): a walk of tasks_scope_todo_idx, whose
    literal 'todo' the statement repeats so both planners match the partial index."""
    where = []
    params: list[Any] = []
    if repos:
        where.append(f"{_T}.repository_id IN ({', '.join(['%s'] * len(repos))})")
        params += repos
    if teams:
        where.append(
            f"({_T}.repository_id IS NULL AND {_T}.team_id IN ({', '.join(['%s'] * len(teams))}))"
        )
        params += teams
    sql = (
        f"SELECT {_T}.id, {_T}.repository_id, {_T}.team_id, {_T}.scope FROM {_T}"  # noqa: S608
        + (" INDEXED BY tasks_scope_todo_idx" if connection.vendor == "sqlite" else "")
        + f" WHERE {_T}.status = '{Status.TODO}' AND {_T}.scope IS NOT NULL"
        f" AND {_T}.assignee_agent_id IS NULL AND ({' OR '.join(where)})"
    )
    if chosen is not None:
        sql += f" AND {_T}.team_id IN ({', '.join(['%s'] * len(chosen))})"
        params += chosen
    return sql, params


def _lock_key(repository_id: str | None, team_id: str) -> int:
    """A signed 64-bit advisory-lock key for one repository (or one team's
    unnamed repository)."""
    kind, name = _key(repository_id, team_id)
    digest = hashlib.sha256(f"clawboo-scope:{kind}:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def confirm_apart(task: Task) -> None:
    """After a claim started scoped ``task`` (in its transaction): on PostgreSQL,
    take its repository's advisory lock (held to commit) and look again; raise
    :class:`ScopeRace` if a racer's overlapping start committed first. SQLite's
    write lock already ordered the claims: nothing to do."""
    if connection.vendor != "postgresql" or not _scope(task.scope):
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s)", [_lock_key(task.repository_id, task.team_id)]
        )
    if hold_on(task) is not None:
        raise ScopeRace(task.id)
