"""The server takes in a remote worker's pushed branch: submit → fetch → the judge
→ review → approve lands through the local landing code and pushes the base back.

The remote worker is played by git alone here (a clone of the bare remote, a
commit, a push); ``tests/executor/test_remote_worker.py`` and
``tests/ops/test_remote_netns.py`` run the real ``clawboo worker``."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import time_machine
from rest_framework.test import APIClient

from board import store
from board.models import ExecutionProcess
from core import registry, repositories
from core.errors import Conflict, ValidationFailed
from core.models import Event
from executor import breakers
from executor import intake as server_intake
from tests.conftest import ROOT
from tests.fixtures.gitrepos import git
from worktrees import handoff, intake, review, service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def remote(repo: Path, tmp_path: Path) -> Path:
    """The server's registered repository ``app`` with a bare remote cloned from it."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    return bare


def register(repo: Path, remote: Path | str, verify_cmd: str = "") -> None:
    """The repository, and the agent ``far`` whose default it is."""
    repositories.register(
        team="default", path=str(repo), id="app", remote=str(remote), verify_cmd=verify_cmd
    )
    registry.create_agent(
        id="far",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "app"},
    )


def claimed(title: str = "Add feature", **fields) -> tuple[str, str]:
    task = store.create_task(title=title, repository="app", **fields).task
    result = store.claim(task.id, "far", "command")
    assert result.outcome == "ok"
    return task.id, result.ticket


def push_work(remote: Path, tmp_path: Path, task_id: str, content: str = "ok\n") -> str:
    """What a remote worker does: clone, branch, commit, push."""
    clone = tmp_path / f"worker-{task_id}"
    if not clone.exists():
        git(tmp_path, "clone", "-q", str(remote), str(clone))
        git(clone, "checkout", "-q", "-b", f"clawboo/task-{task_id}")
    (clone / "feature.txt").write_text(content)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", f"work of {task_id}")
    git(clone, "push", "-q", "-f", "origin", f"clawboo/task-{task_id}")
    return git(clone, "rev-parse", "HEAD")


def test_submitted_work_is_judged_on_the_server_reviewed_landed_and_pushed_back(
    repo, remote, tmp_path
):
    register(repo, remote, verify_cmd="grep -qx ok feature.txt")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    # Q_CLUSTER sync (the test settings): the intake runs as the submit commits.
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit, {"summary": "did it"})
    task = store.get_task(task_id)
    assert task.status == "in_review", (task.error, task.feedback, task.output)
    assert task.verdict == "pass"
    assert task.output["intake"]["state"] == "review"
    assert task.output["summary"] == "did it"
    # Recorded as a local run's checkout is: the review panel's diff reads it.
    ws = store.get_workspace(task_id)
    assert ws.branch == f"clawboo/task-{task_id}" and Path(ws.repo_path) == repo
    assert [f["path"] for f in ws.diffstat["files"]] == ["feature.txt"]
    assert (Path(ws.worktree_path) / "feature.txt").read_text() == "ok\n"
    # The review panel's answer: the pushed change alone, against the task's base.
    panel = review.review_of(task)
    assert [f["path"] for f in panel["diff"]["files"]] == ["feature.txt"]
    assert "+ok" in panel["diff"]["files"][0]["patch"]
    assert panel["workspace"]["base_branch"] == "main"
    # Nothing left under the hidden ref once the checkout holds the commit.
    assert git(repo, "for-each-ref", "refs/clawboo/") == ""
    # The run's handoff, as a local run leaves it: the next attempt resumes from it.
    left = handoff.read_handoff(Path(ws.worktree_path))
    assert left is not None
    assert left["handoffFrom"] == "Far" and left["runtime"] == "command"
    assert left["completedSubtasks"] == ["did it"]

    result = service.approve(task_id, by="ada")
    assert result["result"] == "landed"
    assert result["push"] == {"remote": str(remote), "branch": "main", "pushed": True}
    assert git(remote, "rev-parse", "main") == git(repo, "rev-parse", "main") == result["commit"]
    assert git(remote, "show", "main:feature.txt") == "ok"
    assert store.get_task(task_id).status == "done"
    # A repeat of the intake after it ended does nothing.
    assert server_intake.take_in(task_id) == {"result": "nothing"}


