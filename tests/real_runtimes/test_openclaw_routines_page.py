"""The routines page against the real OpenClaw Gateway (2026.9.6), in Chromium: a cron
job made with the real ``openclaw cron add`` CLI is listed beside a team routine,
each domain with the actions it allows (the gateway's own seeded jobs read only),
and deleting the team routine, then the gateway job, asks first and works."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from core import registry
from routines import store
from routines.models import Routine
from tests.live.browsing import CHROMIUM, launch
from tests.real_runtimes.gateway import ALL_SCOPES, GatewayClient, GatewayProcess
from tests.real_runtimes.hermetic import GATEWAY_TOKEN, installed, openclaw_env

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.real_runtimes,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(300),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def cron_add_with_the_cli(gateway: GatewayProcess, name: str) -> str:
    """``openclaw cron add`` as a person runs it against their gateway; the job's id."""
    tool = installed("openclaw")
    root = gateway.root
    env = openclaw_env(root / "home", root / "state", root / "openclaw.json")
    # The CLI answers in JSON by default, after a line of advice on stderr.
    done = subprocess.run(
        [str(tool.bin), "cron", "add", "--name", name, "--cron", "0 3 * * *", "--tz", "UTC"]
        + ["--message", "Compact your memory.", "--no-deliver"]
        + ["--url", gateway.url, "--token", GATEWAY_TOKEN, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return str(json.loads(done.stdout[done.stdout.index("{") :])["id"])


def moves_of(row) -> list[str]:
    return row.locator("[data-move]").evaluate_all("bs => bs.map(b => b.dataset.move)")


def test_the_page_lists_a_real_gateway_cron_job_beside_a_team_routine_and_deletes_after_asking(
    daphne,
    gateway: GatewayProcess,
    settings,
    monkeypatch,
) -> None:
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    name = f"Nightly compaction {uuid.uuid4().hex[:6]}"
    job_id = cron_add_with_the_cli(gateway, name)
    registry.ensure_team("ops", "Ops")
    ops = get_user_model().objects.create_user("oli", password="pw-oli-123", is_staff=True)
    # An operator: the gateway's own jobs are staff's, with the routine permissions.
    ops.user_permissions.set(Permission.objects.filter(content_type__app_label="routines"))
    registry.add_member("ops", ops)
    registry.create_agent(id="ops-bot", display_name="Ops bot", team="ops", runtime="command")
    routine = store.create_routine(
        agent_id="ops-bot", team="ops", cron_spec="0 9 * * 1-5", task_template={"title": "Triage"}
    )
    base = daphne(
        {"CLAWBOO_OPENCLAW_GATEWAY_URL": gateway.url, "CLAWBOO_OPENCLAW_TOKEN": GATEWAY_TOKEN}
    )
    with playwright_api.sync_playwright() as p:
        page = launch(p).new_page(viewport={"width": 1440, "height": 900})
        page.goto(base + "/board/login/?next=/board/routines/%3Fteam%3Dops")
        page.fill("input[name=username]", "oli")
        page.fill("input[name=password]", "pw-oli-123")
        page.click("#login")
        page.wait_for_url(lambda url: "/board/routines/" in url and "team=ops" in url)

        # Both domains, side by side, each with its own actions.
        team_row = page.locator(f"tbody#routine-{routine.id}")
        assert "Triage" in team_row.inner_text()
        assert moves_of(team_row) == ["pause", "run-now"]
        assert team_row.locator("a", has_text="Edit").count() == 1
        cron = page.locator("#gateway-cron")
        assert cron.get_attribute("data-status") == "ok"
        job = cron.locator(f"[data-schedule-id='openclaw-gateway-cron:{job_id}']")
        assert name in job.inner_text() and "0 3 * * *" in job.inner_text()
        assert "main" in job.inner_text()  # the gateway's default agent runs it
        assert job.get_attribute("data-manageability") == "external-write"
        assert moves_of(job) == ["pause", "run-now"]
        assert job.locator("a", has_text="Edit").count() == 0  # not team work: no routine form
        # The gateway's own seeded jobs (its heartbeat) are shown read only.
        seeded = cron.locator("[data-manageability=observe-only]")
        assert seeded.count() >= 1
        assert seeded.first.locator("[data-move], [data-delete]").count() == 0

        # Deleting the team routine asks first; confirming deletes it and keeps the team.
        team_row.locator(f"[data-delete='{routine.id}']").click()
        page.wait_for_selector("#confirm-delete")
        with page.expect_navigation():
            page.click("#confirm-delete")
        assert "team=ops" in page.url
        assert not Routine.objects.filter(pk=routine.id).exists()
        assert "Deleted routine" in page.inner_text("main")

        # The gateway job: pause reaches the real gateway, then delete after asking.
        with page.expect_navigation():
            job.locator("button[data-move=pause]").click()
        assert "disabled" in job.inner_text()
        job.locator("[data-delete]").click()
        page.wait_for_selector("#confirm-delete")
        assert name in page.inner_text("h1")
        with page.expect_navigation():
            page.click("#confirm-delete")
        assert "team=ops" in page.url
        assert f"Deleted gateway cron job {job_id}" in page.inner_text("main")
        assert job.count() == 0
    with GatewayClient(gateway.url, scopes=ALL_SCOPES) as client:
        listed = client.request("cron.list", {"includeDisabled": True})["jobs"]
    assert job_id not in [j["id"] for j in listed]
