"""A remote task the server's judge sends back to fix is fixed on the remote host under
the same claim, as a local fix round is: real daphne, a real qcluster (the intake),
a real ``clawboo worker`` subprocess with no database, a bare remote.

The worker waits for its submission's intake holding the claim, runs the agent again
in the same worktree with the judge's feedback in its prompt (rendered by the
server), pushes and submits again; the judge's ``CLAWBOO_MAX_FIX_CYCLES`` bounds the
rounds because the claim, and so the fix count, carries on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from board import store
from core import machines, registry, repositories
from core.models import Event
from ops import notify
from tests.conftest import ROOT
from tests.executor.test_remote_worker import bare_remote, git, start_worker, wait_for
from worktrees import service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

FIX_WORDS = "verification gate failed"
# The agent: keeps every prompt it is given (outside its worktree), and writes ``ok``
# only once its prompt carries the judge's feedback -- so a pass proves it arrived.
AGENT = (
    'cat "$CLAWBOO_PROMPT_FILE" > "$PROMPTS/$(date +%s%N).txt"; '
    f'if grep -q "{FIX_WORDS}" "$CLAWBOO_PROMPT_FILE"; then echo ok > out.txt; '
    "else echo broken > out.txt; fi; echo did it"
)
# The worker's lease: a fix round that waited for it to lapse would take longer than
# these tests allow.
LEASE_MS = 30_000


@pytest.fixture
def server(daphne, database_url, tmp_path, settings):
    """A registered repository ``app`` with a bare remote; daphne and a qcluster on the
    test database; returns (base URL, repo, remote, prompts dir, a setter of the
    repository's verify command and the fix cycles, before the server starts)."""
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [roots]
    # The server's state (its checkouts), where this process lands them too.
    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    repo = roots / "app"
    git("clone", "-q", str(bare_remote(tmp_path)), str(repo), cwd=tmp_path)
    remote = Path(git("remote", "get-url", "origin", cwd=repo))
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    procs: list[subprocess.Popen[bytes]] = []

    def start(verify_cmd: str, max_fix_cycles: int) -> str:
        repositories.register(
            team="default", path=str(repo), id="app", remote=str(remote), verify_cmd=verify_cmd
        )
        registry.create_agent(
            id="far-bot",
            display_name="Far",
            team="default",
            runtime="command",
            settings={"argv": ["sh", "-c", AGENT], "repository": "app"},
        )
        env = {
            "CLAWBOO_HTTP_RATE_LIMIT": "0",
            "CLAWBOO_REPO_ROOTS": str(roots),
            "CLAWBOO_MAX_FIX_CYCLES": str(max_fix_cycles),
            "CLAWBOO_Q_WORKERS": "1",
        }
        base = daphne(env)
        qenv = {
            **os.environ,
            **env,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "clawboo.settings",
            "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
            "PYTHONPATH": str(ROOT),
        }
        log = open(tmp_path / "qcluster.log", "ab")  # noqa: SIM115 - closed with the process
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "clawboo.cli", "qcluster"],
                env=qenv,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        return base

    yield start, repo, remote, prompts
    for proc in procs:  # its graceful stop takes seconds, and nothing is left to save
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def kinds(task_id: str) -> list[str]:
    events = Event.objects.filter(task_id=task_id).order_by("seq")
    return list(events.values_list("kind", flat=True))


def person_reasons(task_id: str) -> list[str]:
    events = Event.objects.filter(task_id=task_id).order_by("seq")
    return [r for r in (notify.reason_for(e) for e in events) if r is not None]


def prompts_given(prompts: Path) -> list[str]:
    return [p.read_text() for p in sorted(prompts.iterdir())]


def run_worker(base: str, tmp_path: Path, prompts: Path) -> subprocess.Popen[str]:
    _, key = machines.mint("laptop", ["far-bot"])
    return start_worker(
        base,
        key,
        tmp_path,
        "far-bot",
        extra=("--lease-ms", str(LEASE_MS), "--poll", "120"),
        env_add={"PROMPTS": str(prompts)},
    )