def test_a_branch_not_named_for_the_task_is_refused_and_nothing_is_written(repo, remote, tmp_path):
    register(repo, remote)
    task_id, ticket = claimed()
    other = store.create_task(title="other").task.id
    commit = push_work(remote, tmp_path, task_id)
    before = store.get_task(task_id)
    owner = get_staff()
    client = APIClient()
    client.force_authenticate(owner)
    for branch in (f"clawboo/task-{other}", "main", f"clawboo/task-{task_id}/../x"):
        answer = client.post(
            f"/api/board/tasks/{task_id}/submit",
            {"ticket": ticket, "branch": branch, "commit": commit},
            format="json",
        )
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == "branch", answer.json()
    with pytest.raises(ValidationFailed):
        intake.submit(task_id, ticket, f"clawboo/task-{task_id}", "HEAD")
    after = store.get_task(task_id)
    assert (after.revision, after.output, after.status) == (before.revision, None, "in_progress")
    answer = client.post(
        f"/api/board/tasks/{task_id}/submit",
        {"ticket": ticket, "branch": f"clawboo/task-{task_id}", "commit": commit},
        format="json",
    )
    assert answer.status_code == 202, answer.content
    assert store.get_task(task_id).status == "in_review"


def test_a_commit_the_pushed_branch_does_not_hold_is_refused_on_the_task(repo, remote, tmp_path):
    """Any object the server's repository holds is not enough: the intake takes in
    only a commit reachable from the fetched branch, and says why on the task."""
    register(repo, remote)
    task_id, ticket = claimed()
    push_work(remote, tmp_path, task_id)
    # A commit the server's repository holds, on no branch of this task.
    git(repo, "checkout", "-q", "-b", "elsewhere")
    (repo / "secret.txt").write_text("not this task's\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "unrelated work")
    foreign = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-D", "elsewhere")

    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", foreign, {"summary": "sneaky"})
    task = store.get_task(task_id)
    assert task.status != "in_review"
    assert task.output["intake"]["state"] == "failed"
    assert "is not on the pushed branch" in task.feedback, task.feedback
    assert foreign[:12] in task.feedback
    assert "is not on the pushed branch" in task.output["intake"]["detail"]
    ws = store.last_workspace(task_id)
    if ws is not None and Path(ws.worktree_path).exists():
        assert not (Path(ws.worktree_path) / "secret.txt").exists()


def get_staff():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_superuser("root", password="pw")


def test_a_failing_verify_command_sends_the_work_back_to_its_builder(
    repo, remote, tmp_path, settings
):
    settings.CLAWBOO_MAX_FIX_CYCLES = 2
    register(repo, remote, verify_cmd="grep -qx ok feature.txt")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id, content="broken\n")
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    task = store.get_task(task_id)
    assert task.status == "in_progress" and task.verdict == "fail"
    assert "verification gate failed" in task.feedback
    assert task.output["intake"]["state"] == "fix"
    # The claim's own span again, not the intake's long one.
    assert task.lease_duration_ms == store.intake_of(task)["lease_ms"]
    # The fixed work, pushed again under the same claim, goes to review.
    fixed = push_work(remote, tmp_path, task_id, content="ok\n")
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", fixed)
    task = store.get_task(task_id)
    assert task.status == "in_review" and task.verdict == "pass", task.feedback


