"""The routine and schedule REST paths (shared/API.md "Routines and schedules"):
every path, every error code, each refusal writing nothing; the issue-7 policies
(error-halts, one firing owner, bound-recurring, the human seam) driven through HTTP."""

from __future__ import annotations

import datetime as dt
import socket
from contextlib import contextmanager
from typing import Any

import pytest
from django_q.models import OrmQ
from rest_framework.test import APIClient

from board import store as board_store
from core import registry
from routines import api as routine_api
from routines.models import Routine, RoutineFire, TickerPoke
from routines.schedules import (
    ClawbooRoutineScheduleSource,
    OpenClawGatewayCronScheduleSource,
    SourceRead,
)
from routines.ticker import Ticker
from tests.api.conftest import fingerprint, make_client
from tests.fixtures.routines import START
from tests.routines.fake_gateway import FakeGateway

pytestmark = pytest.mark.django_db

HOUR_MS = 3_600_000
START_MS = int(START.timestamp() * 1000)


def ledger() -> dict[str, Any]:
    """The routines side of 'a refused request wrote nothing'."""
    return {
        "board": fingerprint(),
        "routines": sorted(
            Routine.objects.values_list(
                "id", "status", "cron_spec", "next_run_at", "bound_task_id", "updated_at"
            )
        ),
        "fires": RoutineFire.objects.count(),
        "queue": OrmQ.objects.count(),
        "poke": list(TickerPoke.objects.values_list("seq", flat=True)),
    }


@contextmanager
def unchanged():
    before = ledger()
    yield
    assert ledger() == before


@pytest.fixture(autouse=True)
def no_gateway(settings):
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = ""
    settings.CLAWBOO_OPENCLAW_TOKEN = ""


@pytest.fixture
def api(team, clock):
    return make_client("ada-user", teams=(team,))


@pytest.fixture
def staff(team):
    return make_client("root", teams=(), staff=True)


# A routine fires as its agent: the API user must own the agents it names.
@pytest.fixture
def agent(team, api):
    return registry.create_agent(
        id="ada",
        display_name="Ada",
        team=team,
        runtime="command",
        settings={"argv": ["true"]},
        owner=api.user,
    )


@pytest.fixture
def openclaw_agent(team, api):
    return registry.create_agent(
        id="claw", display_name="Claw", team=team, runtime="openclaw", owner=api.user
    )


@pytest.fixture
def human_agent(team, api):
    return registry.create_agent(
        id="hal",
        display_name="Hal",
        team=team,
        runtime="human",
        participant_kind="human",
        owner=api.user,
    )


@pytest.fixture
def outsider(db):
    registry.ensure_team("elsewhere", "Elsewhere")
    return make_client("eve", teams=("elsewhere",))


def body(agent, **extra: Any) -> dict[str, Any]:
    return {"agent_id": agent.id, "team": agent.team_id, "cron_spec": "0 * * * *", **extra}


