"""GOVERNANCE §6: every verb kept for people is refused to each agent-side credential
(an agent's key, a run's credential, the host's machine token, the critic's
credential) with ``403 person_required`` and nothing written -- the task, its
verdict, the approvals, the registry, the repository and its remote (git) -- and
the same verb by a person with their own credential succeeds.

The task under review is a remote worker's: submitted, judged on the server
(verdict ``pass``), in review, with the host's machine token in hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board import store
from board.models import Budget, Task, ToolApproval, ToolGrant
from boardmcp import credentials
from core import machines, registry, repositories
from core.models import Agent, AgentToken, Repository, Team
from tests.api.conftest import fingerprint
from tests.api.conftest import key_client as client
from tests.fixtures.gitrepos import git
from worktrees import intake

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def person(
    username: str,
    *,
    staff: bool = False,
    teams: tuple[str, ...] = ("default",),
    permissions: tuple[str, ...] = (),
    superuser: bool = False,
) -> APIClient:
    """A person with their own token; ``permissions``: Django model permissions by
    codename (``"change_task"``)."""
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(
        username=username, is_staff=staff or superuser, is_superuser=superuser
    )
    user.user_permissions.set(Permission.objects.filter(codename__in=permissions))
    for team in teams:
        registry.add_member(team, user)
    return client(Token.objects.create(user=user).key)


def submitted(remote: Path, tmp_path: Path, agent: str, title: str) -> str:
    """A task of ``agent`` pushed and submitted as a remote worker does: judged on the
    server, in review."""
    task = store.create_task(title=title, repository="app").task
    claim = store.claim(task.id, agent, "command")
    assert claim.outcome == "ok"
    clone = tmp_path / f"worker-{task.id}"
    git(tmp_path, "clone", "-q", str(remote), str(clone))
    git(clone, "checkout", "-q", "-b", f"clawboo/task-{task.id}")
    (clone / "feature.txt").write_text("ok\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", f"work of {task.id}")
    git(clone, "push", "-q", "origin", f"clawboo/task-{task.id}")
    commit = git(clone, "rev-parse", "HEAD")
    intake.submit(task.id, claim.ticket, f"clawboo/task-{task.id}", commit, {"summary": "did"})
    reviewed = store.get_task(task.id)
    assert (reviewed.status, reviewed.verdict) == ("in_review", "pass"), reviewed.error
    return task.id


@pytest.fixture
def board(repo: Path, tmp_path: Path) -> dict[str, Any]:
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    repositories.register(
        team="default",
        path=str(repo),
        id="app",
        remote=str(remote),
        verify_cmd="grep -qx ok feature.txt",
    )
    ada = get_user_model().objects.create_user(username="ada")
    registry.add_member("default", ada)
    for agent_id in ("far", "near", "rex"):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id.title(),
            team="default",
            runtime="command",
            settings={"argv": ["true"], "repository": "app"},
            owner=ada,
        )
    review = submitted(remote, tmp_path, "far", "Add feature")
    changes = submitted(remote, tmp_path, "far", "Add another")
    # Work an agent filed waits for a person's approval.
    filed = store.create_task(title="delegated", created_by_agent_id="near").task
    # A task in review whose verdict failed: a person may override it.
    failed = store.create_task(title="unverified", file_mutating=False).task
    taken = store.claim(failed.id, "near", "command")
    store.await_review(failed.id, ticket=taken.ticket)
    store.set_verdict(failed.id, "fail", "tests failed")
    assert filed.approval["state"] == "required"
    # A run of `near` holds a task, asks for a tool, and has a critic beside it.
    held = store.create_task(title="running", file_mutating=False).task
    claim = store.claim(held.id, "near", "command")
    asked = store.ask_tool_call(held.id, "near", "Bash", {"command": "rm -rf /"}, "toolu_1")
    store.pause_agent("far", "the breaker tripped", by="breaker")
    _, machine_key = machines.mint("laptop", ["far", "near"])
    agent_key = AgentToken.objects.create(key=machines.new_key(), agent_id="far", user=ada).key
    run_key = credentials.mint_run_credential("near", held.id, claim.ticket)
    critic_key = credentials.mint_run_credential("rex", held.id, claim.ticket, read_only=True)
    return {
        "repo": repo,
        "remote": remote,
        "review": review,
        "changes": changes,
        "filed": filed.id,
        "failed": failed.id,
        "tool": asked.id,
        "keys": {
            "agent key": agent_key,
            "run credential": run_key,
            "machine token": machine_key,
            "critic credential": critic_key,
        },
    }


def people_verbs(board: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    t = f"/api/board/tasks/{board['review']}"
    return [
        ("post", f"{t}/verdict", {"verdict": "fail", "evidence": "changed my mind"}),
        ("post", f"{t}/transition", {"to": "done", "human_override": {"reason": "trust me"}}),
        ("post", f"{t}/transition", {"to": "done"}),
        (
            "post",
            f"/api/board/tasks/{board['failed']}/transition",
            {"to": "done", "human_override": {"reason": "trust me"}},
        ),
        ("post", f"{t}/complete", {"output": "approved by myself"}),
        ("post", f"{t}/approve", {}),
        ("post", f"/api/board/tasks/{board['changes']}/request-changes", {"feedback": "no"}),
        ("post", f"/api/board/tasks/{board['filed']}/approval", {"decision": "approve"}),
        ("post", f"/api/approvals/{board['tool']}", {"decision": "allow_always"}),
        ("post", "/api/agents/far/resume", {}),
        ("patch", "/api/agents/far", {"max_concurrent": 50, "labels": ["gpu"]}),
        ("post", "/api/agents", {"id": "mine", "team": "default", "runtime": "command"}),
        ("patch", "/api/teams/default", {"reviewer_agent": None}),
        ("post", "/api/teams", {"id": "mine", "name": "Mine"}),
        (
            "post",
            "/api/budgets",
            {"scope": "team", "scope_id": "default", "window": "day", "limit_cents": 5},
        ),
        ("patch", "/api/repositories/app", {"verify_cmd": "true"}),
        ("delete", "/api/repositories/app", {}),
        ("post", "/api/routines", {"name": "mine", "team": "default"}),
        ("patch", f"/api/board/tasks/{board['review']}", {"metadata": {"verify_cmd": "true"}}),
    ]


def written(board: dict[str, Any]) -> dict[str, Any]:
    """Everything a refusal must leave as it was, the repository and remote included."""
    return {
        **fingerprint(),
        "task_rows": list(
            Task.objects.order_by("pk").values_list(
                "pk",
                "status",
                "verdict",
                "verdict_evidence",
                "human_override",
                "approval_state",
                "metadata",
            )
        ),
        "tools": list(ToolApproval.objects.values_list("pk", "state", "decision")),
        "grants": ToolGrant.objects.count(),
        "agents": list(
            Agent.objects.order_by("pk").values_list("pk", "state", "max_concurrent", "labels")
        ),
        "teams": list(Team.objects.values_list("pk", "reviewer_agent_id")),
        "budgets": Budget.objects.count(),
        "repositories": list(Repository.objects.values_list("pk", "verify_cmd", "remote")),
        "repo_refs": git(board["repo"], "for-each-ref", "--format=%(refname) %(objectname)"),
        "remote_refs": git(board["remote"], "for-each-ref", "--format=%(refname) %(objectname)"),
    }


@pytest.mark.parametrize(
    "credential", ["agent key", "run credential", "machine token", "critic credential"]
)
def test_every_people_verb_is_refused_to_each_agent_side_credential_and_writes_nothing(
    board, credential
):
    caller = client(board["keys"][credential])
    before = written(board)
    for method, path, body in people_verbs(board):
        answer = getattr(caller, method)(path, body, format="json")
        assert answer.status_code == 403, (credential, method, path, answer.content[:300])
        refusal = answer.json()
        # Completing a task in review is approving it; the critic, who may complete
        # nothing at all, is refused that verb outright, and a run's credential, which
        # acts on its run's task only, any other task's -- a move too, for the path
        # before the body names the people verb.
        settles = path.endswith(("/complete", "/transition"))
        wanted = (
            "forbidden"
            if (credential == "critic credential" and path.endswith("/complete"))
            or (credential == "run credential" and settles)
            else "person_required"
        )
        assert refusal["error"] == wanted, (credential, path, refusal)
        # The detail names the principal and the verb.
        side = {"agent key": "agent", "run credential": "agent"}.get(
            credential, "machine" if credential == "machine token" else "reviewer"
        )
        assert refusal["principal"] == side and refusal["detail"].startswith(side)
        assert refusal["verb"].startswith(method.upper() + " /api/")
    assert written(board) == before
    assert store.get_task(board["review"]).status == "in_review"  # it waits for a person


def test_a_refusal_comes_before_the_body_is_read(board):
    """A body that is not even JSON: the agent side is refused for the verb first."""
    caller = client(board["keys"]["machine token"])
    answer = caller.post(
        f"/api/board/tasks/{board['review']}/approve", "{not json", content_type="application/json"
    )
    assert answer.status_code == 403 and answer.json()["error"] == "person_required"


def test_the_same_verbs_by_people_with_their_own_credentials_succeed(board):
    member = person("mia")
    # Staff edit and resume agents, teams, budgets and repositories beyond what they
    # own with the model permissions the admin asks for the same change.
    staff = person(
        "root",
        staff=True,
        permissions=("change_agent", "change_team", "add_budget", "change_repository"),
    )
    review, changes = board["review"], board["changes"]
    ok = [
        member.post(f"/api/board/tasks/{board['filed']}/approval", {"decision": "approve"}),
        member.post(f"/api/approvals/{board['tool']}", {"decision": "allow_always"}),
        # The agents' owner (ada) and staff edit and resume agents.
        staff.post("/api/agents/far/resume", {}),
        staff.patch("/api/agents/far", {"max_concurrent": 2}),
        staff.patch("/api/teams/default", {"reviewer_agent": None}),
        staff.post(
            "/api/budgets",
            {"scope": "team", "scope_id": "default", "window": "day", "limit_cents": 5},
        ),
        staff.patch("/api/repositories/app", {"base_branch": "main"}),
        member.post(f"/api/board/tasks/{review}/verdict", {"verdict": "pass", "evidence": "read"}),
        member.post(f"/api/board/tasks/{changes}/request-changes", {"feedback": "rename it"}),
        member.post(f"/api/board/tasks/{review}/approve", {}),
    ]
    for answer in ok:
        assert answer.status_code in (200, 201, 202), answer.content[:400]
    assert store.get_task(review).status == "done"
    assert store.get_task(changes).status == "in_progress"
    assert store.get_task(board["filed"]).approval["state"] == "approved"
    assert ToolApproval.objects.get(pk=board["tool"]).decision == "allow_always"
    assert Agent.objects.get(pk="far").state == "active"
    # Approve landed the change and pushed it to the remote.
    assert git(board["remote"], "show", "main:feature.txt") == "ok"
    # A person's human_override moves the unverified task in review to done.
    overridden = member.post(
        f"/api/board/tasks/{board['failed']}/transition",
        {"to": "done", "human_override": {"reason": "checked by hand"}},
    )
    assert overridden.status_code == 200, overridden.content[:400]
    done = store.get_task(board["failed"])
    assert done.status == "done" and done.human_override["by"] == "mia"


VIEW_ONLY = ("view_task", "view_agent", "view_toolapproval", "view_team", "view_repository")


def test_staff_granted_only_view_does_no_people_verb_beyond_their_own_teams(board):
    """GOVERNANCE §6 and the admin's rule, through the API: a staff person's powers
    over other teams' work and others' agents need the Django model permission the
    admin asks for the same change. Granted only ``view``, they read everything and
    approve, land, decide, resume or edit nothing: ``403 forbidden`` naming the
    permission, nothing written."""
    viewer = person("viewer", staff=True, teams=(), permissions=VIEW_ONLY)
    before = written(board)
    for method, path, body in people_verbs(board):
        if path == "/api/teams":
            continue  # any person makes a team of their own: no power over others'
        # A person's body is read: these need one that would be written.
        if path == "/api/agents":
            body = {**body, "display_name": "Mine"}
        if path == "/api/routines":
            body = {"agent_id": "far", "team": "default", "cron_spec": "0 * * * *"}
        answer = getattr(viewer, method)(path, body, format="json")
        assert answer.status_code == 403, (method, path, answer.content[:300])
        refusal = answer.json()
        assert refusal["error"] == "forbidden", (path, refusal)
        assert refusal["permission"].split(".")[1].split("_")[0] in ("add", "change", "delete")
        assert refusal["permission"] in refusal["detail"], refusal
    assert written(board) == before
    assert store.get_task(board["review"]).status == "in_review"
    assert Agent.objects.get(pk="far").state == "paused"
    # What staff read stays theirs to read.
    assert viewer.get(f"/api/board/tasks/{board['review']}").status_code == 200
    assert viewer.get("/api/agents/far").status_code == 200


def test_staff_without_the_permission_keep_a_members_powers_in_their_own_team(board):
    member = person("viewer", staff=True, permissions=VIEW_ONLY)
    answer = member.post(f"/api/board/tasks/{board['filed']}/approval", {"decision": "approve"})
    assert answer.status_code == 200, answer.content[:300]
    landed = member.post(f"/api/board/tasks/{board['review']}/approve", {})
    assert landed.status_code in (200, 202), landed.content[:300]
    assert store.get_task(board["review"]).status == "done"
    # What only staff change stays refused, naming what is missing.
    refused = member.patch("/api/teams/default", {"reviewer_agent": None}, format="json")
    assert refused.status_code == 403 and refused.json()["permission"] == "clawboo.change_team"


def test_staff_with_the_permission_or_a_superuser_act_beyond_their_teams(board):
    granted = person("granted", staff=True, teams=(), permissions=("change_task",))
    answer = granted.post(f"/api/board/tasks/{board['filed']}/approval", {"decision": "approve"})
    assert answer.status_code == 200, answer.content[:300]
    root = person("root", superuser=True, teams=())
    resumed = root.post("/api/agents/far/resume", {}, format="json")
    assert resumed.status_code == 200, resumed.content[:300]
    assert Agent.objects.get(pk="far").state == "active"
    # change_task is not change_agent.
    store.pause_agent("far", "again", by="breaker")
    refused = granted.post("/api/agents/far/resume", {}, format="json")
    assert refused.status_code == 403 and refused.json()["permission"] == "clawboo.change_agent"
    assert Agent.objects.get(pk="far").state == "paused"


@pytest.mark.django_db(transaction=True)
def test_staff_granted_only_view_decide_no_approval_over_mcp(board):
    import anyio
    from mcp.client.client import Client

    from boardmcp.tools import build_server

    user = get_user_model().objects.create_user(username="viewer", is_staff=True)
    caller = credentials.caller_for_key(Token.objects.create(user=user).key)
    assert caller is not None

    async def go() -> list[Any]:
        async with Client(build_server(caller)) as mcp:
            return [
                await mcp.call_tool(
                    "decide_approval", {"task_id": board["filed"], "decision": "approve"}
                ),
                await mcp.call_tool("get_task", {"task_id": board["filed"]}),
            ]

    decided, read = anyio.run(go)
    assert decided.is_error
    assert decided.structured_content["permission"] == "board.change_task"
    assert not read.is_error  # staff still read it
    assert store.get_task(board["filed"]).approval["state"] == "required"