def test_verify_required_without_a_command_reaches_review_with_a_fail_verdict(
    repo, remote, tmp_path, settings
):
    settings.CLAWBOO_VERIFY_REQUIRED = True
    register(repo, remote)
    task_id, ticket = claimed()
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", push_work(remote, tmp_path, task_id))
    task = store.get_task(task_id)
    assert task.status == "in_review" and task.verdict == "fail"
    with pytest.raises(Exception) as refused:
        service.approve(task_id, by="ada")
    assert getattr(refused.value, "code", "") == "verification_required"


def test_a_failed_push_after_landing_is_reported_not_swallowed(repo, remote, tmp_path):
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", push_work(remote, tmp_path, task_id))
    # The remote's main moved on without us: a fast-forward push is refused.
    other = tmp_path / "elsewhere"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    (other / "theirs.txt").write_text("x\n")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "theirs")
    git(other, "push", "-q", "origin", "main")
    result = service.approve(task_id, by="ada")
    assert result["result"] == "landed"  # the landing stands
    assert result["push"]["pushed"] is False and "rejected" in result["push"]["error"]
    comments = [c.body for c in store.list_comments(task_id)]
    assert any("the push of main" in body for body in comments), comments


def test_a_submission_for_a_lost_claim_is_refused(repo, remote, tmp_path):
    register(repo, remote)
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    store.release(task_id, ticket=ticket)
    with pytest.raises(Conflict):
        intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    assert store.get_task(task_id).output is None


INTAKE_SCRIPT = """
import django, json, sys
django.setup()
from executor.intake import take_in
print(json.dumps(take_in(sys.argv[1])), flush=True)
"""


def test_an_intake_killed_mid_verify_is_taken_in_again_once(
    repo, remote, tmp_path, database_url, settings, monkeypatch
):
    started = tmp_path / "verify-started"
    # The first verify run waits to be killed; the second passes.
    verify = f"if [ ! -e {started} ]; then touch {started}; sleep 60; fi; grep -qx ok feature.txt"
    register(repo, remote, verify_cmd=verify)
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    queued: list[str] = []
    # Queued on commit for a qcluster; here the qcluster is the process killed below.
    monkeypatch.setattr(intake, "enqueue", queued.append)
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    assert queued == [task_id]
    proc = subprocess.Popen(
        [sys.executable, "-c", INTAKE_SCRIPT, task_id],
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
            "CLAWBOO_STATE_DIR": str(settings.CLAWBOO_STATE_DIR),
            "CLAWBOO_REPO_ROOTS": os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS),
            "DJANGO_SECRET_KEY": settings.SECRET_KEY,
            "PYTHONPATH": str(ROOT),
        },
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its verify command dies with it
    )
    deadline = time.monotonic() + 60
    while not started.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the intake never reached its verify command"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)
    task = store.get_task(task_id)
    assert task.status == "in_progress" and store.intake_pending(task)
    # The recovery pass (boot, and the periodic job) takes it in again.
    settled = server_intake.recover_intakes(older_than_s=0)
    assert settled == [
        {"task_id": task_id, "result": "review", "worktree": "retained", "verdict": "pass"}
    ]
    assert store.get_task(task_id).status == "in_review"
    assert server_intake.recover_intakes(older_than_s=0) == []
    kinds = list(Event.objects.filter(task_id=task_id).values_list("kind", flat=True))
    assert kinds.count("review_requested") == 1 and kinds.count("work_submitted") == 1


@pytest.mark.postgresql_only
def test_two_servers_racing_one_intake_take_it_in_once(
    repo, remote, tmp_path, settings, monkeypatch, race
):
    """Servers on two hosts share the database, not their state dirs (where the
    per-path lock files are): each one's boot, or its recovery pass, may start the
    same pending intake at once. One takes it in; the other leaves it be."""
    log = tmp_path / "verify.log"
    register(repo, remote, verify_cmd=f"echo run >> {log}; sleep 1; grep -qx ok feature.txt")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    monkeypatch.setattr(intake, "enqueue", lambda task_id: None)  # no qcluster took it
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)

    hosts = [["take-in", task_id, "--state-dir", str(tmp_path / f"host-{n}")] for n in "ab"]
    roots = os.pathsep.join(str(p) for p in settings.CLAWBOO_REPO_ROOTS)
    results = race(hosts, extra_env={"CLAWBOO_REPO_ROOTS": roots})

    # The other found it running (or, had it come late, taken in already).
    assert sorted(r["result"] for r in results) in (
        ["review", "running"],
        ["nothing", "review"],
    ), results
    assert log.read_text().splitlines() == ["run"]  # one judge, one verify run
    task = store.get_task(task_id)
    assert task.status == "in_review" and task.output["intake"]["starts"] == 1


