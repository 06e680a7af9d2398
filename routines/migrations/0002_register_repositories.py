"""Existing ``repo_path`` data becomes registered repositories of the teams.

One repository per distinct (team, real path) found in task metadata, workspaces,
routine templates and agent settings; tasks and routine templates are linked to
theirs (``tasks.repository``, ``task_template.repository``). A path that is not
(any longer) a git repository's top level inside ``CLAWBOO_REPO_ROOTS`` is left
unregistered: no worktree is made there any more.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.db import migrations


def _real(path: Any) -> str | None:
    from core.errors import ValidationFailed
    from core.repositories import resolve_path

    if not isinstance(path, str) or not path:
        return None
    try:
        return str(resolve_path(path))
    except ValidationFailed:
        return None


def register_repositories(apps: Any, schema_editor: Any) -> None:
    Repository = apps.get_model("clawboo", "Repository")
    Agent = apps.get_model("clawboo", "Agent")
    Task = apps.get_model("board", "Task")
    Workspace = apps.get_model("board", "Workspace")
    Routine = apps.get_model("routines", "Routine")
    known: dict[tuple[str, str], str] = {
        (r.team_id, r.path): r.id for r in Repository.objects.all()
    }
    reals: dict[str, str | None] = {}

    def repository(team_id: str, raw: Any) -> str | None:
        if raw not in reals:
            reals[raw] = _real(raw)
        real = reals[raw]
        if real is None:
            return None
        key = (team_id, real)
        if key not in known:
            stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(real).name).strip(".-_")[:100] or "repo"
            rid, n = stem, 1
            while Repository.objects.filter(pk=rid).exists():
                n += 1
                rid = f"{stem}-{n}"
            Repository.objects.create(id=rid, team_id=team_id, path=real)
            known[key] = rid
        return known[key]

    for task in Task.objects.filter(repository__isnull=True).iterator():
        raw = (task.metadata or {}).get("repo_path")
        rid = repository(task.team_id, raw) if raw else None
        if rid is not None:
            Task.objects.filter(pk=task.pk).update(repository_id=rid)
    for ws in Workspace.objects.select_related("task").iterator():
        rid = repository(ws.task.team_id, ws.repo_path)
        if rid is not None:
            Task.objects.filter(pk=ws.task_id, repository__isnull=True).update(repository_id=rid)
    for routine in Routine.objects.all().iterator():
        template = dict(routine.task_template or {})
        raw = template.get("repo_path")
        rid = repository(routine.team_id, raw) if raw and not template.get("repository") else None
        if rid is not None:
            template["repository"] = rid
            Routine.objects.filter(pk=routine.pk).update(task_template=template)
    for agent in Agent.objects.all().iterator():
        raw = (agent.settings or {}).get("repo_path")
        if raw:
            repository(agent.team_id, raw)


class Migration(migrations.Migration):
    dependencies = [
        ("routines", "0001_initial"),
        ("board", "0011_task_repository"),
        ("clawboo", "0011_repository"),
    ]

    operations = [migrations.RunPython(register_repositories, migrations.RunPython.noop)]
