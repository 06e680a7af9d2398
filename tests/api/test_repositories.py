"""``/api/repositories``: staff register a team's repositories; members read their own
teams'; tasks, agents and routine templates name them by id."""

from __future__ import annotations

from pathlib import Path

import pytest

from board import store
from core import registry, repositories
from core.models import Repository
from tests.api.conftest import make_client
from tests.fixtures.gitrepos import make_repo

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(tmp_path: Path, settings) -> Path:
    base = (tmp_path / "repos").resolve()
    base.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [base]
    settings.CLAWBOO_STATE_DIR = (tmp_path / "state").resolve()
    return base


@pytest.fixture
def other_team(db):
    registry.create_team("other", "Other")
    return "other"


def test_staff_register_a_repository_by_its_real_path(staff_api, root: Path):
    repo = make_repo(root / "app")
    (root / "link").symlink_to(repo)
    made = staff_api.post(
        "/api/repositories",
        {"team": "default", "path": str(root / "link"), "verify_cmd": "make test"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["path"] == str(repo)
    assert (body["id"], body["team"], body["verify_cmd"]) == ("app", "default", "make test")
    dotted = staff_api.post(
        "/api/repositories",
        {"team": "default", "path": f"{root}/x/../app", "id": "again"},
        format="json",
    )
    # The same real path twice for one team is one repository.
    assert dotted.status_code == 409
    assert dotted.json()["field"] == "path"


def test_a_path_outside_the_roots_or_below_the_top_level_is_refused(
    staff_api, root: Path, tmp_path: Path
):
    outside = make_repo(tmp_path / "elsewhere")
    inside = make_repo(root / "app")
    (inside / "sub").mkdir()
    for path in (outside, inside / "sub", root / "missing", "relative/path"):
        answer = staff_api.post(
            "/api/repositories", {"team": "default", "path": str(path)}, format="json"
        )
        assert answer.status_code == 400, path
        assert answer.json()["field"] == "path"
    assert not Repository.objects.exists()


def test_a_member_may_not_register_and_learns_nothing_about_the_path(api, root: Path):
    real = make_repo(root / "app")
    answers = [
        api.post("/api/repositories", {"team": "default", "path": str(path)}, format="json")
        for path in (real, root / "missing", "/etc")
    ]
    assert {a.status_code for a in answers} == {403}
    assert len({a.json()["detail"] for a in answers}) == 1
    assert not Repository.objects.exists()


def test_members_read_their_teams_repositories_and_another_teams_is_unknown(
    api, staff_api, root: Path, other_team: str
):
    mine = repositories.register(team="default", path=str(make_repo(root / "mine")))
    theirs = repositories.register(team=other_team, path=str(make_repo(root / "theirs")))
    assert [r["id"] for r in api.get("/api/repositories").json()] == [mine.id]
    assert {r["id"] for r in staff_api.get("/api/repositories").json()} == {mine.id, theirs.id}
    assert api.get(f"/api/repositories/{mine.id}").status_code == 200
    for method in ("get", "patch", "delete"):
        answer = getattr(api, method)(f"/api/repositories/{theirs.id}", {}, format="json")
        assert answer.status_code == 404, method
    assert api.patch(f"/api/repositories/{mine.id}", {"verify_cmd": "x"}).status_code == 403
    assert api.delete(f"/api/repositories/{mine.id}").status_code == 403
    assert Repository.objects.get(pk=mine.id).verify_cmd == ""


def test_staff_edit_and_delete_and_the_task_then_names_none(staff_api, root: Path):
    repo = repositories.register(team="default", path=str(make_repo(root / "app")))
    task = store.create_task(title="t", repository=repo.id).task
    assert task.as_dict()["repository"] == repo.id
    edited = staff_api.patch(
        f"/api/repositories/{repo.id}",
        {"base_branch": "main", "landing": "merge", "install_cmd": "pip install -e ."},
        format="json",
    )
    assert edited.status_code == 200, edited.json()
    assert (edited.json()["landing"], edited.json()["base_branch"]) == ("merge", "main")
    bad = staff_api.patch(f"/api/repositories/{repo.id}", {"landing": "rebase"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "landing"
    assert staff_api.delete(f"/api/repositories/{repo.id}").status_code == 204
    assert store.get_task(task.id).repository_id is None


def test_a_task_names_its_teams_repository_and_another_teams_is_a_400(
    api, root: Path, other_team: str
):
    mine = repositories.register(team="default", path=str(make_repo(root / "mine")))
    theirs = repositories.register(team=other_team, path=str(make_repo(root / "theirs")))
    made = api.post("/api/board/tasks", {"title": "t", "repository": mine.id}, format="json")
    assert made.status_code == 201 and made.json()["repository"] == mine.id
    refused = api.post("/api/board/tasks", {"title": "t", "repository": theirs.id}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "repository"
    task_id = made.json()["id"]
    edit = api.patch(f"/api/board/tasks/{task_id}", {"repository": theirs.id}, format="json")
    assert edit.status_code == 400 and edit.json()["field"] == "repository"
    cleared = api.patch(f"/api/board/tasks/{task_id}", {"repository": None}, format="json")
    assert cleared.json()["repository"] is None


def test_a_staff_repo_path_resolves_to_or_registers_the_teams_repository(staff_api, root: Path):
    repo = make_repo(root / "app")
    (root / "link").symlink_to(repo)
    made = staff_api.post(
        "/api/board/tasks",
        {"title": "t", "metadata": {"repo_path": str(root / "link")}},
        format="json",
    )
    assert made.status_code == 201, made.json()
    registered = Repository.objects.get(team_id="default")
    assert registered.path == str(repo)
    assert made.json()["repository"] == registered.id
    again = staff_api.post(
        "/api/board/tasks", {"title": "u", "metadata": {"repo_path": str(repo)}}, format="json"
    )
    assert again.json()["repository"] == registered.id
    assert Repository.objects.count() == 1


def test_a_members_repo_path_must_be_a_registered_path_and_says_nothing_else(api, root: Path):
    registered = repositories.register(team="default", path=str(make_repo(root / "mine")))
    unregistered = make_repo(root / "loose")
    linked = api.post(
        "/api/board/tasks",
        {"title": "t", "metadata": {"repo_path": registered.path}},
        format="json",
    )
    assert linked.status_code == 201 and linked.json()["repository"] == registered.id
    answers = [
        api.post("/api/board/tasks", {"title": "t", "metadata": {"repo_path": p}}, format="json")
        for p in (str(unregistered), str(root / "missing"), "/etc", f"{root}/mine/../loose")
    ]
    assert {a.status_code for a in answers} == {400}
    assert {a.json()["field"] for a in answers} == {"metadata.repo_path"}
    assert len({a.json()["detail"] for a in answers}) == 1
    assert Repository.objects.count() == 1


def test_an_agents_default_repository_is_one_of_its_team(staff_api, root: Path, other_team: str):
    theirs = repositories.register(team=other_team, path=str(make_repo(root / "theirs")))
    answer = staff_api.post(
        "/api/agents",
        {
            "id": "bot",
            "display_name": "Bot",
            "team": "default",
            "runtime": "command",
            "settings": {"argv": ["true"], "repository": theirs.id},
        },
        format="json",
    )
    assert answer.status_code == 400 and answer.json()["field"] == "settings.repository"


def test_a_routine_template_names_its_teams_repository(staff_api, api, root: Path, other_team: str):
    registry.create_agent(
        id="ada-bot",
        display_name="Ada",
        team="default",
        runtime="command",
        settings={"argv": ["true"]},
        owner=api.user,
    )
    theirs = repositories.register(team=other_team, path=str(make_repo(root / "theirs")))
    loose = make_repo(root / "loose")
    base = {"agent_id": "ada-bot", "team": "default", "cron_spec": "0 9 * * *"}
    refused = api.post(
        "/api/routines", {**base, "task_template": {"repository": theirs.id}}, format="json"
    )
    assert refused.status_code == 400
    assert refused.json()["field"] == "task_template.repository"
    by_path = api.post(
        "/api/routines", {**base, "task_template": {"repo_path": str(loose)}}, format="json"
    )
    assert by_path.status_code == 400
    assert by_path.json()["field"] == "task_template.repo_path"
    staff = staff_api.post(
        "/api/routines", {**base, "task_template": {"repo_path": str(loose)}}, format="json"
    )
    assert staff.status_code == 201, staff.json()
    named = staff.json()["task_template"]["repository"]
    assert Repository.objects.get(pk=named).path == str(loose)


def test_a_second_member_of_another_team_cannot_name_my_repository(root: Path, other_team):
    mine = repositories.register(team="default", path=str(make_repo(root / "mine")))
    stranger = make_client("eve", teams=(other_team,))
    answer = stranger.post(
        "/api/board/tasks",
        {"title": "t", "team": other_team, "repository": mine.id},
        format="json",
    )
    assert answer.status_code == 400 and answer.json()["field"] == "repository"


def test_an_agents_owner_may_pick_its_default_among_the_teams_repositories(
    api, root: Path, settings
):
    settings.CLAWBOO_AGENT_ALLOWLIST = [{"runtime": "claude-code", "settings": {}}]
    shop = repositories.register(team="default", path=str(make_repo(root / "shop")))
    body = {
        "id": "cc",
        "display_name": "CC",
        "team": "default",
        "runtime": "claude-code",
        "settings": {"repository": shop.id},
    }
    made = api.post("/api/agents", body, format="json")
    assert made.status_code == 201, made.json()
    assert registry.get_agent("cc").settings == {"repository": shop.id}


def test_a_subtask_naming_no_repository_works_in_its_parents(api, root: Path):
    shop = repositories.register(team="default", path=str(make_repo(root / "shop")))
    parent = api.post("/api/board/tasks", {"title": "p", "repository": shop.id}, format="json")
    child = api.post(
        "/api/board/tasks", {"title": "c", "parent_task_id": parent.json()["id"]}, format="json"
    )
    assert child.status_code == 201 and child.json()["repository"] == shop.id


def test_a_subtask_in_its_parents_repository_lands_on_its_parents_branch(api, root: Path):
    shop = repositories.register(team="default", path=str(make_repo(root / "shop")))
    parent = api.post(
        "/api/board/tasks",
        {"title": "p", "repository": shop.id, "metadata": {"base_branch": "release"}},
        format="json",
    ).json()
    child = api.post(
        "/api/board/tasks", {"title": "c", "parent_task_id": parent["id"]}, format="json"
    )
    assert child.status_code == 201, child.json()
    assert child.json()["metadata"]["base_branch"] == "release"
    assert store.get_task(child.json()["id"]).metadata == {"base_branch": "release"}
    # One that names its own branch, or another repository, keeps what it named.
    own = api.post(
        "/api/board/tasks",
        {"title": "o", "parent_task_id": parent["id"], "metadata": {"base_branch": "hotfix"}},
        format="json",
    )
    assert own.json()["metadata"]["base_branch"] == "hotfix"
    elsewhere = repositories.register(team="default", path=str(make_repo(root / "docs")))
    apart = api.post(
        "/api/board/tasks",
        {"title": "d", "parent_task_id": parent["id"], "repository": elsewhere.id},
        format="json",
    )
    assert "base_branch" not in apart.json()["metadata"]


def test_a_repository_lands_directly_unless_told_another_landing_mode(staff_api, root: Path):
    make_repo(root / "lm")
    made = staff_api.post(
        "/api/repositories", {"team": "default", "path": str(root / "lm")}, format="json"
    )
    assert made.json()["landing_mode"] == "direct"
    changed = staff_api.patch("/api/repositories/lm", {"landing_mode": "queue"}, format="json")
    assert changed.status_code == 200, changed.json()
    assert changed.json()["landing_mode"] == "queue"
    refused = staff_api.patch("/api/repositories/lm", {"landing_mode": "yolo"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["field"] == "landing_mode"
    assert Repository.objects.get(pk="lm").landing_mode == "queue"


def test_a_repository_names_its_forge_and_the_token_is_never_shown(staff_api, root: Path):
    make_repo(root / "app")
    made = staff_api.post(
        "/api/repositories",
        {
            "team": "default",
            "path": str(root / "app"),
            "landing_mode": "pull_request",
            "forge": {
                "kind": "github",
                "api_url": "https://api.github.com/",
                "repo": "octo/app",
                "token": "ghp_secret_value_1",
                "webhook_secret": "hook-secret-1",
                "merge_method": "squash",
            },
        },
        format="json",
    )
    assert made.status_code == 201, made.json()
    forge = made.json()["forge"]
    assert forge["token"] == "********" and forge["webhook_secret"] == "********"
    assert forge["api_url"] == "https://api.github.com" and forge["merge_method"] == "squash"
    assert forge["webhook_url"] == "/api/repositories/app/forge/webhook"
    # A read-edit-write round trip keeps the secrets it never saw.
    forge.pop("webhook_url")
    forge["repo"] = "octo/app2"
    changed = staff_api.patch("/api/repositories/app", {"forge": forge}, format="json")
    assert changed.status_code == 200, changed.json()
    stored = repositories.forge_of("app")
    assert stored is not None and stored.token == "ghp_secret_value_1"
    assert stored.webhook_secret == "hook-secret-1" and stored.repo == "octo/app2"
    listed = staff_api.get("/api/repositories").content.decode()
    assert "ghp_secret_value_1" not in listed and "hook-secret-1" not in listed
    bad = staff_api.patch(
        "/api/repositories/app", {"forge": {**forge, "kind": "gitlab"}}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["field"] == "forge.kind"
    gone = staff_api.patch("/api/repositories/app", {"forge": None}, format="json")
    assert gone.json()["forge"] is None and repositories.forge_of("app") is None


def test_a_kept_forge_token_is_never_sent_to_a_new_api_url(staff_api, root: Path):
    make_repo(root / "app")
    forge = {
        "kind": "gitea",
        "api_url": "https://git.example.com/api/v1",
        "repo": "octo/app",
        "token": "gitea-secret-token",
    }
    made = staff_api.post(
        "/api/repositories",
        {
            "team": "default",
            "path": str(root / "app"),
            "landing_mode": "pull_request",
            "forge": forge,
        },
        format="json",
    )
    assert made.status_code == 201, made.json()
    moved = {**made.json()["forge"], "api_url": "https://attacker.example/api/v1"}
    moved.pop("webhook_url")
    refused = staff_api.patch("/api/repositories/app", {"forge": moved}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "forge.token"
    stored = repositories.forge_of("app")
    assert stored is not None and stored.api_url == "https://git.example.com/api/v1"
    # Given again, the token moves with the address.
    moved["token"] = "gitea-secret-token"
    assert (
        staff_api.patch("/api/repositories/app", {"forge": moved}, format="json").status_code == 200
    )


@pytest.mark.parametrize(
    "api_url",
    [
        "http://[::1",
        "https://h.example:99999",
        "https://api.github.com/x y",
        "https://user:pass@git.example.com",
        "https://git.example.com/api/v1?x=1",
        "https://git.example.com/api/v1#top",
        "ftp://git.example.com",
        "https://",
    ],
)
def test_a_forge_api_url_the_client_could_not_call_is_a_400_that_writes_nothing(
    staff_api, root: Path, api_url
):
    make_repo(root / "app")
    staff_api.post(
        "/api/repositories", {"team": "default", "path": str(root / "app")}, format="json"
    )
    forge = {"kind": "github", "api_url": api_url, "repo": "octo/app", "token": "t"}
    refused = staff_api.patch("/api/repositories/app", {"forge": forge}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "forge.api_url"
    assert repositories.forge_of("app") is None