def test_a_submission_whose_intake_never_ran_is_queued_again_at_boot(
    repo, remote, tmp_path, monkeypatch
):
    from clawboo import boot

    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    with monkeypatch.context() as patched:
        patched.setattr(intake, "enqueue", lambda task_id: None)  # no qcluster took it
        intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    assert store.intake_pending(store.get_task(task_id))
    assert boot.intake_recovery() == "1 remote submission(s) queued for intake"
    assert store.get_task(task_id).status == "in_review"
    assert boot.intake_recovery() == "0 remote submission(s) queued for intake"


def test_a_landing_killed_before_its_push_is_pushed_by_the_boot_recovery(
    repo, remote, tmp_path, monkeypatch
):
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    before = git(remote, "rev-parse", "main")

    def killed(*args, **kwargs):
        raise RuntimeError("killed after the base branch moved")

    with monkeypatch.context() as patched:
        # The push comes after the base moved and before the board records it.
        patched.setattr(intake, "push_base", killed)
        with pytest.raises(RuntimeError):
            service.approve(task_id, by="ada")
    assert git(repo, "rev-parse", "main") != before == git(remote, "rev-parse", "main")
    settled = service.recover_landings()
    assert [entry["result"] for entry in settled] == ["completed"]
    assert git(remote, "rev-parse", "main") == git(repo, "rev-parse", "main")
    assert store.get_task(task_id).status == "done"


def test_an_agent_no_operator_approved_is_not_judged_on_the_server(repo, remote, tmp_path):
    from core.models import Agent

    register(repo, remote, verify_cmd="true")
    # Its settings changed by someone who may not decide what the server runs.
    Agent.objects.filter(pk="far").update(approved_fingerprint="")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    task = store.get_task(task_id)
    assert task.status == "blocked" and "not approved by an operator" in task.error
    assert task.output["intake"]["state"] == "failed"
    assert task.verdict is None  # no verify command ran


def test_a_landing_reaches_the_remote_before_its_dependents_are_ready(
    repo, remote, tmp_path, monkeypatch
):
    # A remote worker takes a dependent as soon as it is ready and clones the remote:
    # the landing must be there by then, else the dependent is built on a base
    # without it and its work does not merge at its intake.
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    dependent = store.create_task(title="next", repository="app", depends_on=[task_id]).task.id
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", push_work(remote, tmp_path, task_id))
    seen: list[tuple[str, str]] = []
    finish = store.finish_landing

    def finish_and_look(*args, **kwargs):
        done = finish(*args, **kwargs)
        seen.append((store.get_task(dependent).status, git(remote, "rev-parse", "main")))
        return done

    monkeypatch.setattr(store, "finish_landing", finish_and_look)
    result = service.approve(task_id, by="ada")
    assert result["result"] == "landed" and result["push"]["pushed"] is True
    assert seen == [("todo", result["commit"])]


