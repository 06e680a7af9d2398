"""The board in process, as a local run sees it: the in-process port of
:class:`executor.attempt.Attempt` (the store's heartbeat and spend writes, a
database outage waited out while the run goes on) and the run's checkout on this
host (the task's repository, its worktree brought up to date with the board)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from board import store
from board.models import Task
from core import reconnect, repositories
from core.models import Agent
from core.runlogs import RunLog
from executor import pricing, spending
from executor.attempt import Answer
from executor.runtimes.base import UsageSoFar
from worktrees import agent_files, scaffold
from worktrees import service as worktree_service

if TYPE_CHECKING:
    from executor.runner import WorkReport


class Clock:
    """Wall time per phase (git, runtime, board, verify) for the end-to-end bench."""

    def __init__(self, report: WorkReport) -> None:
        self.report = report

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            spent = time.perf_counter() - start
            self.report.timings[name] = self.report.timings.get(name, 0.0) + spent


def tee(
    log: RunLog | None, then: Callable[[str, str], None] | None
) -> Callable[[str, str], None] | None:
    """One output callback that writes the run's log and calls the caller's own."""
    if log is None:
        return then

    def both(stream: str, line: str) -> None:
        log.write(stream, line)
        if then is not None:
            then(stream, line)

    return both


class LocalBoard:
    """The board in process, as a local run sees it (:class:`executor.attempt.Board`):
    the store's heartbeat and spend writes, a database outage waited out while the
    run goes on."""

    def __init__(
        self,
        task: Task,
        ticket: str,
        execution_id: int | None,
        clock: Clock,
        output: Callable[[str, str], None] | None,
        heartbeat_s: float,
        ceiling: int | None,
    ) -> None:
        self.task, self.ticket, self.execution_id = task, ticket, execution_id
        self.clock, self._output, self.heartbeat_s = clock, output, heartbeat_s
        self.ceiling = ceiling
        self.outage = reconnect.Outage(f"run of task {task.id}")
        self.board_s = 0.0  # time the run's loop spent on the board

    @contextmanager
    def _board(self) -> Iterator[None]:
        start = time.perf_counter()
        with self.clock.phase("board"):
            yield
        self.board_s += time.perf_counter() - start

    def beat(self) -> float | None:
        try:
            with self._board():
                beat = store.heartbeat(self.task.id, self.ticket)
        except Exception as exc:
            if not reconnect.is_unavailable(exc):
                raise
            # The database is away: the run goes on, and the beat is tried again
            # soon. If the lease lapses meanwhile, the first beat that gets through
            # is declined and cancels the run.
            return self.outage.lost(exc)
        self.outage.ok()
        return None if beat.declined else self.heartbeat_s

    def report(self, usage: UsageSoFar) -> Answer:
        if self.execution_id is None:
            return Answer()
        try:
            with self._board():
                why = spending.record(self.execution_id, pricing.usage_of(usage), self.ceiling)
        except Exception as exc:
            if not reconnect.is_unavailable(exc):
                raise
            # The database is away: this report is not written; the run's close
            # writes its final usage.
            return Answer()
        return Answer(stop=why)

    def over(self, usage: UsageSoFar) -> str | None:
        if self.ceiling is None:
            return None
        return spending.ceiling_reached(pricing.usage_of(usage), self.ceiling)

    def output(self, stream: str, line: str) -> None:
        if self._output is not None:
            self._output(stream, line)


def repo_path(task: Task, agent: Agent) -> str | None:
    """Where the task's worktree is made: the task's repository, else the path its
    metadata names, else the agent's default repository (``settings.repository``)
    or path (``settings.repo_path``). Whatever it is, the worktree service makes a
    worktree only in a registered repository of the task's team."""
    if task.repository_id is not None:
        named = repositories.registered(task.repository_id, task.team_id)
        if named is not None:
            return named.path
    value = (task.metadata or {}).get("repo_path")
    if isinstance(value, str) and value:
        return value
    conf = agent.settings or {}
    default = conf.get("repository")
    if isinstance(default, str) and default:
        named = repositories.registered(default, task.team_id)
        if named is not None:
            return named.path
    value = conf.get("repo_path")
    if not isinstance(value, str) or not value:
        return None
    if agent.team_id == task.team_id and repositories.registered_path(task.team_id, value) is None:
        # The agent's settings are an operator's (approved before every run, see
        # _dispatch_refusal): its path registers as its team's repository.
        return repositories.ensure(task.team_id, value).path
    return value


def workspace(
    task: Task, agent: Agent, worktrees: bool, clock: Clock
) -> tuple[Path, bool, str | None]:
    """The task's checkout (provisioned, resumed, or rebuilt from its branch when
    the row is stale or the directory is gone), or a scratch dir for work that
    needs no worktree; and the checkout's HEAD when provisioning already knows it."""
    repo = repo_path(task, agent)
    if worktrees and task.file_mutating and repo:
        with clock.phase("git"):
            ws, head = worktree_service.checkout_for_run(task.id, repo)
            write_context(Path(ws.worktree_path), task, agent)
        return Path(ws.worktree_path), True, head
    scratch = Path(settings.CLAWBOO_STATE_DIR) / "scratch" / task.id
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch, False, None


def write_context(worktree: Path, task: Task, agent: Agent) -> None:
    """Bring TASK.md up to date with the board: this attempt, who runs it, and the
    feedback of the last one, so the checkout alone tells a runtime where it is."""
    path = worktree / scaffold.TASK_FILE
    try:  # what the agent left there: a regular file, read under a deadline
        text = agent_files.read_text(path)
    except (OSError, ValueError):
        text = f"# {task.title}\n"
    marker = "\n## Latest from the board\n"
    text = text.split(marker, 1)[0].rstrip("\n") + "\n"
    lines = [
        f"- attempt {task.attempts}"
        + (f" of {task.max_attempts}" if task.max_attempts else "")
        + f", run by {agent.display_name} ({agent.runtime})",
    ]
    if task.feedback:
        # A reviewer's requested changes, or why the previous attempt failed.
        lines.append(f"- feedback from the previous attempt: {task.feedback}")
    if task.error:
        lines.append(f"- last error: {task.error}")
    agent_files.write_text(path, text + marker + "\n".join(lines) + "\n")
