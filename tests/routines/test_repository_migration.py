"""The data migration: existing ``repo_path`` data becomes registered repositories."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.apps import apps

from board.models import Task
from core import registry
from core.models import Repository
from routines.models import Routine
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db

migration = importlib.import_module("routines.migrations.0002_register_repositories")


def test_repo_paths_in_tasks_and_templates_become_their_teams_repositories(
    tmp_path: Path, settings
):
    root = (tmp_path / "repos").resolve()
    settings.CLAWBOO_REPO_ROOTS = [root]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    repo = make_repo(root / "app")
    (root / "link").symlink_to(repo)
    registry.create_team("other", "Other")
    agent = registry.create_agent(
        id="bot", display_name="Bot", team="default", runtime="command", settings={}
    )
    # Rows as they were before repositories: written around the data layer's rule.
    now = "2026-01-01T00:00:00Z"
    for n, (team, path) in enumerate(
        [
            ("default", str(repo)),
            ("default", str(root / "link")),
            ("other", str(repo)),
            ("default", str(root / "missing")),
        ]
    ):
        Task.objects.create(
            id=f"t{n}",
            team_id=team,
            title="t",
            metadata={"repo_path": path},
            incarnation_id="x",
            created_at=now,
            updated_at=now,
        )
    routine = Routine.objects.create(
        id="r1",
        agent=agent,
        team_id="default",
        cron_spec="0 9 * * *",
        timezone="UTC",
        task_template={"title": "t", "repo_path": str(root / "link")},
        created_at=now,
        updated_at=now,
    )

    migration.register_repositories(apps, None)

    rows = {(r.team_id, r.path) for r in Repository.objects.all()}
    assert rows == {("default", str(repo)), ("other", str(repo))}
    ours = Repository.objects.get(team_id="default")
    theirs = Repository.objects.get(team_id="other")
    linked = dict(Task.objects.values_list("id", "repository_id"))
    assert linked == {"t0": ours.id, "t1": ours.id, "t2": theirs.id, "t3": None}
    routine.refresh_from_db()
    assert routine.task_template["repository"] == ours.id