def test_work_the_intake_never_takes_in_pauses_its_agent_instead_of_looping(repo, remote, tmp_path):
    # Each attempt's run succeeds on the worker and its submission fails at the
    # intake: the run's close must not count a success first, or the breaker never
    # sees three in a row and the agent re-runs the same refused work for ever. (Work
    # that does not merge onto its base is not such a failure: a rebase round,
    # tests/executor/test_remote_rebase.py.)
    register(repo, remote, verify_cmd="true")
    client = APIClient()
    client.force_authenticate(get_staff())
    task_id = store.create_task(title="Add feature", repository="app").task.id
    for attempt in (1, 2, 3):
        assert registry.get_agent("far").state == "active", attempt
        ticket = store.claim(task_id, "far", "command").ticket
        run = store.open_execution(task_id, ticket).id
        closed = client.post(
            f"/api/board/tasks/{task_id}/executions/{run}/close",
            {"ticket": ticket, "outcome": "succeeded", "exit_code": 0},
            format="json",
        )
        assert closed.status_code == 200, closed.json()
        push_work(remote, tmp_path, task_id, content=f"attempt {attempt}\n")
        # A commit its pushed branch does not hold: refused at the intake.
        intake.submit(task_id, ticket, f"clawboo/task-{task_id}", "f" * 40)
        task = store.get_task(task_id)
        assert (task.status, task.output["intake"]["state"]) == ("todo", "failed")
    agent = registry.get_agent("far")
    assert agent.state == "paused" and "3 consecutive failed runs" in agent.state_reason
    assert "is not on the pushed branch" in agent.state_reason


def test_an_intake_killed_after_its_landing_is_not_run_again_onto_the_task_its_agent_resumed(
    repo, remote, tmp_path, monkeypatch
):
    # The intake lands the work (the task in review) and counts the agent's breaker
    # for the remote run, then is killed before it records its own end. The agent
    # resumes the task under the same claim; the recovery pass must not take the old
    # submission in again -- pulling the resumed task back into review, and counting
    # the same run's success again (wiping out the failures the agent's other runs
    # had meanwhile, so a failing agent is never paused).
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    run = store.open_execution(task_id, ticket)
    store.close_execution(run.id, "succeeded")  # not counted: the intake counts it
    commit = push_work(remote, tmp_path, task_id)
    monkeypatch.setattr(intake, "enqueue", lambda task_id: None)
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    ended = store.set_intake_state

    def killed(task_id, state, detail=None):
        raise RuntimeError("SIGKILL")  # the process dies after the landing's move

    monkeypatch.setattr(store, "set_intake_state", killed)
    with pytest.raises(RuntimeError, match="SIGKILL"):
        server_intake.take_in(task_id)
    monkeypatch.setattr(store, "set_intake_state", ended)
    task = store.get_task(task_id)
    # The intake's end was kept with the landing's move, in its transaction.
    assert task.status == "in_review" and task.output["intake"]["state"] == "review"
    for _ in range(2):  # two other runs of the agent fail meanwhile
        breakers.after_run("far", failed=True, detail="exit 1")
    assert store.resume_from_review(task_id, ticket=ticket).recorded
    assert server_intake.recover_intakes(older_than_s=0) == []
    assert server_intake.take_in(task_id) == {"result": "nothing"}
    assert store.get_task(task_id).status == "in_progress"
    assert registry.get_agent("far").breaker_failures == 2
    assert ExecutionProcess.objects.get(pk=run.id).breaker_counted


def test_an_intake_that_dies_every_time_is_blocked_after_three_starts_not_rerun_for_ever(
    repo, remote, tmp_path, monkeypatch
):
    # The recovery pass runs a pending intake again every minute, renewing its claim's
    # lease each time: an intake that dies the same way every time (a bug, not an
    # outage) re-ran the verify command and the critic for ever, nobody told.
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    monkeypatch.setattr(intake, "enqueue", lambda task_id: None)  # no qcluster here
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    runs: list[str] = []

    def dies(task, *args, **kwargs):
        runs.append(task.id)
        raise RuntimeError("the judge fell over")

    monkeypatch.setattr(server_intake.settle, "land", dies)
    for _ in range(6):
        server_intake.recover_intakes(older_than_s=0)
    task = store.get_task(task_id)
    assert (len(runs), task.status) == (3, "blocked"), task.output
    assert not store.intake_pending(task)
    assert task.output["intake"]["state"] == "failed"
    assert "died 3 times" in task.error
    assert server_intake.recover_intakes(older_than_s=0) == []


