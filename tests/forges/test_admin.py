"""The admin's Forges page: the token and webhook secret are password fields that never
show their value, and a blank one keeps what is stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from core import repositories
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db


def test_staff_set_a_forge_in_the_admin_and_never_see_its_token(tmp_path: Path, settings):
    settings.CLAWBOO_REPO_ROOTS = [tmp_path.resolve()]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    repositories.register(team="default", path=str(make_repo(tmp_path / "app")), id="app")
    staff = get_user_model().objects.create_superuser("root", "root@x.invalid", "pw")
    client = Client()
    client.force_login(staff)
    form = {
        "repository": "app",
        "kind": "gitea",
        "api_url": "https://gitea.example.org/api/v1",
        "repo": "octo/app",
        "token": "admin-typed-token-1",
        "webhook_secret": "",
        "merge_method": "squash",
        "required_checks": "ci, lint",
    }
    added = client.post("/admin/clawboo/forge/add/", form)
    assert added.status_code == 302, added.content.decode()[:2000]
    stored = repositories.forge_of("app")
    assert stored is not None and stored.token == "admin-typed-token-1"
    assert stored.required_checks == ["ci", "lint"]
    page = client.get("/admin/clawboo/forge/app/change/").content.decode()
    assert "admin-typed-token-1" not in page
    changed = client.post(
        "/admin/clawboo/forge/app/change/", {**form, "token": "", "repo": "octo/app2"}
    )
    assert changed.status_code == 302
    stored = repositories.forge_of("app")
    assert stored.token == "admin-typed-token-1" and stored.repo == "octo/app2"


def test_an_export_carries_the_forge_without_its_secrets_and_imports_back(tmp_path: Path, settings):
    from core.models import Forge, Repository
    from ops.transfer import ExportReport, export_lines, import_lines

    settings.CLAWBOO_REPO_ROOTS = [tmp_path.resolve()]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    repositories.register(
        team="default",
        path=str(make_repo(tmp_path / "app")),
        id="app",
        forge={
            "kind": "github",
            "api_url": "https://api.github.com",
            "repo": "o/app",
            "token": "export-never-token",
            "webhook_secret": "export-never-secret",
        },
    )
    report = ExportReport()
    lines = list(export_lines(report=report))
    text = "".join(lines)
    assert "export-never-token" not in text and "export-never-secret" not in text
    assert report.redacted == [
        "forge of repository app: token",
        "forge of repository app: webhook_secret",
    ]
    Forge.objects.all().delete()
    Repository.objects.all().delete()
    from board.models import Task

    Task.objects.all().delete()
    get_user_model().objects.all().delete()
    from core.models import Team

    Team.objects.all().delete()
    import_lines(lines)
    restored = repositories.forge_of("app")
    assert restored is not None and restored.repo == "o/app" and restored.token == ""
