"""The routines page and the console in a real browser (headless Chromium, Playwright)
against a real daphne on the test database."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store as board_store
from core import registry
from routines import store
from routines.models import Routine, RoutineFire, RoutineStatus
from routines.wording import local_stamp
from tests.live.browsing import log_in
from tests.routines.fake_gateway import FakeGateway

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "img"
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """docs/img/ only when asked (CLAWBOO_SCREENSHOTS=1): a test run leaves the tree alone."""
    if os.environ.get("CLAWBOO_SCREENSHOTS") == "1":
        DOCS.mkdir(parents=True, exist_ok=True)
        return DOCS / name
    return tmp_path / name


def row(page, routine_id: str):
    return page.locator(f"tbody#routine-{routine_id}")


def test_a_person_creates_edits_and_pauses_a_routine_on_the_page(
    daphne, tmp_path, settings, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    registry.ensure_team("ops", "Ops")
    mia = get_user_model().objects.create_user("mia", password="pw-mia-123")
    registry.add_member("ops", mia)
    registry.create_agent(
        id="mine", display_name="Mia's agent", team="ops", runtime="command", owner=mia
    )
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(base + "/board/routines/")  # not logged in: the board's login first
    page.wait_for_url(lambda url: "/board/login/" in url)
    page.fill("input[name=username]", "mia")
    page.fill("input[name=password]", "pw-mia-123")
    page.click("#login")
    page.wait_for_url(base + "/board/routines/")
    assert "No routines" in page.inner_text("main")

    # Create.
    page.click("#new-routine")
    page.wait_for_url(base + "/board/routines/new/")
    page.select_option("#id_agent", "mine")
    page.fill("#id_cron_spec", "0 9 * * 1-5")
    page.select_option("#id_timezone", "America/New_York")
    page.fill("#id_title", "Morning triage")
    page.select_option("#id_kind", "research")
    with page.expect_navigation():
        page.click("#save-routine")
    routine = Routine.objects.get()
    assert (routine.agent_id, routine.cron_spec, routine.timezone) == (
        "mine",
        "0 9 * * 1-5",
        "America/New_York",
    )
    assert routine.task_template["title"] == "Morning triage"
    mine = row(page, routine.id)
    assert mine.get_attribute("data-state") == "armed"
    assert mine.locator(".words").inner_text() == "At 09:00, Monday through Friday"
    shown = mine.locator("td.next time").inner_text()
    assert shown == local_stamp(routine.next_run_at, "America/New_York")
    assert shown.endswith((" 09:00 EST", " 09:00 EDT"))

    # The same schedule on UTC reads 09:00 UTC: each routine in its own timezone.
    utc = store.create_routine(agent_id="mine", team="ops", cron_spec="0 9 * * 1-5")
    page.reload()
    assert row(page, utc.id).locator("td.next time").inner_text().endswith(" 09:00 UTC")

    # Edit: a bad spec is refused beside its field and changes nothing; a good one saves.
    row(page, routine.id).locator("a", has_text="Edit").click()
    page.wait_for_url(f"{base}/board/routines/{routine.id}/edit/")
    assert page.input_value("#id_title") == "Morning triage"
    page.fill("#id_cron_spec", "0 25 * * *")
    with page.expect_navigation():
        page.click("#save-routine")
    error = page.locator("[data-field=cron_spec] .field-error").inner_text()
    assert "is not a valid cron expression" in error
    assert store.get_routine(routine.id).cron_spec == "0 9 * * 1-5"
    page.fill("#id_cron_spec", "30 7 * * *")
    page.fill("#id_title", "Early triage")
    with page.expect_navigation():
        page.click("#save-routine")
    routine = store.get_routine(routine.id)
    assert routine.cron_spec == "30 7 * * *"
    assert routine.task_template["title"] == "Early triage"
    assert "At 07:30" in row(page, routine.id).locator(".words").inner_text()

    # Pause.
    with page.expect_navigation():
        row(page, routine.id).locator("button[data-move=pause]").click()
    assert store.get_routine(routine.id).status == RoutineStatus.PAUSED
    assert row(page, routine.id).get_attribute("data-state") == "paused"
    assert "Paused" in row(page, routine.id).inner_text()
    assert row(page, routine.id).locator("button[data-move=resume]").count() == 1

    # A fire with its task, for the picture.
    task = board_store.create_task(title="Early triage", team="ops").task
    RoutineFire.objects.create(
        routine=utc,
        slot_at=utc.next_run_at - 86_400_000,
        task_id=task.id,
        outcome="dispatched",
        fired_at=utc.created_at,
    )
    # As the fire path records it on the routine too (the "Last fire" column).
    Routine.objects.filter(pk=utc.pk).update(last_run_at=utc.next_run_at - 86_400_000)
    page.reload()
    row(page, utc.id).locator("details summary").click()
    link = row(page, utc.id).locator("a.task")
    assert link.inner_text().startswith("Early triage")
    assert link.get_attribute("href") == f"/board/?team=ops&task={task.id}"
    page.screenshot(path=str(screenshot_path(tmp_path, "routines.png")), full_page=True)


def test_the_task_changelist_fits_a_1440_pixel_screen(
    daphne, tmp_path, settings, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    for n in range(5):
        created = board_store.create_task(
            title=f"Make the importer resumable after a crash, part {n}",
            labels=["backend", "importer"],
        ).task
        if n % 2:
            board_store.claim(created.id, f"agent-with-a-longish-name-{n}")
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    log_in(page, base, "op", "pw-op-123", "/admin/board/task/")
    assert page.title().endswith("| Clawboo console")
    fits = page.evaluate(
        """() => {
            const results = document.querySelector('#changelist .results');
            const table = document.querySelector('#result_list');
            return {
                scroll: results.scrollWidth, client: results.clientWidth,
                right: table.getBoundingClientRect().right, viewport: window.innerWidth,
            };
        }"""
    )
    assert fits["scroll"] <= fits["client"], fits
    assert fits["right"] <= fits["viewport"], fits
    page.screenshot(path=str(tmp_path / "admin-tasks.png"))


def test_the_agent_changelist_fits_a_1440_pixel_screen(
    daphne, tmp_path, settings, monkeypatch, browser
):
    # Its last column ran past the list's edge ("Dec. 7, 202…") beside the filters.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    owner = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.ensure_team("acme", "Acme and Partners")
    for n, runtime in enumerate(("command", "claude-code", "human")):
        registry.create_agent(
            id=f"shell-bot-with-a-long-name-{n}",
            display_name=f"Shell bot number {n}",
            team="acme",
            runtime=runtime,
            owner=owner,
        )
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    log_in(page, base, "op", "pw-op-123", "/admin/clawboo/agent/")
    fits = page.evaluate(
        """() => {
            const results = document.querySelector('#changelist .results');
            const table = document.querySelector('#result_list');
            return {
                scroll: results.scrollWidth, client: results.clientWidth,
                right: table.getBoundingClientRect().right, viewport: window.innerWidth,
            };
        }"""
    )
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-agents.png")))
    assert fits["scroll"] <= fits["client"], fits
    assert fits["right"] <= fits["viewport"], fits


def test_the_routine_changelist_fits_1440_px_and_filters_by_the_state_it_shows(
    daphne, tmp_path, settings, monkeypatch, browser
):
    # It ran past the screen ("next fire (routin…" cut off), filtered by ledger words
    # ("Idle", "Claimed") the state column never shows, and named a routine by its id.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.ensure_team("acme", "Acme")
    registry.create_agent(
        id="shell-bot-with-a-long-name", display_name="Shell bot", team="acme", runtime="command"
    )
    armed = store.create_routine(
        agent_id="shell-bot-with-a-long-name",
        team="acme",
        cron_spec="*/2 * * * *",
        timezone="America/New_York",
        task_template={"title": "Say hello to the whole team"},
    )
    paused = store.create_routine(
        agent_id="shell-bot-with-a-long-name",
        team="acme",
        cron_spec="0 9 * * 1-5",
        task_template={"title": "Tidy the notes"},
    )
    store.pause_routine(paused.id)
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    log_in(page, base, "op", "pw-op-123", "/admin/routines/routine/")
    fits = page.evaluate(
        """() => {
            const results = document.querySelector('#changelist .results');
            const table = document.querySelector('#result_list');
            return {
                scroll: results.scrollWidth, client: results.clientWidth,
                right: table.getBoundingClientRect().right, viewport: window.innerWidth,
            };
        }"""
    )
    page.screenshot(path=str(screenshot_path(tmp_path, "admin-routines.png")))
    assert fits["scroll"] <= fits["client"], fits
    assert fits["right"] <= fits["viewport"], fits
    choices = page.locator("#changelist-filter").inner_text().lower()
    assert "armed" in choices and "late" in choices
    assert "idle" not in choices and "claimed" not in choices
    page.click("#changelist-filter a:text-is('paused')")
    page.wait_for_url(lambda url: "state=paused" in url)
    rows = page.locator("#result_list tbody tr")
    assert rows.count() == 1 and "Tidy the notes" in rows.inner_text()
    page.click("#result_list a:text-is('Tidy the notes')")
    page.wait_for_url(lambda url: f"/{paused.id}/change/" in url)
    assert str(Routine.objects.get(pk=armed.id)) == (
        f"Say hello to the whole team · */2 * * * * · {armed.id[:6]}"
    )


def test_the_page_keeps_its_team_across_actions_and_deletes_only_after_asking(
    daphne, settings, monkeypatch, browser
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    registry.ensure_team("ops", "Ops")
    registry.ensure_team("web", "Web")
    mia = get_user_model().objects.create_user("mia", password="pw-mia-123")
    registry.add_member("ops", mia)
    registry.add_member("web", mia)
    for team in ("ops", "web"):
        registry.create_agent(
            id=f"{team}-bot", display_name=team, team=team, runtime="command", owner=mia
        )
    mine = store.create_routine(agent_id="ops-bot", team="ops", cron_spec="0 9 * * *")
    other = store.create_routine(agent_id="web-bot", team="web", cron_spec="0 10 * * *")
    base = daphne()
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    # The page's own clock, so its 10 s refresh can be brought forward below; it
    # runs on as a real one would.
    page.clock.install()
    page.goto(base + "/board/login/?next=/board/routines/%3Fteam%3Dops")
    page.fill("input[name=username]", "mia")
    page.fill("input[name=password]", "pw-mia-123")
    page.click("#login")
    page.wait_for_url(lambda url: "team=ops" in url)
    assert row(page, other.id).count() == 0

    # Pause, resume and run now each come back to the ops list.
    for move in ("pause", "resume", "run-now"):
        with page.expect_navigation():
            row(page, mine.id).locator(f"button[data-move={move}]").click()
        assert "team=ops" in page.url, (move, page.url)
        assert row(page, other.id).count() == 0
        assert page.locator("select[name=team]").input_value() == "ops"

    # Delete asks first; Cancel keeps the routine, and the team.
    row(page, mine.id).locator(f"[data-delete='{mine.id}']").click()
    page.wait_for_selector("#confirm-delete")
    assert "Delete routine" in page.inner_text("h1")
    page.click("#cancel-delete")
    page.wait_for_url(lambda url: "team=ops" in url and "/delete/" not in url)
    assert Routine.objects.filter(pk=mine.id).exists()
    row(page, mine.id).locator(f"[data-delete='{mine.id}']").click()
    page.wait_for_selector("#confirm-delete")
    with page.expect_navigation():
        page.click("#confirm-delete")
    assert "team=ops" in page.url
    assert not Routine.objects.filter(pk=mine.id).exists()
    assert Routine.objects.filter(pk=other.id).exists()
    assert "Deleted routine" in page.inner_text("main")

    # The list refreshes itself: a routine made elsewhere shows without a reload.
    later = store.create_routine(agent_id="ops-bot", team="ops", cron_spec="0 11 * * *")
    page.clock.fast_forward(10_000)  # the refresh's interval, not waited out
    row(page, later.id).wait_for(timeout=15_000)
    assert "team=ops" in page.url

    # The gateway's own-life cron has its own section; unconfigured here, it says so.
    assert "not configured" in page.inner_text("#gateway-cron")

    # New routine: a preset fills the schedule.
    page.click("#new-routine")
    page.click("#cron-presets [data-cron='0 9 * * 1-5']")
    assert page.locator("#id_cron_spec").input_value() == "0 9 * * 1-5"

    # On a phone the column heads fold away: each time says whether it is the next
    # fire or the last (two bare dates read the same).
    labels = "(s) => getComputedStyle(document.querySelector(s), '::before').content"
    page.goto(base + "/board/routines/?team=ops")
    assert page.evaluate(labels, f"#routine-{later.id} td.next") == "none"
    page.set_viewport_size({"width": 390, "height": 844})
    for cell, label in (("td.next", "Next fire"), ("td.last", "Last fire")):
        assert page.evaluate(labels, f"#routine-{later.id} {cell}") == f'"{label}"'
    page.set_viewport_size({"width": 1440, "height": 900})

    # A dark system: the routines, the form and usage are dark as the board is
    # (they stayed white between the board's dark pages), and their text reads.
    page.emulate_media(color_scheme="dark")
    for path in ("/board/routines/?team=ops", "/board/usage/?team=ops"):
        page.goto(base + path)
        for selector in ("body", "table.routines", "table.routines th"):
            dark = page.evaluate(LUMINANCE_JS, selector)
            assert dark["bg"] < 0.05, (path, selector, dark)
            assert dark["contrast"] >= 4.5, (path, selector, dark)
    page.click("text=Routines")
    page.click("#new-routine")
    field = page.evaluate(LUMINANCE_JS, "#id_cron_spec")
    assert field["bg"] < 0.05 and field["contrast"] >= 4.5, field


# The relative luminance of an element's own (or nearest painted) background, and the
# WCAG contrast of its text against it.
LUMINANCE_JS = """(selector) => {
  const node = document.querySelector(selector);
  const rgba = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = (c) => {
    const lin = (v) => (v / 255 <= 0.03928 ? v / 255 / 12.92 : ((v / 255 + 0.055) / 1.055) ** 2.4);
    const [r, g, b] = rgba(c).slice(0, 3).map(lin);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  let at = node, bg = getComputedStyle(at).backgroundColor;
  while (at && rgba(bg)[3] === 0) {
    at = at.parentElement;
    bg = at ? getComputedStyle(at).backgroundColor : "rgb(255, 255, 255)";
  }
  const [a, b] = [lum(getComputedStyle(node).color), lum(bg)].sort((x, y) => y - x);
  return { bg: lum(bg), contrast: (a + 0.05) / (b + 0.05) };
}"""


def test_a_gateway_cron_job_is_listed_beside_a_team_routine(daphne, settings, monkeypatch, browser):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    registry.ensure_team("ops", "Ops")
    mia = get_user_model().objects.create_user("mia", password="pw-mia-123")
    registry.add_member("ops", mia)
    registry.create_agent(
        id="ops-bot", display_name="ops", team="ops", runtime="command", owner=mia
    )
    routine = store.create_routine(agent_id="ops-bot", team="ops", cron_spec="0 9 * * *")
    gateway = FakeGateway()
    # As the real gateway lists them: a job made with `openclaw cron add` (no agentId,
    # the default agent as effectiveAgentId) and one it seeded for itself.
    gateway.jobs["job1"] = {
        "id": "job1",
        "name": "Nightly memory compaction",
        "enabled": True,
        "schedule": {"kind": "cron", "expr": "0 3 * * *", "tz": "UTC"},
        "state": {"nextRunAtMs": 1796439600000},
        "nextRunAtMs": 1796439600000,
        "effectiveAgentId": "main",
    }
    gateway.jobs["hb"] = {
        "id": "hb",
        "declarationKey": "heartbeat:main",
        "displayName": "Heartbeat (main)",
        "agentId": "main",
        "name": "heartbeat-main",
        "enabled": True,
        "schedule": {"kind": "every", "everyMs": 1800000, "anchorMs": 188561},
        "state": {"nextRunAtMs": 1796403788561},
        "effectiveAgentId": "main",
    }
    try:
        base = daphne(
            {
                "CLAWBOO_OPENCLAW_GATEWAY_URL": gateway.url,
                "CLAWBOO_OPENCLAW_TOKEN": gateway.token,
            }
        )
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(base + "/board/login/?next=/board/routines/")
        page.fill("input[name=username]", "mia")
        page.fill("input[name=password]", "pw-mia-123")
        page.click("#login")
        page.wait_for_url(base + "/board/routines/")
        assert row(page, routine.id).count() == 1
        job = page.locator("#gateway-cron [data-schedule-id='openclaw-gateway-cron:job1']")
        assert "Nightly memory compaction" in job.inner_text()
        assert "0 3 * * *" in job.inner_text() and "main" in job.inner_text()
        assert page.locator("#gateway-cron").get_attribute("data-status") == "ok"
        # Mia is not staff: the gateway's jobs are hers to see, not to operate.
        assert job.locator("[data-move], [data-delete]").count() == 0
        assert "staff operate it" in job.inner_text()
        seeded = page.locator("#gateway-cron [data-schedule-id='openclaw-gateway-cron:hb']")
        assert "Heartbeat (main)" in seeded.inner_text()
        assert seeded.get_attribute("data-manageability") == "observe-only"
    finally:
        gateway.close()