def test_a_pushed_submission_may_not_say_its_work_is_the_servers_checkout(repo, remote, tmp_path):
    """``output.source`` is the server's to say: a pushed branch submitted as
    ``source: "checkout"`` had the judge take the server's checkout (another run's
    work, or none) as the work of a commit it never fetched (400, nothing written)."""
    register(repo, remote, verify_cmd="grep -qx ok feature.txt")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    branch = f"clawboo/task-{task_id}"
    before = store.get_task(task_id)
    for said in (
        {"source": "checkout"},
        {"intake": {"state": "review"}},
        {"commit": "0" * 40},
        {"branch": "main"},
    ):
        with pytest.raises(ValidationFailed) as refused:
            intake.submit(task_id, ticket, branch, commit, {"summary": "mine", **said})
        assert refused.value.field == f"output.{next(iter(said))}"
    after = store.get_task(task_id)
    assert (after.revision, after.output, after.status) == (
        before.revision,
        before.output,
        "in_progress",
    )
    # Repeating what the server says is how the worker sends it: taken in.
    intake.submit(task_id, ticket, branch, commit, {"branch": branch, "commit": commit})
    assert store.get_task(task_id).status == "in_review"


def test_a_submission_keeps_its_claim_for_the_intake_lease_setting(
    repo, remote, tmp_path, settings, monkeypatch
):
    """docs/remote-workers.md: the claim stays, its lease pushed out by
    ``CLAWBOO_INTAKE_LEASE_MS``; the worker's heartbeats (no ``lease_ms``) keep that span."""
    settings.CLAWBOO_INTAKE_LEASE_MS = 7_000
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    monkeypatch.setattr(intake, "enqueue", lambda task_id: None)  # the intake waits
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    task = store.get_task(task_id)
    submitted = dt.datetime.fromisoformat(task.output["intake"]["submitted_at"])
    assert task.lease_duration_ms == 7_000
    assert task.lease_until == submitted + dt.timedelta(seconds=7)
    assert store.heartbeat(task_id, ticket).task.lease_duration_ms == 7_000


def test_an_intake_is_run_again_only_once_pending_for_the_recover_setting(
    repo, remote, tmp_path, settings, monkeypatch
):
    """docs/remote-workers.md: the ``clawboo.intake-recover`` schedule runs a pending
    intake again once it is ``CLAWBOO_INTAKE_RECOVER_S`` old (not one still running)."""
    settings.CLAWBOO_INTAKE_RECOVER_S = 60
    register(repo, remote, verify_cmd="true")
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    monkeypatch.setattr(intake, "enqueue", lambda task_id: None)  # its intake died
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    submitted = dt.datetime.fromisoformat(store.get_task(task_id).output["intake"]["submitted_at"])
    with time_machine.travel(submitted + dt.timedelta(seconds=30), tick=False):
        assert server_intake.recover_intakes() == []  # 30 s: maybe still running
    assert store.intake_pending(store.get_task(task_id))
    with time_machine.travel(submitted + dt.timedelta(seconds=61), tick=True):
        settled = server_intake.recover_intakes()
    assert [(s["task_id"], s["result"]) for s in settled] == [(task_id, "review")]
    assert store.get_task(task_id).status == "in_review"