def test_a_remote_task_sent_back_to_fix_is_fixed_under_the_same_claim_then_lands(server, tmp_path):
    start, repo, remote, prompts = server
    base = start("grep -qx ok out.txt", max_fix_cycles=1)
    task = store.create_task(title="Add feature", description="write out.txt", repository="app")
    task_id = task.task.id
    worker = run_worker(base, tmp_path, prompts)
    try:
        wait_for(
            lambda: store.get_task(task_id).status == "in_progress", 30, "claimed", None, tmp_path
        )
        claimed_at = time.monotonic()
        wait_for(
            lambda: store.get_task(task_id).status == "in_review",
            60,
            lambda: f"in review: {store.get_task(task_id).output}",
            None,
            tmp_path,
        )
        took = time.monotonic() - claimed_at
    finally:
        worker.kill()
        worker.wait(10)
    # One fix round, on the claim taken first: no lease lapsed, nobody claimed anew.
    assert took < LEASE_MS / 1000, took
    done = store.get_task(task_id)
    assert done.verdict == "pass" and done.attempts == 1 and done.abandonments == 0
    assert done.as_dict()["verification"]["attempts"][0]["gate"]["exit_code"] == 1
    assert len(done.as_dict()["verification"]["attempts"]) == 2
    events = kinds(task_id)
    assert events.count("claimed") == 1 and "released" not in events, events
    assert events.count("work_submitted") == 2 and events.count("fix_requested") == 1, events
    assert [x.status for x in store.list_executions(task_id)] == ["succeeded", "succeeded"]
    # The first prompt is the task; the second carries the judge's {what, why, how_to_fix}
    # in the words a local run's prompt gives it.
    first, second = prompts_given(prompts)
    assert f"Task {task_id}: Add feature" in first and FIX_WORDS not in first
    assert f"Feedback from the previous attempt: {FIX_WORDS}" in second
    assert "grep -qx ok out.txt` exited 1" in second and "How to fix: make `" in second
    assert "Broken or unverified: verification gate failed" in second  # the handoff's
    # Then review and land, from the pushed branch, on the server and the remote.
    landed = service.approve(task_id, by="ada")
    assert landed["result"] == "landed" and landed["push"]["pushed"], landed
    assert git("show", "main:out.txt", cwd=remote) == "ok"
    assert git("rev-parse", "main", cwd=remote) == git("rev-parse", "main", cwd=repo)
    assert person_reasons(task_id) == ["review"]


def test_a_gate_that_always_fails_gets_the_fix_rounds_then_debt_and_one_notification(
    server, tmp_path
):
    start, _repo, _remote, prompts = server
    base = start("grep -qx never out.txt", max_fix_cycles=2)
    task_id = store.create_task(title="Add feature", repository="app").task.id
    worker = run_worker(base, tmp_path, prompts)
    try:
        wait_for(
            lambda: store.get_task(task_id).status == "blocked",
            90,
            lambda: f"blocked: {store.get_task(task_id).output}",
            None,
            tmp_path,
        )
        # The worker is done with it: nothing more is run or submitted.
        time.sleep(1.5)
    finally:
        worker.kill()
        worker.wait(10)
    task = store.get_task(task_id)
    assert task.verdict == "completed_with_debt"
    assert "completed with debt after 3 attempt(s)" in task.feedback
    assert task.attempts == 1 and task.abandonments == 0
    verification = task.as_dict()["verification"]
    assert len(verification["attempts"]) == 3  # the first run and exactly 2 fix rounds
    assert all(a["gate"]["exit_code"] == 1 for a in verification["attempts"])
    events = kinds(task_id)
    assert events.count("claimed") == 1, events
    assert events.count("fix_requested") == 2 and events.count("work_submitted") == 3, events
    assert len(store.list_executions(task_id)) == 3
    assert len(prompts_given(prompts)) == 3
    assert task.output["intake"]["state"] == "debt"
    assert person_reasons(task_id) == ["blocked"]


def test_a_worker_killed_while_its_intake_runs_leaves_the_fix_to_the_next_claim(server, tmp_path):
    start, _repo, _remote, prompts = server
    judging = tmp_path / "judging"
    # The first verify holds the intake long enough to kill the waiting worker.
    verify = (
        f"if [ ! -e {judging} ]; then touch {judging}; sleep 2; exit 1; fi; grep -qx ok out.txt"
    )
    base = start(verify, max_fix_cycles=1)
    task_id = store.create_task(title="Add feature", repository="app").task.id
    _, key = machines.mint("laptop", ["far-bot"])
    # Short enough to lapse soon after the kill, long enough that a loaded machine's
    # heartbeats keep it while the worker lives (1.5 s lapsed twice under load, and
    # three lapses abandon the task).
    argv = ("--lease-ms", "3000", "--poll", "120")
    first = start_worker(
        base, key, tmp_path, "far-bot", extra=argv, env_add={"PROMPTS": str(prompts)}
    )
    try:
        wait_for(judging.exists, 60, "the intake judging", None, tmp_path)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    # Sent back to fix with nobody to run it: the claim's own lease lapses, and the
    # next worker claims the task as any other and takes it to review.
    wait_for(
        lambda: (store.get_task(task_id).output or {}).get("intake", {}).get("state") == "fix",
        30,
        "sent back to fix",
    )
    # Started once the lease is out (a lapse sends no frame to wake an idle worker).
    lapsed = lambda: store.get_task(task_id).lease_until < store.now()  # noqa: E731
    wait_for(lapsed, 30, "the lease lapsed")
    (tmp_path / "again").mkdir()
    second = start_worker(
        base, key, tmp_path / "again", "far-bot", extra=argv, env_add={"PROMPTS": str(prompts)}
    )
    try:
        wait_for(
            lambda: store.get_task(task_id).status == "in_review",
            60,
            lambda: f"in review: {store.get_task(task_id).output}",
        )
    finally:
        second.kill()
        second.wait(10)
    events = kinds(task_id)
    assert events.count("claimed") == 2 and events.count("fix_requested") >= 1, events
    assert store.get_task(task_id).attempts == 2
