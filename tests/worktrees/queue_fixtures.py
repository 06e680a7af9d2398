"""A repository landing through its merge queue, tasks its builder hands to review,
and a gate the tests can count and re-run at any commit."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from board import store
from tests.conftest import ROOT
from tests.fixtures.gitrepos import git
from worktrees import service


def host_env(database_url: str, state: Path, **extra: str) -> dict[str, str]:
    """The environment of a job process (a merge-queue drain, another host's server)
    on this test's database and repository roots, its state dir ``state``."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
        "CLAWBOO_STATE_DIR": str(state),
        "CLAWBOO_REPO_ROOTS": os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        **extra,
    }


# Red only when two tasks' flags meet: each change is green alone.
GATE = "sleep {pause}; echo run >> {log}; ! {{ [ -e a.flag ] && [ -e b.flag ]; }}"


class Harness:
    def __init__(self, repo: Path, log: Path, command: str) -> None:
        self.repo, self.log, self.command = repo, log, command
        self.kicks: list[str] = []

    def gate_runs(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0

    def passes_at(self, commit: str, scratch: Path) -> bool:
        """The gate, run by the test at ``commit`` of the repository."""
        if scratch.exists():
            git(self.repo, "worktree", "remove", "--force", str(scratch))
        git(self.repo, "worktree", "add", "--detach", "-q", str(scratch), commit)
        try:
            check = self.command.replace(f">> {self.log}", ">> /dev/null")
            return subprocess.run(["bash", "-c", check], cwd=scratch, timeout=60).returncode == 0
        finally:
            git(self.repo, "worktree", "remove", "--force", str(scratch))

    def base_history(self, since: str) -> list[str]:
        out = git(self.repo, "rev-list", "--first-parent", f"{since}..main")
        return out.splitlines()

    def in_review(self, title: str, files: dict[str, str], **fields: object) -> str:
        """A task (``fields``: its own, e.g. ``metadata``) its builder worked (``files``
        written in its checkout) and handed to review."""
        task = store.create_task(title=title, **fields).task
        assert store.claim(task.id, "builder").outcome == "ok"
        ws = service.provision_task_workspace(task.id, str(self.repo))
        for name, text in files.items():
            (Path(ws.worktree_path) / name).write_text(text)
        assert service.complete(task.id, checkpoint=True)["result"] == "retained"
        assert store.get_task(task.id).status == "in_review"
        return task.id

    def fix_round(self, task_id: str, edit: Callable[[Path], None]) -> None:
        """The builder's fix round: the task is back in progress, claimed for it;
        it edits its checkout and hands it to review again (a person approves it back
        into the line)."""
        task = store.get_task(task_id)
        assert task.status == "in_progress" and task.assignee_agent_id == "builder"
        path = Path(store.get_workspace(task_id).worktree_path)
        edit(path)
        assert service.complete(task_id, checkpoint=True)["result"] == "retained"

    def landed_ids(self) -> list[str]:
        body = git(self.repo, "log", "--format=%b", "main")
        return [line.split()[-1] for line in body.splitlines() if line.startswith("clawboo: land")]