def test_an_intake_lease_the_board_would_refuse_reads_as_the_default():
    """A lease under a second (or past the board's ceiling, ``CLAWBOO_LEASE_MAX_MS``)
    refused every submission as the worker's own bad ``lease_ms`` (a 400 naming a
    field the worker never sent)."""
    from board.checks import LEASE_MIN_MS
    from tests.test_knobs import settings_seen_with

    ceiling = 3_600_000  # an operator's CLAWBOO_LEASE_MAX_MS
    bounded = {"CLAWBOO_LEASE_MAX_MS": str(ceiling)}
    for raw in ("500", str(ceiling + 1)):
        seen = settings_seen_with(
            {**bounded, "CLAWBOO_INTAKE_LEASE_MS": raw}, ["CLAWBOO_INTAKE_LEASE_MS"]
        )
        assert seen["CLAWBOO_INTAKE_LEASE_MS"] == 600_000, raw
    for raw in (str(LEASE_MIN_MS), str(ceiling)):  # the board's own bounds are kept
        seen = settings_seen_with(
            {**bounded, "CLAWBOO_INTAKE_LEASE_MS": raw}, ["CLAWBOO_INTAKE_LEASE_MS"]
        )
        assert seen["CLAWBOO_INTAKE_LEASE_MS"] == int(raw)
    # A ceiling under the default holds the default to it.
    seen = settings_seen_with(
        {"CLAWBOO_LEASE_MAX_MS": "300000"}, ["CLAWBOO_INTAKE_LEASE_MS", "CLAWBOO_LEASE_MAX_MS"]
    )
    assert seen == {"CLAWBOO_INTAKE_LEASE_MS": 300_000, "CLAWBOO_LEASE_MAX_MS": 300_000}


@pytest.fixture
def silent_remote():
    """A git:// remote that takes the connection and never answers (a hung server):
    the kernel's backlog accepts it, nothing reads or replies."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"git://127.0.0.1:{sock.getsockname()[1]}/remote.git"


def test_git_that_gets_no_answer_from_the_remote_gives_up_after_the_remote_git_timeout(
    repo, remote, tmp_path, settings, silent_remote
):
    """docs/remote-workers.md: the intake's fetch (and the push of the landed base
    after it) is git with a timeout, ``CLAWBOO_REMOTE_GIT_TIMEOUT_S``."""
    settings.CLAWBOO_REMOTE_GIT_TIMEOUT_S = 2
    register(repo, silent_remote, verify_cmd="true")  # the worker pushed to ``remote``
    task_id, ticket = claimed()
    commit = push_work(remote, tmp_path, task_id)
    started = time.monotonic()
    # Q_CLUSTER sync (the test settings): the intake, and its fetch, run as it commits.
    intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
    fetch_s = time.monotonic() - started
    task = store.get_task(task_id)
    assert task.output["intake"]["state"] == "failed"
    assert "no answer within 2s" in task.output["intake"]["detail"], task.output["intake"]
    started = time.monotonic()
    pushed = intake.push_base(repo, "main")
    push_s = time.monotonic() - started
    assert pushed is not None and pushed["pushed"] is False
    assert "no answer within 2s" in pushed["error"]
    # Given up at the setting's two seconds, not the default's two minutes.
    assert 2 <= fetch_s < 60 and 2 <= push_s < 60


@pytest.mark.postgresql_only
def test_twenty_intakes_in_a_row_leave_no_database_connection_or_advisory_lock_behind(
    repo, remote, tmp_path
):
    """Each intake holds its PostgreSQL advisory lock on a connection of its own
    (core.storage.lock_across_hosts): closed with the intake, however many run."""
    from django.db import connection

    def held() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            )
            sessions = cursor.fetchone()[0]
            # pg_locks is the whole server's: this database's locks only (other
            # databases' tests on the same server take advisory locks of their own).
            cursor.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            return sessions, cursor.fetchone()[0]

    register(repo, remote)
    before = held()
    seen = []
    for n in range(20):
        task_id, ticket = claimed(title=f"Task {n}")
        commit = push_work(remote, tmp_path, task_id, content=f"{n}\n")
        intake.submit(task_id, ticket, f"clawboo/task-{task_id}", commit)
        assert store.get_task(task_id).status == "in_review"
        seen.append(held())

    assert set(seen) == {before}, seen
    assert before[1] == 0
