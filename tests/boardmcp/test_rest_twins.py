"""Every MCP tool against its REST twin: the agent side acting on another agent's
task in its own team meets the same refusal through both doors -- the same error
code (REST's status is the code's one mapping, core.api.errors) -- and nothing is
written. A tool added without saying what its REST twin is fails here."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from board import store
from boardmcp import credentials
from boardmcp.tools import TOOLS, build_server
from core import machines, registry
from core.api.status import status_for
from core.models import AgentToken
from tests.api.conftest import make_client
from tests.api.test_roles_sweep import written

pytestmark = pytest.mark.django_db(transaction=True)

HANDOFF = {"handoffFrom": "x", "nextBestStep": "look"}
# Each tool: its REST twin on a task ``{id}`` (method, path, body), with the tool's
# own arguments besides task_id; None for a tool that takes no held task (its
# scoping has its own tests: test_protocol, test_roles_sweep).
TWINS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]] | None] = {
    "get_task": ("GET", "/api/board/tasks/{id}", {}, {}),
    "heartbeat": ("POST", "/api/board/tasks/{id}/heartbeat", {"ticket": "{ticket}"}, {}),
    "complete_task": ("POST", "/api/board/tasks/{id}/complete", {}, {}),
    "fail_task": ("POST", "/api/board/tasks/{id}/fail", {"error": "no"}, {"error": "no"}),
    "request_review": ("POST", "/api/board/tasks/{id}/transition", {"to": "in_review"}, {}),
    "write_handoff": (
        "POST",
        "/api/board/tasks/{id}/workspace/handoff",
        HANDOFF,
        {"handoff": HANDOFF},
    ),
    "comment": ("POST", "/api/board/tasks/{id}/comments", {"body": "hi"}, {"body": "hi"}),
    "link_dependency": (
        "POST",
        "/api/board/tasks/{id}/deps",
        {"depends_on": "{own}"},
        {"depends_on": "{own}"},
    ),
    "claim_task": ("POST", "/api/board/tasks/{id}/claim", {}, {}),
    "create_subtask": (
        "POST",
        "/api/board/tasks",
        {"title": "sub", "parent_task_id": "{id}"},
        {"title": "sub", "parent_task_id": "{id}"},
    ),
    "decide_approval": (
        "POST",
        "/api/board/tasks/{id}/approval",
        {"decision": "approve"},
        {"decision": "approve"},
    ),
    "list_tasks": None,
    "create_task": None,
    "read_handoff": None,
    "get_repository": None,
    "spend": None,
    "permission_prompt": None,
}


def test_every_mcp_tool_names_its_rest_twin() -> None:
    assert set(TWINS) == {fn.__name__ for fn, _ in TOOLS}


@pytest.fixture
def world() -> dict[str, Any]:
    """Ada's agent holds a task; Eve's agent, of the same team, holds one in
    progress and has one in review."""
    ada = make_client("ada")
    make_client("eve")
    from django.contrib.auth import get_user_model

    eve = get_user_model().objects.get(username="eve")
    for agent, owner in (("ada-bot", ada.user), ("eve-bot", eve)):
        registry.create_agent(
            id=agent,
            display_name=agent,
            team="default",
            runtime="human",
            owner=owner,
            max_concurrent=10,
        )
    own = store.create_task(title="mine", file_mutating=False).task.id
    ticket = store.claim(own, "ada-bot", "human").ticket
    assert ticket is not None
    held = store.create_task(title="eve's", file_mutating=False).task.id
    store.claim(held, "eve-bot", "human")
    review = store.create_task(title="eve's review", file_mutating=False).task.id
    store.await_review(review, ticket=store.claim(review, "eve-bot", "human").ticket)
    return {
        "own": own,
        "ticket": ticket,
        "tasks": [held, review],
        "agent key": AgentToken.objects.create(
            key=machines.new_key(), agent_id="ada-bot", user=ada.user
        ).key,
        "run credential": credentials.mint_run_credential("ada-bot", own, ticket),
    }


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    if isinstance(value, str):
        for name, text in names.items():
            value = value.replace("{" + name + "}", text)
    return value


def _rest_code(answer: Any) -> str:
    if answer.status_code < 400:
        return "ok"
    code = answer.json()["error"]
    assert status_for(code) == answer.status_code, (code, answer.status_code)
    return str(code)


def _mcp_code(answer: Any) -> str:
    return str(answer.structured_content["error"]) if answer.is_error else "ok"


@pytest.mark.parametrize("credential", ["agent key", "run credential"])
def test_another_agents_task_is_refused_alike_over_mcp_and_rest(world, credential):
    key = world[credential]
    caller = credentials.caller_for_key(key)
    assert caller is not None and caller.agent_id == "ada-bot"
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    cases = [
        (name, task, twin)
        for name, twin in TWINS.items()
        if twin is not None
        for task in world["tasks"]
        # REST's move to the status a task already has is a no-op for anyone (200,
        # nothing written); request_review is no such move: it hands over a held task.
        if not (name == "request_review" and task == world["tasks"][1])
    ]

    async def over_mcp() -> list[Any]:
        async with Client(build_server(caller)) as client:
            answers = []
            for name, task, (_m, _p, _b, args) in cases:
                names = {"id": task, "own": world["own"]}
                arguments = {"task_id": task, **_fill(args, names)}
                if name == "create_subtask":
                    arguments.pop("task_id")
                answers.append(await client.call_tool(name, arguments))
            return answers

    before = written()
    mcp = anyio.run(over_mcp)
    assert written() == before
    for (name, task, (method, path, body, _args)), tool in zip(cases, mcp, strict=True):
        names = {"id": task, "own": world["own"], "ticket": world["ticket"]}
        rest = api.generic(
            method, _fill(path, names), _json(_fill(body, names)), "application/json"
        )
        assert _mcp_code(tool) == _rest_code(rest), (name, task, tool, rest.content[:300])
        if _mcp_code(tool) == "forbidden":
            detail = tool.structured_content["detail"]
            assert "eve-bot" not in detail or "acts as agent 'ada-bot' only" in detail, detail
    assert written() == before


def _json(body: dict[str, Any]) -> str:
    return json.dumps(body)


# --- acting as an agent: the tools' ``agent`` against REST's ``agent_id`` --------------
#
# GOVERNANCE §6: a person claims, heartbeats and settles as their own agents (staff:
# any); the agent side as its own agent only. Each case runs on a task of its own per
# door (``task``: "todo", or the agent holding it), so an admitted write on one door
# leaves the other's task as the case made it. REST names the agent a call acts as in
# a claim (``agent_id``) and a comment (``author``); its heartbeat and settles act as
# the task's holder. A tool's ``agent`` on a held task is twinned with the comment
# that names the same agent on that task: one rule (core.api.access.act_as) answers
# both.

Twin = tuple[str, str, dict[str, Any]]
T = "/api/board/tasks/{id}"


def claim(agent: str | None = None) -> Twin:
    return ("POST", T + "/claim", {} if agent is None else {"agent_id": agent})


def author(agent: str) -> Twin:
    return ("POST", T + "/comments", {"body": "x", "author": agent})


def create(agent: str) -> Twin:
    return ("POST", "/api/board/tasks", {"title": "t", "created_by_agent_id": agent})


BEAT: Twin = ("POST", T + "/heartbeat", {"ticket": "{ticket}"})
COMPLETE: Twin = ("POST", T + "/complete", {})
FAIL: Twin = ("POST", T + "/fail", {"error": "no"})
REVIEW: Twin = ("POST", T + "/transition", {"to": "in_review"})
NO = {"error": "no"}
STAFF_WITHOUT = "staff, no permission"
SAY = {"body": "x"}
FILE = {"title": "t"}
# An agent REST does not know, or one of a team the caller cannot see: the same answer.
UNKNOWN = "validation_error"

# (credential, the case's task, tool, its arguments besides task_id, REST twin, the
# answer of both doors)
ACTING: list[tuple[str, str, str, dict[str, Any], Twin, str]] = [
    ("person", "todo", "claim_task", {"agent": "ada-bot"}, claim("ada-bot"), "ok"),
    ("person", "todo", "claim_task", {"agent": "eve-bot"}, claim("eve-bot"), "forbidden"),
    ("person", "todo", "claim_task", {"agent": "blue-bot"}, claim("blue-bot"), UNKNOWN),
    ("person", "todo", "claim_task", {"agent": "ghost"}, claim("ghost"), UNKNOWN),
    ("person", "todo", "claim_task", {}, claim(), UNKNOWN),
    ("person", "ada-bot", "heartbeat", {"agent": "ada-bot"}, BEAT, "ok"),
    ("person", "ada-bot", "heartbeat", {}, BEAT, "ok"),
    ("person", "eve-bot", "heartbeat", {}, BEAT, "forbidden"),
    ("person", "eve-bot", "heartbeat", {"agent": "eve-bot"}, author("eve-bot"), "forbidden"),
    ("person", "ada-bot", "heartbeat", {"agent": "blue-bot"}, author("blue-bot"), UNKNOWN),
    ("person", "ada-bot", "complete_task", {"agent": "ada-bot"}, COMPLETE, "ok"),
    ("person", "eve-bot", "complete_task", {}, COMPLETE, "forbidden"),
    ("person", "ada-bot", "fail_task", {"agent": "ada-bot", **NO}, FAIL, "ok"),
    ("person", "eve-bot", "fail_task", {"agent": "eve-bot", **NO}, author("eve-bot"), "forbidden"),
    ("person", "ada-bot", "request_review", {"agent": "ada-bot"}, REVIEW, "ok"),
    # (A person's REST move of any task of theirs to review is a person's board move,
    # not an act as its holder: no twin of request_review's, which acts as the holder.)
    ("person", "eve-bot", "request_review", {"agent": "eve-bot"}, author("eve-bot"), "forbidden"),
    ("staff", "todo", "claim_task", {"agent": "eve-bot"}, claim("eve-bot"), "ok"),
    ("staff", "eve-bot", "heartbeat", {"agent": "eve-bot"}, BEAT, "ok"),
    ("staff", "eve-bot", "complete_task", {}, COMPLETE, "ok"),
    # Staff without the model permission the table names keep a member's powers.
    (STAFF_WITHOUT, "todo", "claim_task", {"agent": "eve-bot"}, claim("eve-bot"), "forbidden"),
    (STAFF_WITHOUT, "todo", "claim_task", {"agent": "sid-bot"}, claim("sid-bot"), "ok"),
    ("agent key", "todo", "claim_task", {"agent": "ada-bot"}, claim("ada-bot"), "ok"),
    ("agent key", "todo", "claim_task", {"agent": "eve-bot"}, claim("eve-bot"), "forbidden"),
    ("agent key", "todo", "claim_task", {"agent": "blue-bot"}, claim("blue-bot"), UNKNOWN),
    ("agent key", "ada-bot", "heartbeat", {"agent": "eve-bot"}, author("eve-bot"), "forbidden"),
    ("agent key", "ada-bot", "complete_task", {"agent": "blue-bot"}, author("blue-bot"), UNKNOWN),
    ("run credential", "run", "heartbeat", {"agent": "ada-bot"}, BEAT, "ok"),
    ("run credential", "run", "heartbeat", {"agent": "eve-bot"}, author("eve-bot"), "forbidden"),
    ("run credential", "run", "write_handoff", {"agent": "blue-bot", "handoff": HANDOFF},
     author("blue-bot"), UNKNOWN),
    ("machine token", "todo", "claim_task", {}, claim(), "ok"),
    ("machine token", "todo", "claim_task", {"agent": "eve-bot"}, claim("eve-bot"), "forbidden"),
    ("machine token", "ada-bot", "heartbeat", {}, BEAT, "ok"),
    ("machine token", "eve-bot", "fail_task", NO, FAIL, "forbidden"),
    # Signing a comment as an agent (REST's ``author``), filing work as one (REST's
    # ``created_by_agent_id``: delegation, which waits for approval).
    ("person", "ada-bot", "comment", {"agent": "ada-bot", "body": "x"}, author("ada-bot"), "ok"),
    ("person", "ada-bot", "comment", {"agent": "eve-bot", **SAY}, author("eve-bot"), "forbidden"),
    ("agent key", "ada-bot", "comment", {"agent": "eve-bot", **SAY}, author("eve-bot"),
     "forbidden"),
    ("machine token", "ada-bot", "comment", {"agent": "ada-bot", **SAY}, author("ada-bot"), "ok"),
    ("person", "none", "create_task", {"title": "t", "agent": "ada-bot"}, create("ada-bot"), "ok"),
    ("person", "none", "create_task", {**FILE, "agent": "eve-bot"}, create("eve-bot"), "forbidden"),
    ("person", "none", "create_task", {**FILE, "agent": "blue-bot"}, create("blue-bot"), UNKNOWN),
    ("staff", "none", "create_task", {"title": "t", "agent": "eve-bot"}, create("eve-bot"), "ok"),
    ("run credential", "none", "create_task", {**FILE, "agent": "eve-bot"}, create("eve-bot"),
     "forbidden"),
    ("machine token", "none", "create_task", {**FILE, "agent": "eve-bot"}, create("eve-bot"),
     "forbidden"),
]  # fmt: skip


def _person(name: str, *, staff: bool = False, permitted: bool = True) -> str:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user(name, is_staff=staff)
    if staff and permitted:
        user.user_permissions.set(Permission.objects.all())
    registry.add_member("default", user)
    if name == "sid":
        registry.create_agent(
            id="sid-bot",
            display_name="sid",
            team="default",
            runtime="human",
            owner=user,
            max_concurrent=10,
        )
    return str(Token.objects.create(user=user).key)


@pytest.fixture
def acting(world: dict[str, Any]) -> dict[str, Any]:
    """Beside the world: agent blue-bot of team blue (which nobody here is in), the
    people's own keys, a staff person with and one without the model permissions, and
    a machine token bound to ada-bot."""
    from django.contrib.auth import get_user_model

    registry.create_team("blue", "Blue")
    registry.create_agent(id="blue-bot", display_name="blue", team="blue", runtime="human")
    for agent in ("ada-bot", "eve-bot"):
        registry.update_agent(agent, {"max_concurrent": 100})
    ada = get_user_model().objects.get(username="ada")
    machine_key = machines.mint("host-1", ["ada-bot"])[1]
    return {
        **world,
        "person": str(Token.objects.get(user=ada).key),
        "staff": _person("root", staff=True),
        STAFF_WITHOUT: _person("sid", staff=True, permitted=False),
        "machine token": machine_key,
    }


def _case_task(kind: str, world: dict[str, Any]) -> dict[str, str]:
    """A task in the state a case asks, of its own: "todo", held by an agent, the run
    credential's own task, or none (a create)."""
    if kind == "none":
        return {"id": "", "ticket": ""}
    if kind == "run":
        return {"id": world["own"], "ticket": world["ticket"]}
    task = store.create_task(title=f"case ({kind})", file_mutating=False).task.id
    if kind == "todo":
        return {"id": task, "ticket": ""}
    ticket = store.claim(task, kind, "human").ticket
    assert ticket is not None
    return {"id": task, "ticket": ticket}


