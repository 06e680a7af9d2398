"""The review panel in a real browser: a task in review shows its diff, its run's
log and its verification evidence, and is approved from the page."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import registry
from executor.runner import Executor
from tests.fixtures.gitrepos import git
from tests.fixtures.runs import VERIFY_OK
from tests.live.browsing import CHROMIUM, log_in, screenshot

playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed"),
]


def test_the_review_panel_shows_the_work_and_approves_it(
    daphne,
    command_agent,
    repo,
    settings,
    tmp_path,
    monkeypatch,
    browser,
):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    command_agent("builder", "write")
    task = store.create_task(
        title="Add the feature flag",
        description="Write feature.txt with ok.",
        metadata={"verify_cmd": VERIFY_OK},
    ).task
    assert Executor("builder").work_once().worktree == "retained"
    assert store.get_task(task.id).status == "in_review"
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    page.locator(f"[data-status=in_review] [data-task-id='{task.id}']").click()

    panel = page.locator(f"#detail [data-review-for='{task.id}']")
    panel.wait_for(timeout=10_000)
    assert "feature.txt" in panel.locator("details.file summary").inner_text()
    assert panel.locator(".patch .add", has_text="+ok").count() == 1
    assert "1 file(s) changed" in panel.locator(".diffstat").inner_text()
    assert f"clawboo/task-{task.id}" in panel.locator(".branch").inner_text()
    assert "main" in panel.locator(".branch").inner_text()
    assert "pass" in panel.locator(".verdict-pass").inner_text()
    assert panel.locator("pre.evidence").inner_text().strip()
    run = panel.locator(".runs details")
    run.locator("summary").click()
    assert "did write" in run.locator("pre.log").inner_text()
    assert "builder" in run.locator("summary").inner_text()
    screenshot(page, "review.png", tmp_path)

    # Approving asks first, in the page's own dialog.
    page.click("#approve-btn")
    page.locator("#ask[open]").wait_for()
    screenshot(page, "board-approve.png", tmp_path)
    page.click("#ask-ok")
    page.wait_for_selector("#review-note[data-kind=ok]", timeout=15_000)
    assert "Landed" in page.locator("#review-note").inner_text()
    page.locator(f"[data-status=done] [data-task-id='{task.id}']").wait_for(timeout=5_000)
    # Opened again later, the done task says where its work is: it read "branch …
    # on main" alone, as if it still waited there.
    page.goto(f"{base}/board/?task={task.id}")
    landed = page.locator(f"#detail [data-review-for='{task.id}'] .landed")
    landed.wait_for(timeout=10_000)
    tip = git(repo, "rev-parse", "main")
    assert landed.inner_text() == f"landed as {tip[:12]} on main (approved by op)"
    deadline = time.monotonic() + 5
    while store.get_task(task.id).status != "done":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert git(repo, "show", "--name-only", "--format=", "main") == "feature.txt"


def test_findings_and_line_comments_render_at_their_lines_and_go_to_the_agent(
    daphne,
    command_agent,
    repo,
    settings,
    tmp_path,
    monkeypatch,
    browser,
):
    import json

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    command_agent("builder", "write")
    task = store.create_task(title="Add the flag", metadata={"verify_cmd": VERIFY_OK}).task
    Executor("builder").work_once()
    # What a critic would have said, at the file's first line.
    gate = store.get_task(task.id).as_dict()["verification"]["gate"]
    finding = {"severity": "crash", "title": "flag is lower case", "file": "feature.txt",
               "line": 1, "body": "callers compare with OK"}  # fmt: skip
    detail = {"gate": gate, "findings": [finding], "reviewer": None, "attempts": []}
    store.record_verification(task.id, "fail", "the reviewer found 1 blocking issue", detail)
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    page.locator(f"[data-status=in_review] [data-task-id='{task.id}']").click()
    panel = page.locator(f"#detail [data-review-for='{task.id}']")
    panel.wait_for(timeout=10_000)
    diff = panel.locator(".patch[data-file='feature.txt']")
    shown = diff.locator(".finding[data-line='1']")
    assert "flag is lower case" in shown.inner_text()
    # At its line: right under the diff's row for line 1 of feature.txt.
    assert shown.evaluate("n => n.previousElementSibling.dataset.line") == "1"
    assert "+ok" in shown.evaluate("n => n.previousElementSibling.textContent")

    diff.locator(".ln[data-line='1'] button.gutter").click()
    diff.locator(".comment-form textarea").fill("write OK in capitals")
    diff.locator(".comment-form .comment-add").click()
    comment = diff.locator(".line-comment[data-line='1']")
    assert "write OK in capitals" in comment.inner_text()
    assert (
        comment.evaluate(
            "n => { let p = n.previousElementSibling;"
            " while (p && !p.classList.contains('ln')) p = p.previousElementSibling;"
            " return p.dataset.line; }"
        )
        == "1"
    )
    screenshot(page, "review-findings.png", tmp_path)

    page.click("#request-changes-btn")
    page.locator("#ask[open]").wait_for()
    assert "1 line comment(s)" in page.locator("#review-comment-count").inner_text()
    page.click("#ask-ok")
    page.wait_for_selector("#review-note[data-kind=ok]", timeout=15_000)
    sent = store.get_task(task.id)
    assert sent.status == "in_progress" and "- feature.txt:1: write OK in capitals" in sent.feedback
    worktree = Path(sent.worktree_ref)
    handoff = json.loads((worktree / "AGENT_HANDOFF.json").read_text())
    assert "feature.txt:1: write OK in capitals" in handoff["brokenOrUnverified"][0]
    assert Executor("builder").work_once().task_id == task.id  # the agent's next run
    assert "feature.txt:1: write OK in capitals" in (worktree / "TASK.md").read_text()


def test_the_boards_new_task_carries_a_verify_command(daphne, settings, monkeypatch, browser):
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    page.click("#new-task-btn")
    page.fill("#new-task-form [name=title]", "Judged from the start")
    page.fill("#new-task-verify", "pytest -q")
    page.click("#create-task")
    page.locator("[data-status=todo] .card", has_text="Judged from the start").wait_for(
        timeout=10_000
    )
    [task] = store.list_tasks(team="default")
    assert task.metadata == {"verify_cmd": "pytest -q"}


# "Trojan Source": the override and isolates make the line read as a comment after the
# check, while the check compares against a string that ends in the "comment".
TROJAN = 'if role != "user\u202e \u2066// admins only\u2069 \u2066":\n    allow()\n'
TROJAN_SCRIPT = (
    "import pathlib; pathlib.Path('feature.txt').write_text('ok\\n'); "
    f"pathlib.Path('auth.py').write_text({TROJAN!r})"
)


def test_a_diff_line_shows_its_bidi_controls_instead_of_being_reordered_by_them(
    daphne, repo, settings, tmp_path, monkeypatch, browser
):
    """A person approves what the diff looks like: a bidi override or isolate in an
    agent's line would reorder it on the page into something else than the code it
    is. Each such character shows as a marker naming it, the line's text is its order
    in the file."""
    import sys

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    registry.create_agent(
        id="sly",
        display_name="Sly",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", TROJAN_SCRIPT], "repo_path": str(repo)},
    )
    task = store.create_task(title="Tighten auth", metadata={"verify_cmd": VERIFY_OK}).task
    assert Executor("sly").work_once().verdict == "pass"
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    page.locator(f"[data-status=in_review] [data-task-id='{task.id}']").click()
    patch = page.locator(f"#detail [data-review-for='{task.id}'] .patch[data-file='auth.py']")
    patch.wait_for(timeout=10_000)
    line = patch.locator(".ln.add", has_text="if role").inner_text()
    screenshot(page, "review-bidi.png", tmp_path)
    assert not set(line) & {"\u202e", "\u2066", "\u2069"}, repr(line)
    assert '+if role != "user[U+202E] [U+2066]// admins only[U+2069] [U+2066]":' in line


def test_a_landing_whose_push_failed_says_so_where_it_says_landed(
    daphne, command_agent, repo, settings, tmp_path, monkeypatch, browser
):
    """Approving lands the change on the base branch, then pushes the branch to the
    repository's ``remote``. A failed push was only a comment on the task: the page
    (and ``clawboo``) said "Landed … on main." in green, and the person went on
    believing the remote had it -- the next remote worker clones without it."""
    from clawboo import people
    from core import repositories

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    user = get_user_model().objects.create_superuser("op", "op@example.com", "pw-op-123")
    registry.add_member("default", user)
    gone = tmp_path / "gone.git"  # a remote that is not there
    repositories.register(team="default", path=str(repo), id="app", remote=str(gone))
    command_agent("builder", "write")
    task = store.create_task(
        title="Add the flag", repository="app", metadata={"verify_cmd": VERIFY_OK}
    ).task
    assert Executor("builder").work_once().verdict == "pass"
    base = daphne()
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    log_in(page, base, "op", "pw-op-123")
    page.locator(f"[data-status=in_review] [data-task-id='{task.id}']").click()
    page.click("#approve-btn")
    page.locator("#ask[open]").wait_for()
    page.click("#ask-ok")
    note = page.locator("#review-note[data-kind=bad]")
    note.wait_for(timeout=15_000)
    said = note.inner_text()
    screenshot(page, "review-push-failed.png", tmp_path)
    assert said.startswith("Landed ") and f"the push of main to {gone} failed" in said, said
    assert store.get_task(task.id).status == "done"
    answer = {
        "result": "landed",
        "task": {"id": task.id},
        "base_branch": "main",
        "commit": "c0db8c22522ffac5",
        "strategy": "squash",
        "push": {"pushed": False, "branch": "main", "remote": str(gone), "error": "exit 128"},
    }
    line = people.landed_line(answer)
    assert line.startswith(f"landed {task.id} on main as c0db8c22522f (squash)")
    assert f"but the push of main to {gone} failed: exit 128" in line