def create(client, agent, **extra: Any) -> dict[str, Any]:
    response = client.post("/api/routines", body(agent, **extra), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def refused(response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    data = response.json()
    assert data["error"] == code and data["detail"]
    return data


# --- routines: happy paths -------------------------------------------------------


def test_create_returns_the_routine_with_iso_and_epoch_ms_stamps(api, agent):
    data = create(api, agent, timezone="Europe/Berlin", task_template={"title": "Briefing"})
    assert data["status"] == "idle" and data["team"] == "ops" and data["agent_id"] == "ada"
    assert data["next_run_at_ms"] == START_MS + HOUR_MS
    assert data["next_run_at"] == "2030-01-07T09:00:00+00:00"
    assert data["last_run_at"] is None and data["last_run_at_ms"] is None
    assert data["task_template"]["title"] == "Briefing" and data["catch_up"] == "latest"
    assert api.get(f"/api/routines/{data['id']}").json() == data
    assert [r["id"] for r in api.get("/api/routines").json()] == [data["id"]]


def test_patch_re_arms_and_delete_removes(api, agent):
    rid = create(api, agent)["id"]
    patched = api.patch(f"/api/routines/{rid}", {"cron_spec": "*/15 * * * *"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["next_run_at_ms"] == START_MS + 15 * 60_000
    assert api.delete(f"/api/routines/{rid}").status_code == 204
    refused(api.get(f"/api/routines/{rid}"), 404, "not_found")


def test_pause_resume_and_run_now_move_the_ledger(api, agent):
    rid = create(api, agent)["id"]
    assert api.post(f"/api/routines/{rid}/pause").json()["status"] == "paused"
    assert api.post(f"/api/routines/{rid}/pause").json()["status"] == "paused"  # no-op
    resumed = api.post(f"/api/routines/{rid}/resume").json()
    assert resumed["status"] == "idle" and resumed["next_run_at_ms"] == START_MS + HOUR_MS
    assert api.post(f"/api/routines/{rid}/run-now").json()["status"] == "queued"


def test_a_null_body_on_a_routine_move_is_refused_and_moves_nothing(api, agent):
    """A move takes no body: an absent one works (above); a literal ``null`` is a
    wrong type, 400 on ``body``, as any non-object is (it used to read as none)."""
    rid = create(api, agent)["id"]
    with unchanged():
        for action in ("pause", "resume", "run-now"):
            answer = api.post(
                f"/api/routines/{rid}/{action}", "null", content_type="application/json"
            )
            assert refused(answer, 400, "validation_error")["field"] == "body"


def test_list_filters_by_status(api, agent):
    first, second = create(api, agent)["id"], create(api, agent)["id"]
    api.post(f"/api/routines/{second}/pause")
    assert [r["id"] for r in api.get("/api/routines?status=idle").json()] == [first]
    refused(api.get("/api/routines?status=bogus"), 400, "validation_error")


def test_an_idempotent_create_replays_without_a_second_routine(api, agent):
    headers = {"HTTP_IDEMPOTENCY_KEY": "k-1"}
    one = api.post("/api/routines", body(agent), format="json", **headers)
    two = api.post("/api/routines", body(agent), format="json", **headers)
    assert one.status_code == two.status_code == 201 and one.json() == two.json()
    assert Routine.objects.count() == 1


# --- routines: refusals write nothing -----------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cron_spec": "61 * * * *"}, "cron_spec"),
        ({"cron_spec": "every day"}, "cron_spec"),
        ({"cron_spec": "once@2020-01-01T00:00:00Z"}, "cron_spec"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"catch_up": "sometimes"}, "catch_up"),
        ({"task_template": {"colour": "red"}}, "task_template.colour"),
        ({"agent_id": "nobody"}, "agent_id"),
        ({"surprise": 1}, "surprise"),
        ({"team": "nope"}, "team"),
    ],
)
def test_a_bad_create_is_a_400_naming_the_field(api, agent, change, field):
    with unchanged():
        data = refused(
            api.post("/api/routines", body(agent, **change), format="json"), 400, "validation_error"
        )
    assert data["field"] == field


def test_a_create_missing_a_required_field_is_a_400(api, agent):
    with unchanged():
        data = refused(
            api.post("/api/routines", {"team": "ops"}, format="json"), 400, "validation_error"
        )
    assert data["field"] == "agent_id"
    with unchanged():
        refused(api.post("/api/routines", [1, 2], format="json"), 400, "validation_error")


def test_creating_in_a_team_you_are_not_in_is_refused_like_an_unknown_team(outsider, agent):
    with unchanged():
        data = refused(
            outsider.post("/api/routines", body(agent), format="json"), 400, "validation_error"
        )
        ghost = refused(
            outsider.post("/api/routines", {**body(agent), "team": "ghost"}, format="json"),
            400,
            "validation_error",
        )
    assert data["detail"] == ghost["detail"].replace("ghost", "ops")


def test_another_teams_routine_is_invisible(api, outsider, agent):
    rid = create(api, agent)["id"]
    assert outsider.get("/api/routines").json() == []
    assert outsider.get("/api/routines?team=ops").json() == []
    with unchanged():
        refused(outsider.get(f"/api/routines/{rid}"), 404, "not_found")
        refused(
            outsider.patch(f"/api/routines/{rid}", {"timezone": "UTC"}, format="json"),
            404,
            "not_found",
        )
        refused(outsider.delete(f"/api/routines/{rid}"), 404, "not_found")
        for action in ("pause", "resume", "run-now"):
            refused(outsider.post(f"/api/routines/{rid}/{action}"), 404, "not_found")


def test_another_teams_task_bound_to_a_routine_answers_as_an_unknown_one(api, outsider, agent):
    """A team is a wall: naming another team's task as the one a routine fires (on
    create and on edit) answers exactly as an id nobody uses -- it told a member of
    one team which task ids another team has."""
    registry.ensure_team("elsewhere", "Elsewhere")
    theirs = board_store.create_task(title="Theirs", team="elsewhere", id="t-theirs").task
    once = f"once@{(START + dt.timedelta(hours=2)).isoformat()}"

    def answer(send, task_id: str) -> tuple[int, dict[str, Any]]:
        with unchanged():
            response = send({"team_task_id": task_id})
        data = response.json()
        return response.status_code, {**data, "detail": data["detail"].replace(task_id, "ID")}

    def create_bound(template):
        return api.post(
            "/api/routines", body(agent, cron_spec=once, task_template=template), format="json"
        )

    rid = create(api, agent, cron_spec=once)["id"]

    def edit_bound(template):
        return api.patch(f"/api/routines/{rid}", {"task_template": template}, format="json")

    for send in (create_bound, edit_bound):
        status, data = answer(send, theirs.id)
        assert (status, data) == answer(send, "t-nobodys"), data
        assert status == 400 and data["field"] == "task_template.team_task_id"
    assert board_store.get_task(theirs.id).scheduled_by == "manual"


def test_staff_see_every_team(api, staff, agent):
    rid = create(api, agent)["id"]
    assert [r["id"] for r in staff.get("/api/routines").json()] == [rid]


def test_anonymous_is_401(db):
    with unchanged():
        refused(APIClient().get("/api/routines"), 401, "unauthenticated")
        refused(APIClient().get("/api/schedules"), 401, "unauthenticated")


def test_bad_patches_write_nothing(api, agent):
    rid = create(api, agent)["id"]
    url = f"/api/routines/{rid}"
    with unchanged():
        refused(api.patch(url, {"cron_spec": "bad"}, format="json"), 400, "validation_error")
        refused(api.patch(url, {"status": "idle"}, format="json"), 400, "validation_error")
        refused(api.patch("/api/routines/nope", {}, format="json"), 404, "not_found")
    api.post(f"/api/routines/{rid}/run-now")
    with unchanged():  # a fire is in flight
        refused(api.patch(url, {"timezone": "UTC"}, format="json"), 409, "conflict")


def test_an_illegal_ledger_move_is_409_with_from_to_allowed(api, agent):
    rid = create(api, agent)["id"]
    api.post(f"/api/routines/{rid}/pause")
    with unchanged():
        data = refused(api.post(f"/api/routines/{rid}/run-now"), 409, "illegal_transition")
    assert (data["from"], data["to"], data["allowed"]) == ("paused", "queued", ["idle"])
    assert data["detail"].endswith("cannot be run now: it is paused (resume it first)")
    with unchanged():
        refused(
            api.post(f"/api/routines/{rid}/pause", {"x": 1}, format="json"), 400, "validation_error"
        )


# --- the issue-7 policies, through the API --------------------------------------------


def test_error_halts_until_resumed_through_the_api(
    api, openclaw_agent, clock, django_capture_on_commit_callbacks
):
    """A failed recurring fire (here: the gateway is not configured) parks the row in
    error with next_run_at null; it never fires again until a human resumes it."""
    rid = create(api, openclaw_agent)["id"]
    clock.shift(dt.timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):  # the fire is enqueued on commit
        Ticker().tick()
    halted = api.get(f"/api/routines/{rid}").json()
    assert halted["status"] == "error" and "not configured" in halted["last_error"]
    assert halted["next_run_at"] is None and halted["next_run_at_ms"] is None
    assert halted["last_run_at_ms"] == START_MS + HOUR_MS
    clock.shift(dt.timedelta(hours=3))
    assert Ticker().tick().claimed == []  # an errored row never fires
    with unchanged():
        refused(api.post(f"/api/routines/{rid}/run-now"), 409, "illegal_transition")
    resumed = api.post(f"/api/routines/{rid}/resume").json()
    assert resumed["status"] == "idle" and resumed["last_error"] is None
    assert resumed["next_run_at_ms"] == START_MS + 5 * HOUR_MS  # the next slot after now


def test_binding_a_task_stamps_its_firing_owner(api, agent):
    task = board_store.create_task(title="Ship it", team="ops").task
    once = (START + dt.timedelta(hours=2)).isoformat()
    data = create(api, agent, cron_spec=f"once@{once}", task_template={"team_task_id": task.id})
    assert data["bound_task_id"] == task.id
    stamped = board_store.get_task(task.id)
    assert stamped.scheduled_by == "clawboo" and stamped.revision == task.revision + 1
    assert api.delete(f"/api/routines/{data['id']}").status_code == 204
    assert board_store.get_task(task.id).scheduled_by == "manual"  # handed back


def test_a_second_firing_owner_is_409_ownership_conflict(api, agent):
    task = board_store.create_task(title="Ship it", team="ops").task
    once = f"once@{(START + dt.timedelta(hours=2)).isoformat()}"
    template = {"team_task_id": task.id}
    create(api, agent, cron_spec=once, task_template=template)
    with unchanged():
        data = refused(
            api.post(
                "/api/routines", body(agent, cron_spec=once, task_template=template), format="json"
            ),
            409,
            "ownership_conflict",
        )
    assert data["task_id"] == task.id
    other = board_store.create_task(title="Theirs", team="ops").task
    board_store.set_scheduled_by(other.id, "openclaw")
    with unchanged():
        data = refused(
            api.post(
                "/api/routines",
                body(agent, cron_spec=once, task_template={"team_task_id": other.id}),
                format="json",
            ),
            409,
            "ownership_conflict",
        )
    assert data["owner"] == "openclaw"


def test_a_recurring_spec_bound_to_a_task_is_400_bound_recurring(api, agent):
    task = board_store.create_task(title="Ship it", team="ops").task
    with unchanged():
        refused(
            api.post(
                "/api/routines", body(agent, task_template={"team_task_id": task.id}), format="json"
            ),
            400,
            "bound_recurring",
        )
    assert board_store.get_task(task.id).scheduled_by == "manual"


def test_a_human_participant_is_a_4xx_saying_what_to_do_instead(api, human_agent):
    with unchanged():
        data = refused(
            api.post("/api/routines", body(human_agent), format="json"), 400, "validation_error"
        )
    assert data["field"] == "agent_id" and data["agent_id"] == "hal"
    assert "person" in data["detail"] and 'route: {"agent": "hal"}' in data["detail"]


# --- schedules: the read ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_schedules_are_200_with_the_gateway_not_configured(api, agent, outsider):
    rid = create(api, agent)["id"]
    response = api.get("/api/schedules")
    assert response.status_code == 200
    data = response.json()
    sources = {s["name"]: s for s in data["sources"]}
    assert sources["clawboo-routine"]["status"] == "ok"
    gateway = sources["openclaw-gateway-cron"]
    assert (gateway["status"], gateway["error"]) == ("degraded", "not configured")
    assert gateway["domain"] == "runtime-own-life" and gateway["manageability"] == "external-write"
    [row] = data["schedules"]
    assert row["id"] == f"clawboo-routine:{rid}" and row["domain"] == "team-task"
    assert outsider.get("/api/schedules").json()["schedules"] == []  # team scoping


def test_schedules_are_200_with_the_gateway_down(api, settings):
    settings.CLAWBOO_OPENCLAW_GATEWAY_URL = f"ws://127.0.0.1:{free_port()}"
    response = api.get("/api/schedules")
    assert response.status_code == 200
    gateway = {s["name"]: s for s in response.json()["sources"]}["openclaw-gateway-cron"]
    assert gateway["status"] == "degraded" and gateway["error"]


def test_schedules_list_the_gateways_cron(api, settings):
    fake = FakeGateway()
    try:
        fake.jobs["job1"] = {
            "id": "job1",
            "name": "nightly",
            "enabled": True,
            "state": {},
            "schedule": {"kind": "cron", "expr": "0 3 * * *"},
        }
        settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
        settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
        data = api.get("/api/schedules").json()
    finally:
        fake.close()
    [row] = data["schedules"]
    assert (row["id"], row["spec"], row["domain"]) == (
        "openclaw-gateway-cron:job1",
        "0 3 * * *",
        "runtime-own-life",
    )


# --- schedules: the writes ----------------------------------------------------------------


def test_a_routine_schedule_is_created_paused_run_and_deleted(api, agent):
    response = api.post(
        "/api/schedules", {"source": "clawboo-routine", **body(agent)}, format="json"
    )
    assert response.status_code == 201
    sid = response.json()["id"]
    assert sid.startswith("clawboo-routine:") and response.json()["domain"] == "team-task"
    paused = api.patch(f"/api/schedules/{sid}", {"action": "pause"}, format="json")
    assert paused.status_code == 200 and paused.json()["enabled"] is False
    with unchanged():
        refused(api.post(f"/api/schedules/{sid}/run"), 409, "illegal_transition")
    assert (
        api.patch(f"/api/schedules/{sid}", {"action": "resume"}, format="json").json()["status"]
        == "idle"
    )
    assert api.post(f"/api/schedules/{sid}/run").json()["status"] == "queued"
    assert api.delete(f"/api/schedules/{sid}").status_code == 204
    assert not Routine.objects.filter(pk=sid.split(":", 1)[1]).exists()


def test_routine_schedule_writes_follow_the_routine_rules(api, outsider, agent, human_agent):
    task = board_store.create_task(title="Ship it", team="ops").task
    with unchanged():
        refused(
            api.post(
                "/api/schedules",
                {
                    "source": "clawboo-routine",
                    **body(agent, task_template={"team_task_id": task.id}),
                },
                format="json",
            ),
            400,
            "bound_recurring",
        )
        refused(
            api.post(
                "/api/schedules", {"source": "clawboo-routine", **body(human_agent)}, format="json"
            ),
            400,
            "validation_error",
        )
        refused(
            api.post(
                "/api/schedules",
                {"source": "clawboo-routine", **body(agent, cron_spec="nope")},
                format="json",
            ),
            400,
            "validation_error",
        )
        refused(
            outsider.post(
                "/api/schedules", {"source": "clawboo-routine", **body(agent)}, format="json"
            ),
            400,
            "validation_error",
        )
    rid = create(api, agent)["id"]
    with unchanged():
        refused(outsider.delete(f"/api/schedules/clawboo-routine:{rid}"), 404, "not_found")
        refused(api.delete("/api/schedules/clawboo-routine:nope"), 404, "not_found")
    assert api.delete(f"/api/schedules/clawboo-routine:{rid}").status_code == 204


def test_unknown_sources_and_ids_are_404(api, staff):
    with unchanged():
        refused(
            api.post("/api/schedules", {"source": "cron.d", "x": 1}, format="json"),
            404,
            "not_found",
        )
        refused(api.post("/api/schedules", {"name": "x"}, format="json"), 400, "validation_error")
        refused(api.patch("/api/schedules/nonsense", {}, format="json"), 404, "not_found")
        refused(staff.delete("/api/schedules/nonsense"), 404, "not_found")
        refused(staff.post("/api/schedules/cron.d:1/run"), 404, "not_found")


def test_team_task_work_into_the_gateway_cron_is_422_domain_violation(staff):
    with unchanged():
        refused(
            staff.post(
                "/api/schedules",
                {"source": "openclaw-gateway-cron", "task_template": {"title": "x"}},
                format="json",
            ),
            422,
            "domain_violation",
        )
        refused(
            staff.post(
                "/api/schedules",
                {"source": "openclaw-gateway-cron", "domain": "team-task", "name": "x"},
                format="json",
            ),
            422,
            "domain_violation",
        )


def test_gateway_writes_without_a_gateway_are_503(staff):
    with unchanged():
        refused(
            staff.post(
                "/api/schedules", {"source": "openclaw-gateway-cron", "name": "n"}, format="json"
            ),
            503,
            "gateway_unavailable",
        )
        refused(
            staff.patch(
                "/api/schedules/openclaw-gateway-cron:job1", {"enabled": False}, format="json"
            ),
            503,
            "gateway_unavailable",
        )
        refused(
            staff.delete("/api/schedules/openclaw-gateway-cron:job1"), 503, "gateway_unavailable"
        )
        refused(
            staff.post("/api/schedules/openclaw-gateway-cron:job1/run"), 503, "gateway_unavailable"
        )


def test_only_staff_write_the_gateways_cron(api):
    with unchanged():
        refused(
            api.post(
                "/api/schedules", {"source": "openclaw-gateway-cron", "name": "n"}, format="json"
            ),
            403,
            "forbidden",
        )
        refused(api.delete("/api/schedules/openclaw-gateway-cron:job1"), 403, "forbidden")


def test_gateway_cron_writes_go_through_to_the_gateway(staff, settings):
    fake = FakeGateway()
    try:
        settings.CLAWBOO_OPENCLAW_GATEWAY_URL = fake.url
        settings.CLAWBOO_OPENCLAW_TOKEN = fake.token
        created = staff.post(
            "/api/schedules",
            {
                "source": "openclaw-gateway-cron",
                "name": "heartbeat",
                "schedule": {"kind": "cron", "expr": "*/10 * * * *"},
                "sessionTarget": "main",
                "wakeMode": "now",
                "payload": {"text": "hi"},
            },
            format="json",
        )
        assert created.status_code == 201, created.json()
        sid = created.json()["id"]
        assert (
            staff.patch(f"/api/schedules/{sid}", {"action": "pause"}, format="json").json()[
                "enabled"
            ]
            is False
        )
        assert staff.post(f"/api/schedules/{sid}/run").status_code == 200
        assert staff.delete(f"/api/schedules/{sid}").status_code == 204
        assert fake.jobs == {}
    finally:
        fake.close()


class ObserveOnlySource:
    name = "hermes-cron"
    domain = "runtime-own-life"
    manageability = "observe-only"

    def read(self) -> SourceRead:
        return SourceRead("ok", [])


def test_an_observe_only_source_refuses_writes_with_403(staff, monkeypatch):
    def mux(user):
        return routine_api.ScheduleMultiplexer(
            [
                ClawbooRoutineScheduleSource(),
                OpenClawGatewayCronScheduleSource(),
                ObserveOnlySource(),
            ]
        )

    monkeypatch.setattr(routine_api, "schedule_multiplexer", mux)
    with unchanged():
        refused(
            staff.post("/api/schedules", {"source": "hermes-cron", "name": "x"}, format="json"),
            403,
            "observe_only",
        )
        refused(staff.delete("/api/schedules/hermes-cron:1"), 403, "observe_only")
    names = [s["name"] for s in staff.get("/api/schedules").json()["sources"]]
    assert names == ["clawboo-routine", "openclaw-gateway-cron", "hermes-cron"]


def test_set_scheduled_by_refuses_an_unexpected_owner_and_nests_in_a_write(team):
    from core import storage
    from core.errors import Conflict

    task = board_store.create_task(title="Ship it", team="ops").task
    with unchanged(), pytest.raises(Conflict):
        board_store.set_scheduled_by(task.id, "clawboo", expect="openclaw")

    def outer() -> None:
        board_store.set_scheduled_by(task.id, "clawboo", expect="manual")
        board_store.set_scheduled_by(task.id, "clawboo")  # same owner: no revision bump

    storage.write(outer)
    stamped = board_store.get_task(task.id)
    assert (stamped.scheduled_by, stamped.revision) == ("clawboo", task.revision + 1)


def test_a_templates_verify_command_is_staffs_or_allowlisted_and_reaches_each_fire(
    api, staff, agent, settings
):
    from routines import fire

    template = {"title": "Tidy", "verify_cmd": "make check"}
    with unchanged():
        refused(api.post("/api/routines", body(agent, task_template=template), format="json"),
                403, "forbidden")  # fmt: skip
    made = create(staff, agent, task_template=template)
    assert made["task_template"]["verify_cmd"] == "make check"
    edit = {"task_template": {**template, "verify_cmd": "rm -rf build"}}
    refused(api.patch(f"/api/routines/{made['id']}", edit, format="json"), 403, "forbidden")
    settings.CLAWBOO_TASK_COMMAND_ALLOWLIST = ["make check"]
    create(api, agent, task_template=template)
    task = fire.materialize_task(Routine.objects.get(pk=made["id"]), START_MS)
    assert task.metadata["verify_cmd"] == "make check"
