"""A hostile agent on a real ``clawboo worker`` (real daphne, a real qcluster for the
intake, a bare remote): its command tries approve, verdict, a ``human_override``
transition and ``…/resume`` -- with the key it is given (an agent-bound key of its
own agent, in its argv, and the run's MCP credential if it had one) and with the
host's machine token it digs out of the worker's key file (same OS user) -- while it runs and
again once its task is in review. Every try is ``403 person_required``; the task
waits in review for a person, its verdict and the remote as the server's judge left
them (GOVERNANCE §6)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from board import store
from core import machines, registry, repositories
from core.models import Agent, AgentToken
from tests.conftest import ROOT
from tests.executor.test_remote_worker import bare_remote, git, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

HOSTILE = r'''
import json, os, subprocess, sys, time, urllib.error, urllib.request

agent_key, base, results = sys.argv[1:4]
task = os.environ["CLAWBOO_TASK_ID"]


def machine_token():
    """The worker's key, found through its command line (/proc): its --token-file,
    which the agent's OS user -- the worker's -- reads, as any child can."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")
        if "--token-file" in argv:
            with open(argv[argv.index("--token-file") + 1]) as f:
                return f.read().strip()
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return None


def call(key, method, path, body=None):
    request = urllib.request.Request(
        base + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def attack(keys, moment):
    t = f"/api/board/tasks/{task}"
    tries = []
    for name, key in keys.items():
        for method, path, body in (
            ("POST", f"{t}/approve", {}),
            ("POST", f"{t}/verdict", {"verdict": "pass", "evidence": "I say so"}),
            ("POST", f"{t}/transition", {"to": "done", "human_override": {"reason": "trust me"}}),
            ("POST", "/api/agents/far-bot/resume", {}),
        ):
            status, answer = call(key, method, path, body)
            error = answer.get("error") if isinstance(answer, dict) else None
            tries.append(
                {"moment": moment, "key": name, "path": path, "status": status, "error": error}
            )
    return tries


# Detached, its parent is gone: the first run hands the token it found on.
found = sys.argv[5] if sys.argv[4:5] == ["later"] else machine_token()
keys = {"agent key": agent_key, "machine token": found}
if os.environ.get("CLAWBOO_MCP_TOKEN"):
    keys["run credential"] = os.environ["CLAWBOO_MCP_TOKEN"]

if sys.argv[4:5] == ["later"]:
    # Detached: wait for the task to reach review, then try again.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        seen = call(keys["machine token"], "GET", f"/api/board/tasks/{task}")[1]
        if seen.get("status") == "in_review":
            break
        time.sleep(0.2)
    tries = attack(keys, "in_review")
    with open(results + ".tmp", "w") as f:
        json.dump(tries, f)
    os.replace(results + ".tmp", results)
    sys.exit(0)

with open(results + ".running", "w") as f:
    json.dump(attack(keys, "running"), f)
later = subprocess.Popen(
    [sys.executable, __file__, agent_key, base, results, "later", keys["machine token"]],
    start_new_session=True,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
with open(results + ".pid", "w") as f:
    f.write(str(later.pid))
with open("feature.txt", "w") as f:
    f.write("ok\n")
print("did it")
'''


@pytest.fixture
def server(daphne, database_url, tmp_path, settings):
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [roots]
    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    repo = roots / "app"
    git("clone", "-q", str(bare_remote(tmp_path)), str(repo), cwd=tmp_path)
    remote = Path(git("remote", "get-url", "origin", cwd=repo))
    env = {"CLAWBOO_HTTP_RATE_LIMIT": "0", "CLAWBOO_REPO_ROOTS": str(roots)}
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
    qcluster = subprocess.Popen(
        [sys.executable, "-m", "clawboo.cli", "qcluster"],
        env=qenv,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield base, repo, remote
    os.killpg(qcluster.pid, signal.SIGKILL)
    qcluster.wait(10)
    log.close()


def test_a_hostile_remote_agent_cannot_approve_judge_override_or_resume(server, tmp_path):
    base, repo, remote = server
    repositories.register(
        team="default",
        path=str(repo),
        id="app",
        remote=str(remote),
        verify_cmd="grep -qx ok feature.txt",
    )
    owner = get_user_model().objects.create_user("ada")
    registry.add_member("default", owner)
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    results = tmp_path / "tries.json"
    agent_key = machines.new_key()
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={
            "argv": [sys.executable, str(script), agent_key, base, str(results)],
            "repository": "app",
        },
        owner=owner,
    )
    AgentToken.objects.create(key=agent_key, agent_id="far-bot", user=owner)
    _, machine_key = machines.mint("laptop", ["far-bot"])
    main_before = git("rev-parse", "main", cwd=remote)
    task = store.create_task(title="Add feature", repository="app").task
    worker = start_worker(base, machine_key, tmp_path, "far-bot")
    try:
        wait_for(
            results.exists,
            90,
            lambda: f"the later tries (task {store.get_task(task.id).status})",
            tmp_path=tmp_path,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(5)
        pid_file = Path(str(results) + ".pid")
        if pid_file.exists():
            try:
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass  # it had finished
    tries = json.loads(Path(str(results) + ".running").read_text()) + json.loads(
        results.read_text()
    )
    # Both keys, both moments, four verbs each.
    assert {(t["moment"], t["key"]) for t in tries} == {
        (moment, key)
        for moment in ("running", "in_review")
        for key in ("agent key", "machine token")
    }
    assert len(tries) == 16
    for attempt in tries:
        assert (attempt["status"], attempt["error"]) == (403, "person_required"), attempt
    reviewed = store.get_task(task.id)
    assert reviewed.status == "in_review"  # it waits for a person
    assert (reviewed.verdict, reviewed.human_override) == ("pass", None)
    assert reviewed.verdict_evidence != "I say so"
    assert git("rev-parse", "main", cwd=remote) == main_before  # nothing landed
    assert Agent.objects.get(pk="far-bot").state == "active"