async def _call(caller: Any, tool: str, arguments: dict[str, Any]) -> Any:
    async with Client(build_server(caller)) as client:
        return await client.call_tool(tool, arguments)


def _admitted(tool: str, ids: tuple[str, str]) -> tuple[Any, ...]:
    """What an admitted case made of its task, to compare across the doors."""
    tasks = [store.get_task(task_id) for task_id in ids]
    if tool == "comment":
        return tuple(store.list_comments(t.id).last().author for t in tasks)
    return tuple(
        (t.status, t.assignee_agent_id, t.created_by_agent_id, (t.approval or {}).get("state"))
        for t in tasks
    )


def test_acting_as_an_agent_is_admitted_and_refused_alike_over_mcp_and_rest(acting):
    results = []
    for who, kind, tool, arguments, (method, path, body), expected in ACTING:
        key = acting[who]
        caller = credentials.caller_for_key(key)
        assert caller is not None, who
        mcp_task, rest_task = _case_task(kind, acting), _case_task(kind, acting)
        if kind == "run":
            # One run, one task: REST meets it after MCP, whose refusals write nothing.
            rest_task = mcp_task
        before = written()
        on_task = {"task_id": mcp_task["id"]} if mcp_task["id"] else {}
        tool_answer = anyio.run(_call, caller, tool, {**on_task, **arguments})
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        rest = api.generic(
            method,
            _fill(path, {"id": rest_task["id"]}),
            _json(_fill(body, {"ticket": rest_task["ticket"]})),
            "application/json",
        )
        case = (who, kind, tool, arguments)
        results.append((case, _mcp_code(tool_answer), _rest_code(rest), expected))
        if expected != "ok":
            # A refusal writes nothing, on either door.
            assert written() == before, case
        elif kind == "none" and not tool_answer.is_error and rest.status_code < 400:
            made = (json.loads(tool_answer.content[0].text)["task"]["id"], rest.json()["id"])
            first, second = _admitted(tool, made)
            assert first == second, (case, first, second)
        elif kind != "run" and not tool_answer.is_error and rest.status_code < 400:
            first, second = _admitted(tool, (mcp_task["id"], rest_task["id"]))
            assert first == second, (case, first, second)
    mismatched = [r for r in results if not r[1] == r[2] == r[3]]
    assert mismatched == [], mismatched


def test_the_stdio_caller_acts_as_its_own_agent_only_as_its_agents_key_does_over_rest(acting):
    """``clawboo mcp --agent ada-bot`` holds no key, yet names agents as ada-bot's key
    does over REST: its own only, the same refusal for any other."""
    caller = credentials.caller_for_agent("ada-bot")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {acting['agent key']}")
    answers = []
    for agent in ("eve-bot", "blue-bot", "ghost", "ada-bot"):
        tasks = [_case_task("todo", acting)["id"] for _door in ("mcp", "rest")]
        tool = anyio.run(_call, caller, "claim_task", {"task_id": tasks[0], "agent": agent})
        rest = api.post(f"/api/board/tasks/{tasks[1]}/claim", {"agent_id": agent}, format="json")
        answers.append((agent, _mcp_code(tool), _rest_code(rest)))
    assert answers == [
        ("eve-bot", "forbidden", "forbidden"),
        ("blue-bot", UNKNOWN, UNKNOWN),
        ("ghost", UNKNOWN, UNKNOWN),
        ("ada-bot", "ok", "ok"),
    ]
