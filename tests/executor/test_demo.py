"""`clawboo demo` sets up work that the executor really does."""

from __future__ import annotations

import os

import pytest
from django.core.management import call_command

from board import store
from executor.runner import Executor

pytestmark = pytest.mark.django_db


def test_the_demo_chain_is_worked_verified_and_lands_in_review(tmp_path, settings, capsys):
    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    settings.CLAWBOO_REPO_ROOTS = []
    call_command("demo", "--dir", str(tmp_path / "demo"))
    call_command("demo", "--dir", str(tmp_path / "demo"))  # idempotent
    executor = Executor("demo-coder")
    first = executor.work_once()
    assert first.task_id == "demo-multiply" and first.verdict == "pass", first
    assert store.get_task("demo-multiply").status == "in_review"
    # The chain waits for its first link to be done (a reviewer approves it).
    assert executor.work_once().outcome == "idle"
    store.transition("demo-multiply", "done")
    second = executor.work_once()
    assert second.task_id == "demo-divide" and second.verdict == "pass"
    assert store.get_task("demo-divide").status == "in_review"
    said = capsys.readouterr().out
    assert "ready" in said
    # The paused routine named only the API and the admin, not the page a person has.
    assert "resume it on the routines page, http://127.0.0.1:8000/board/routines/?team=demo" in said


def test_the_demo_links_to_the_board_where_up_serves_it(tmp_path, settings, capsys):
    from clawboo import boot

    state = settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    settings.CLAWBOO_REPO_ROOTS = []
    settings.CLAWBOO_PUBLIC_URL = ""
    # `up --port 8123` beside it: the link names that port (it read "/board/?team=demo",
    # which no terminal or browser could open).
    lock = boot.hold_up_lock(state, "http://127.0.0.1:8123")
    try:
        call_command("demo", "--dir", str(tmp_path / "demo"))
    finally:
        os.close(lock)
    said = capsys.readouterr().out
    assert "open http://127.0.0.1:8123/board/?team=demo and watch" in said
    assert "routines page, http://127.0.0.1:8123/board/routines/?team=demo," in said
    # That `up` is gone (its address still in the file): `up`'s default, still a link.
    assert (state / boot.UP_LOCK_FILE).read_text() == "http://127.0.0.1:8123\n"
    call_command("demo", "--dir", str(tmp_path / "demo"))
    assert "open http://127.0.0.1:8000/board/?team=demo and watch" in capsys.readouterr().out
    # A public URL set for the server wins.
    settings.CLAWBOO_PUBLIC_URL = "https://boo.example.org"
    call_command("demo", "--dir", str(tmp_path / "demo"))
    assert "open https://boo.example.org/board/?team=demo and watch" in capsys.readouterr().out


@pytest.mark.django_db(transaction=True)
def test_the_demo_repository_lands_approvals_through_its_merge_queue(tmp_path, settings):
    from core.models import Repository
    from worktrees import service

    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    settings.CLAWBOO_REPO_ROOTS = []
    call_command("demo", "--dir", str(tmp_path / "demo"))
    repo = Repository.objects.get(team_id="demo")
    assert (repo.landing_mode, repo.verify_cmd) == ("queue", 'python3 -c "import calc"')
    assert Executor("demo-coder").work_once().verdict == "pass"
    answer = service.approve("demo-multiply", by="op")
    assert (answer["result"], answer["position"]) == ("queued", 1)
    # Tests run django-q2 inline: the queue's job ran on commit and landed it.
    assert store.get_task("demo-multiply").status == "done"
    assert "def multiply" in (tmp_path / "demo" / "shop" / "calc.py").read_text()


def test_the_demo_run_again_after_the_tour_says_its_tasks_are_over(tmp_path, settings, capsys):
    # Run again after the tour it said "watch the tasks get claimed": of two tasks long
    # done, which no worker would ever claim.
    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    settings.CLAWBOO_REPO_ROOTS = []
    call_command("demo", "--dir", str(tmp_path / "demo"))
    for task_id in ("demo-multiply", "demo-divide"):
        store.transition(task_id, "cancelled")
    capsys.readouterr()
    call_command("demo", "--dir", str(tmp_path / "demo"))
    said = capsys.readouterr().out
    assert "demo: task demo-multiply: Add multiply() to calc.py (there already: cancelled)" in said
    assert "watch the tasks get claimed" not in said
    assert said.splitlines()[-1].startswith("demo: ready; its tasks are over. Open ")
    assert "`clawboo task create TITLE --team demo`" in said
