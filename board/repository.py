"""Which repository a task's run works in: answered here, once, by the server.

A local run makes its worktree at the answer's ``path``; a remote worker clones its
``remote`` (the claim's answer carries it, :meth:`RunRepository.as_body`); the
server's intake takes a remote worker's pushed branch into the ``registered`` one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from board.models import Task
from core import registry, repositories
from core.models import Agent, Repository

# Where the answer came from, in :func:`run_repository`'s order: a person reading a
# task (``clawboo task show``) is told why it is worked where it is.
Source = Literal[
    "task", "task_repo_path", "task_repo_remote",
    "agent_default", "agent_repo_path", "agent_repo_remote", "none",
]  # fmt: skip


@dataclass(frozen=True)
class RunRepository:
    """The answer: the team's registered repository (None: a bare path or remote, or
    no repository, and the run works in a scratch directory)."""

    registered: Repository | None = None
    path: str | None = None
    remote: str | None = None
    base_branch: str = ""
    source: Source = "none"

    def as_body(self) -> dict[str, Any]:
        """What the claim's answer says a remote worker clones and starts from."""
        repo = self.registered
        return {
            "id": repo.id if repo else None,
            "remote": self.remote,
            "base_branch": self.base_branch,
        }

    def as_read_body(self) -> dict[str, Any]:
        """What a task's read says its run will work in, and why (``source``)."""
        return {**self.as_body(), "source": self.source}

    @property
    def takes_in(self) -> Repository | None:
        """The registered repository a remote worker's pushed branch is taken into."""
        return self.registered if self.registered is not None and self.registered.remote else None


def _named(repo: Repository | None, base: str, source: Source) -> RunRepository | None:
    if repo is None:
        return None
    return RunRepository(repo, repo.path, repo.remote or None, base or repo.base_branch, source)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def run_repository(
    task: Task, agent: Agent | None = None, *, register: bool = True
) -> RunRepository:
    """In this order: the task's registered repository, the path (``repo_path``) or
    remote (``repo_remote``) its metadata names, the agent's default repository
    (``settings.repository``), the agent's ``repo_path`` or ``repo_remote``. The
    agent defaults to the task's assignee. An agent's own ``repo_path`` is an
    operator's setting (the agent is approved before every run): it registers as its
    team's repository when ``register`` (a local run; a claim's answer only reads)."""
    if agent is None and task.assignee_agent_id:
        agent = registry.find_agent(task.assignee_agent_id)
    team, meta = task.team_id, task.metadata or {}
    conf = (agent.settings or {}) if agent is not None else {}
    base = _text(meta.get("base_branch")) or ""
    if task.repository_id is not None:
        found = _named(repositories.registered(task.repository_id, team), base, "task")
        if found is not None:
            return found
    for source, owned in ((meta, False), (conf, True)):
        if source is conf and (default := _text(conf.get("repository"))):
            found = _named(repositories.registered(default, team), base, "agent_default")
            if found is not None:
                return found
        if path := _text(source.get("repo_path")):
            repo = repositories.registered_path(team, path)
            if repo is None and owned and register and agent is not None and agent.team_id == team:
                repo = repositories.ensure(team, path)
            at: Source = "agent_repo_path" if owned else "task_repo_path"
            return _named(repo, base, at) or RunRepository(path=path, base_branch=base, source=at)
        if remote := _text(source.get("repo_remote")):
            at = "agent_repo_remote" if owned else "task_repo_remote"
            return RunRepository(remote=remote, base_branch=base, source=at)
    return RunRepository(base_branch=base)


def judged_on_server(task: Task) -> bool:
    """Whether a remote worker's work on ``task`` is submitted and taken in by the
    server (its judge, then review): file-mutating work of a registered repository
    with a remote. Its builder never completes it, and its run counts for the
    agent's breaker when its intake ends, not when it closes."""
    return task.file_mutating and run_repository(task, register=False).takes_in is not None
