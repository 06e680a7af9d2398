"""``clawboo worker`` as a real subprocess against a real daphne on 127.0.0.1: it holds
a URL and a machine key, no database, and works the board over HTTP and the socket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from board import store
from core import machines, registry, repositories
from core.models import Event
from executor.runner import Executor
from tests.conftest import ROOT
from worktrees import service

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

SERVER_ENV = {"CLAWBOO_HTTP_RATE_LIMIT": "0", "CLAWBOO_METRICS_TOKEN": "scrape-me"}


def git(*argv: str, cwd: Path) -> str:
    done = subprocess.run(
        ["git", *argv], cwd=cwd, capture_output=True, text=True, timeout=30, check=True
    )
    return done.stdout.strip()


def bare_remote(tmp_path: Path) -> Path:
    seed, remote = tmp_path / "seed", tmp_path / "remote.git"
    seed.mkdir()
    git("init", "-q", "-b", "main", cwd=seed)
    (seed / "README").write_text("hello\n")
    git("add", "-A", cwd=seed)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "seed", cwd=seed)
    git("clone", "-q", "--bare", str(seed), str(remote), cwd=tmp_path)
    return remote


def start_worker(
    base: str, key: str, tmp_path: Path, *agents: str, extra: tuple[str, ...] = (), env_add=None
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env_add or {})}
    # Nothing that could lead it to the database: it must not need one.
    for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "CLAWBOO_TEST_DATABASE_URL"):
        env.pop(name, None)
    # The key as the docs give it: a file only this user reads, never the command line.
    key_file = tmp_path / "worker.key"
    key_file.touch(mode=0o600)
    key_file.write_text(key + "\n")
    argv = [sys.executable, "-m", "clawboo.cli", "worker", "--server", base]
    argv += ["--token-file", str(key_file)]
    for agent in agents:
        argv += ["--agent", agent]
    argv += ["--heartbeat", "0.5", "--cache-dir", str(tmp_path / "worker"), *extra]
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def http_body(url: str, headers: dict[str, str] | None = None) -> bytes:
    try:
        request = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
            return answer.read()
    except urllib.error.HTTPError as exc:  # 503: parts not running here; the body counts
        return exc.read()


def wait_for(check, seconds: float, what: str, worker=None, tmp_path=None) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            what = what() if callable(what) else what
            tail = (tmp_path / "worker.log").read_text()[-3000:] if tmp_path else ""
            raise AssertionError(f"{what} within {seconds}s\n{tail}")
        time.sleep(0.1)


def test_a_chain_of_dependent_tasks_is_worked_remotely_and_pushed(daphne, tmp_path):
    remote = bare_remote(tmp_path)
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={
            "argv": ["sh", "-c", 'echo "$CLAWBOO_TASK_TITLE" >> log.txt; echo did it'],
            "repo_remote": str(remote),
        },
    )
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    # A 120 s idle poll: the chain finishes in time only if socket frames wake it.
    worker = start_worker(base, key, tmp_path, "far-bot", extra=("--poll", "120"))
    try:
        first = store.create_task(title="one").task
        second = store.create_task(title="two", depends_on=[first.id]).task
        third = store.create_task(title="three", depends_on=[second.id]).task
        ids = [first.id, second.id, third.id]
        wait_for(
            lambda: all(store.get_task(i).status == "done" for i in ids),
            45,
            lambda: f"the chain done: {[store.get_task(i).error for i in ids]}",
            tmp_path=tmp_path,
        )
        # Seen as a host: /healthz names it to the metrics token (informational,
        # whatever the other parts say), to nobody anonymous (GOVERNANCE §6).
        assert "remote_workers" not in json.loads(http_body(base + "/healthz"))
        health = json.loads(http_body(base + "/healthz", {"Authorization": "Bearer scrape-me"}))
        assert [w["host"] for w in health["remote_workers"]] == ["laptop"]
        assert health["remote_workers"][0]["agents"] == ["far-bot"]
    finally:
        worker.kill()
        worker.wait(10)
    for task_id in ids:
        output = store.get_task(task_id).output
        assert output["branch"] == f"clawboo/task-{task_id}"
        assert git("rev-parse", output["branch"], cwd=remote) == output["commit"]
    # Each task built on its dependency's pushed branch: the last holds all three.
    log = git("show", f"clawboo/task-{third.id}:log.txt", cwd=remote)
    assert log.splitlines() == ["one", "two", "three"]


def test_a_revoked_token_stops_the_worker_within_one_heartbeat(daphne, tmp_path):
    registry.create_agent(
        id="slow-bot",
        display_name="Slow",
        team="default",
        runtime="command",
        settings={"argv": ["sleep", "60"]},
    )
    token, key = machines.mint("vm", ["slow-bot"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="long").task
    worker = start_worker(base, key, tmp_path, "slow-bot")
    try:
        wait_for(
            lambda: store.get_task(task.id).status == "in_progress",
            30,
            "claimed",
            tmp_path=tmp_path,
        )
        machines.revoke(token.pk)
        revoked_at = time.monotonic()
        assert worker.wait(20) == 3
        # One 0.5 s heartbeat, plus the run's own stop and process start-up slack.
        assert time.monotonic() - revoked_at < 10
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
    assert "refused the token" in (tmp_path / "worker.log").read_text()


def test_a_worker_for_an_agent_its_token_is_not_bound_to_is_refused(daphne, tmp_path):
    for agent_id in ("mine", "theirs"):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id,
            team="default",
            runtime="command",
            settings={"argv": ["true"]},
        )
    _, key = machines.mint("vm", ["mine"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="not yours").task
    worker = start_worker(base, key, tmp_path, "theirs")
    assert worker.wait(30) == 2
    assert "403" in (tmp_path / "worker.log").read_text()
    assert store.get_task(task.id).status == "todo"


def test_a_killed_remote_worker_loses_its_lease_and_a_local_worker_finishes(
    daphne,
    tmp_path,
    settings,
):
    # A registered repository with a remote: the remote host would push and submit
    # it for the server's intake; killed mid-run, it does neither.
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [roots]
    repo = roots / "app"
    git("clone", "-q", str(bare_remote(tmp_path)), str(repo), cwd=tmp_path)
    remote = Path(git("remote", "get-url", "origin", cwd=repo))
    repositories.register(
        team="default", path=str(repo), id="app", remote=str(remote), verify_cmd="test -s out.txt"
    )
    for agent_id in ("either-bot", "local-bot"):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id,
            team="default",
            runtime="command",
            # Slow only on the remote host (its checkouts are under worker/).
            settings={
                "argv": [
                    "sh",
                    "-c",
                    'case "$PWD" in */worker/*) sleep 60;; esac; echo finished > out.txt',
                ],
                "repository": "app",
            },
        )
    _, key = machines.mint("vm", ["either-bot"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="survive", repository="app").task
    worker = start_worker(
        base,
        key,
        tmp_path,
        "either-bot",
        extra=("--lease-ms", "1500"),
    )
    try:
        claimed = lambda: store.get_task(task.id).status == "in_progress"  # noqa: E731
        wait_for(claimed, 30, "claimed remotely", tmp_path=tmp_path)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    # Nothing special: the lease lapses and the next claim takes the task back.
    deadline = time.monotonic() + 30
    report = Executor("local-bot").work_once()
    while report.outcome in ("idle", None) and time.monotonic() < deadline:
        time.sleep(0.2)
        report = Executor("local-bot").work_once()
    assert report.task_id == task.id and report.outcome == "succeeded", report
    finished = store.get_task(task.id)
    assert finished.status == "in_review", (finished.attempts, finished.abandonments)
    assert finished.assignee_agent_id == "local-bot"
    result = service.approve(task.id, by="ada")
    assert result["result"] == "landed" and result["push"]["pushed"], result
    assert store.get_task(task.id).status == "done"
    kinds = list(
        Event.objects.filter(task_id=task.id).order_by("seq").values_list("kind", flat=True)
    )
    assert kinds.count("claimed") == 2 and "released" in kinds, kinds
    assert "work_submitted" not in kinds, kinds  # the killed host handed nothing in
    # Landed once, on the server and on the remote alike.
    bodies = git("log", "--format=%b", "main", cwd=repo).splitlines()
    assert bodies.count(f"clawboo: land task {task.id}") == 1, bodies
    assert git("rev-parse", "main", cwd=remote) == git("rev-parse", "main", cwd=repo)
    assert git("for-each-ref", "refs/heads/clawboo/", cwd=remote) == ""  # never pushed


def test_an_agent_bound_while_work_all_runs_is_run_by_its_remote_worker_not_here(
    daphne,  # noqa: F811
    database_url,
    tmp_path,
):
    """`work --all` (what `clawboo up` runs) started before the binding: from the
    binding on, the server's workers leave the agent's tasks to its host."""
    for agent_id in ("far-bot", "here-bot"):
        registry.create_agent(
            id=agent_id,
            display_name=agent_id,
            team="default",
            runtime="command",
            settings={"argv": ["sh", "-c", 'echo "ran in $PWD"']},
        )
    base = daphne(SERVER_ENV)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "tests.worker_settings",
        "CLAWBOO_STATE_DIR": str(tmp_path / "state"),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
    }
    log_path = tmp_path / "work.log"
    with log_path.open("w") as out:
        local = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "work", "--all", "--poll-ms", "500"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    worker = None
    try:
        # Up and working: before the binding, the server runs far-bot's tasks.
        before = store.create_task(title="before", route={"agent": "far-bot"}).task
        wait_for(lambda: store.get_task(before.id).status == "done", 30, "work --all up")
        assert str(tmp_path / "worker") not in store.get_task(before.id).output["summary"]
        _, key = machines.mint("laptop", ["far-bot"])  # bound while it runs
        # Seen before the next claim (at the latest a --poll-ms later): said once.
        wait_for(lambda: "far-bot is bound" in log_path.read_text(), 10, "the binding seen")
        bound = store.create_task(title="for the laptop", route={"agent": "far-bot"}).task
        sentinel = store.create_task(title="for here", route={"agent": "here-bot"}).task
        # The server's loop looked at the board since (it ran the sentinel) ...
        wait_for(lambda: store.get_task(sentinel.id).status == "done", 30, "sentinel done")
        # ... and left the bound agent's task alone.
        assert store.get_task(bound.id).status == "todo"
        worker = start_worker(base, key, tmp_path, "far-bot")
        wait_for(
            lambda: store.get_task(bound.id).status == "done",
            45,
            lambda: f"bound task done: {store.get_task(bound.id).status}",
            tmp_path=tmp_path,
        )
        # The remote worker runs in a checkout under its --cache-dir.
        assert str(tmp_path / "worker") in store.get_task(bound.id).output["summary"]
        assert str(tmp_path / "worker") not in store.get_task(sentinel.id).output["summary"]
    finally:
        if worker is not None:
            worker.kill()
            worker.wait(10)
        local.send_signal(signal.SIGTERM)
        try:
            local.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(local.pid, signal.SIGKILL)
            local.wait(10)


def test_a_claude_code_agent_that_may_ask_for_tool_approvals_is_refused_up_front(
    daphne,  # noqa: F811
    tmp_path,
):
    """A remote run cannot reach the board's permission prompt yet: the worker says
    so at its start and runs nothing, rather than let the agent's writes be denied."""
    registry.create_agent(
        id="claude-far", display_name="Claude", team="default", runtime="claude-code"
    )
    _, key = machines.mint("vm", ["claude-far"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="needs a write", route={"agent": "claude-far"}).task
    worker = start_worker(base, key, tmp_path, "claude-far")
    assert worker.wait(30) == 2
    said = (tmp_path / "worker.log").read_text()
    assert "may ask for tool approvals" in said and "permission_mode 'acceptEdits'" in said
    assert "Traceback" not in said
    assert store.get_task(task.id).status == "todo"


@pytest.mark.parametrize(
    ("runtime", "settings_", "refused"),
    [
        ("claude-code", {}, True),
        ("claude-code", {"permission_mode": "default"}, True),
        ("claude-code", {"permission_mode": "dontAsk"}, False),
        ("claude-code", {"permission_mode": "bypassPermissions"}, False),
        ("command", {"argv": ["true"]}, False),
        # A runtime newer than this host's clawboo: refused up front, not a traceback.
        ("warp-drive", {}, True),
    ],
)
def test_only_agents_that_would_ask_the_board_are_refused_remotely(runtime, settings_, refused):
    from executor.remote import remote_refusal

    agent = {"id": "a", "runtime": runtime, "settings": settings_}
    assert (remote_refusal(agent) is not None) == refused


def _posts(metrics: bytes, route_end: str) -> float:
    """How many POSTs to a route ending ``route_end`` the server counted."""
    total = 0.0
    for line in metrics.decode().splitlines():
        if line.startswith("clawboo_http_request_duration_seconds_count{") and (
            'method="POST"' in line and f'{route_end}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_remote_worker_opens_its_run_in_the_claim_not_in_a_call_of_its_own(daphne, tmp_path):
    # As a local worker's: the claim and its run's start are one write, so no death
    # between two calls can leave a claim without its run.
    registry.create_agent(
        id="far-bot", display_name="Far", team="default", runtime="command",
        settings={"argv": ["sh", "-c", "echo did it"]},
    )  # fmt: skip
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="one", file_mutating=False).task
    worker = start_worker(base, key, tmp_path, "far-bot")
    try:
        wait_for(lambda: store.get_task(task.id).status == "done", 45, "the task done",
                 tmp_path=tmp_path)  # fmt: skip
    finally:
        worker.kill()
        worker.wait(10)
    (run,) = store.list_executions(task.id)
    assert run.status == "succeeded"
    assert run.started_at == store.get_task(task.id).started_at  # the claim's own stamp
    metrics = http_body(base + "/metrics", {"Authorization": "Bearer scrape-me"})
    assert _posts(metrics, "/claim-next") >= 1
    assert _posts(metrics, "/executions") == 0


def test_a_remote_worker_facing_an_older_server_opens_its_run_by_a_call_of_its_own(tmp_path):
    # A server from before ``open_run`` refuses the unknown field (400 naming it):
    # the worker claims again without it, and from then on opens runs itself.
    from executor.remote import Worker
    from executor.rest import ApiError

    class OlderServer:
        def __init__(self) -> None:
            self.claims: list[dict] = []

        def call_patiently(self, method, path, body=None, *, stop=None):
            if (method, path) == ("GET", "/api/agents/far-bot"):  # its health gate reads it
                return 200, {"id": "far-bot", "runtime": "command", "settings": {"argv": ["true"]}}
            assert (method, path) == ("POST", "/api/board/claim-next")
            self.claims.append(dict(body))
            if "open_run" in body:
                raise ApiError(400, {"error": "validation_error", "field": "open_run"})
            return 204, None

    api = OlderServer()
    worker = Worker(api, ["far-bot"], tmp_path, heartbeat_s=1, poll_s=1, run_timeout_s=10)
    assert worker.work_one("far-bot") is False
    assert worker.work_one("far-bot") is False
    assert api.claims == [
        {"agent_id": "far-bot", "open_run": True},
        {"agent_id": "far-bot"},
        {"agent_id": "far-bot"},
    ]
    assert not worker.open_in_claim


def test_a_remote_worker_claims_nothing_for_an_agent_its_host_cannot_run(tmp_path, monkeypatch):
    # The local executor claims nothing for an agent whose preflight fails where it
    # runs (its argv[0] does not resolve): a remote worker did not ask its own host,
    # so it claimed task after task and failed each. The same gate now, probed again
    # (the agent read afresh) every CLAWBOO_HEALTH_PROBE_MS: fixed, it claims.
    from executor.remote import Worker

    monkeypatch.setenv("CLAWBOO_HEALTH_PROBE_MS", "0")  # probed again at every look

    class Server:
        def __init__(self) -> None:
            self.claims: list[dict] = []
            self.agent = {
                "id": "far-bot",
                "runtime": "command",
                "settings": {"argv": ["no-such-tool-on-this-host"]},
                "updated_at": "1",
            }

        def call_patiently(self, method, path, body=None, *, stop=None):
            if (method, path) == ("GET", "/api/agents/far-bot"):
                return 200, dict(self.agent)
            assert (method, path) == ("POST", "/api/board/claim-next")
            self.claims.append(dict(body))
            return 204, None

    api = Server()
    worker = Worker(api, ["far-bot"], tmp_path, heartbeat_s=1, poll_s=1, run_timeout_s=10)
    assert worker.work_one("far-bot") is False
    assert api.claims == []
    assert "agent is unhealthy" in worker.paused["far-bot"]
    assert "no-such-tool-on-this-host" in worker.paused["far-bot"]
    api.agent = {**api.agent, "settings": {"argv": ["true"]}, "updated_at": "2"}
    assert worker.work_one("far-bot") is False  # 204: nothing ready
    assert api.claims == [{"agent_id": "far-bot", "open_run": True}]


def test_a_remote_run_stops_at_its_agents_timeout_s_as_a_local_run_does(daphne, tmp_path):
    # The agent's settings.timeout_s bounds its runs on any worker: a remote worker
    # started without --run-timeout used to give every run an hour whatever the agent
    # said, so a hung run held its task (and its lease) sixty minutes.
    from board.models import ExecutionProcess

    registry.create_agent(
        id="hung-bot",
        display_name="Hung",
        team="default",
        runtime="command",
        settings={"argv": ["sleep", "300"], "timeout_s": 2},
    )
    _, key = machines.mint("laptop", ["hung-bot"])
    base = daphne(SERVER_ENV)
    worker = start_worker(base, key, tmp_path, "hung-bot")
    try:
        task = store.create_task(title="never ends", file_mutating=False).task
        wait_for(
            lambda: (
                ExecutionProcess.objects.filter(task_id=task.id).exclude(status="running").exists()
            ),
            40,
            "the run ended by its agent's timeout_s",
            tmp_path=tmp_path,
        )
    finally:
        worker.kill()
        worker.wait(10)
    run = ExecutionProcess.objects.filter(task_id=task.id).exclude(status="running").first()
    assert run is not None and run.status == "timed_out"
    assert run.error_class == "timeout"


def test_a_remote_run_takes_its_tasks_model_over_its_agents_as_a_local_run_does(daphne, tmp_path):
    # A routine template's model reaches its fire's task as metadata.model: a remote
    # worker that took the task ran the agent's own model all the same.
    from tests.runtimes.stand_ins import install_stand_in, real_lines

    claude = install_stand_in(
        tmp_path / "bin", "claude", stdout=real_lines("claude-code/run1-write-file.stream.jsonl")
    )
    registry.create_agent(
        id="far-cc",
        display_name="Far",
        team="default",
        runtime="claude-code",
        settings={
            "binary": str(claude.path),
            "model": "claude-opus-4-1",
            "permission_mode": "dontAsk",  # a remote worker runs no agent that may ask
        },
    )
    _, key = machines.mint("laptop", ["far-cc"])
    base = daphne(SERVER_ENV)
    worker = start_worker(base, key, tmp_path, "far-cc")
    try:
        task = store.create_task(
            title="digest", file_mutating=False, metadata={"model": "claude-haiku-4-5"}
        ).task
        wait_for(
            lambda: Path(f"{claude.path}.call.json").exists(),
            40,
            "the run started",
            tmp_path=tmp_path,
        )
    finally:
        worker.kill()
        worker.wait(10)
    argv = claude.call()["argv"]
    assert argv[argv.index("--model") + 1] == "claude-haiku-4-5", task.id


def test_a_remote_workers_git_gives_up_after_its_git_timeout_setting(daphne, tmp_path):
    """docs/remote-workers.md: the worker's own git calls (its clone, fetches and
    pushes) give up after ``CLAWBOO_WORKER_GIT_TIMEOUT_S``, read from its environment."""
    import socket

    with socket.socket() as silent:  # a git:// remote that takes the call, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        registry.create_agent(
            id="far-bot",
            display_name="Far",
            team="default",
            runtime="command",
            settings={
                "argv": ["true"],
                "repo_remote": f"git://127.0.0.1:{silent.getsockname()[1]}/remote.git",
            },
        )
        _, key = machines.mint("laptop", ["far-bot"])
        base = daphne(SERVER_ENV)
        env = {"CLAWBOO_WORKER_GIT_TIMEOUT_S": "2"}
        task = store.create_task(title="behind a hung remote").task
        started = time.monotonic()
        worker = start_worker(base, key, tmp_path, "far-bot", extra=("--once",), env_add=env)
        try:
            # A failure around the run: the task goes back to todo with it as feedback.
            wait_for(
                lambda: "no answer within 2s" in (store.get_task(task.id).feedback or ""),
                40,
                lambda: f"the task failed on the git timeout: {store.get_task(task.id).feedback!r}",
                tmp_path=tmp_path,
            )
        finally:
            worker.kill()
            worker.wait(10)
    # Given up at the setting's two seconds, not the default's two minutes.
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    ("value", "reads"), [("7", 7), ("", 120), ("0", 120), ("-3", 120), ("soon", 120)]
)
def test_a_worker_git_timeout_out_of_range_reads_as_the_default(monkeypatch, value, reads):
    from executor import rest

    monkeypatch.setenv("CLAWBOO_WORKER_GIT_TIMEOUT_S", value)
    assert rest.git_timeout_s() == reads


def test_work_a_person_failed_is_run_again_remotely_into_review_not_done(daphne, tmp_path):
    # GOVERNANCE §6: a person's verdict against work outlives its return to todo; the
    # remote worker's complete is refused (409 verification_required) and it hands the
    # work to review, as a local run does -- not left to lapse, run again and again.
    registry.create_agent(
        id="far-bot", display_name="Far", team="default", runtime="command",
        settings={"argv": ["sh", "-c", "echo did it again"]},
    )  # fmt: skip
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="judged by hand", file_mutating=False).task
    ticket = store.claim(task.id, "far-bot", "command").ticket
    store.set_verdict(task.id, "fail", "not what was asked", by="ada")
    store.release(task.id, ticket=ticket)
    worker = start_worker(base, key, tmp_path, "far-bot")
    try:
        wait_for(lambda: store.get_task(task.id).status != "todo" and not store.get_task(
            task.id).lease_until, 45, "the task settled", tmp_path=tmp_path)  # fmt: skip
    finally:
        worker.kill()
        worker.wait(10)
    after = store.get_task(task.id)
    assert (after.status, after.verdict) == ("in_review", "fail")


def test_the_connected_line_names_the_host_the_board_shows_for_the_worker():
    # It said "connected to … as vm" (the machine's name) while the board said the
    # agent "runs on gpu-1" (the name the machine key was minted for).
    from executor.remote import connected_line

    bound = [{"id": "coder", "runs_on": {"host": "gpu-1", "seen_at": None, "live": False}}]
    assert connected_line("https://board", bound, "vm") == (
        "connected to https://board as gpu-1 (this machine: vm): coder"
    )
    same = [{"id": "coder", "runs_on": {"host": "vm", "seen_at": None, "live": True}}]
    assert connected_line("https://board", same, "vm") == "connected to https://board as vm: coder"
    assert connected_line("https://board", [{"id": "coder", "runs_on": None}], "vm") == (
        "connected to https://board as vm: coder"
    )


def test_a_host_that_cannot_check_out_any_task_is_stopped_by_the_breaker_not_the_queue(
    daphne, tmp_path, settings
):
    """A failure around the run is counted by the agent's breaker on every worker,
    the local executor's rule (executor.runner.settle_crash): a remote host whose every
    checkout fails (its remote gone) pauses its agent after CLAWBOO_BREAKER_FAILURES
    tasks, which go back to todo, instead of blocking the whole queue one by one."""
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repo_remote": str(tmp_path / "gone.git")},
    )
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    ids = [store.create_task(title=f"t{n}").task.id for n in range(5)]
    worker = start_worker(base, key, tmp_path, "far-bot")
    try:
        wait_for(
            lambda: registry.get_agent("far-bot").state == "paused",
            60,
            lambda: f"the agent paused: {[store.get_task(i).status for i in ids]}",
            tmp_path=tmp_path,
        )
    finally:
        worker.kill()
        worker.wait(10)
    tasks = [store.get_task(i) for i in ids]
    assert {t.status for t in tasks} == {"todo"}, [(t.status, t.error) for t in tasks]
    assert sum(1 for t in tasks if t.attempts) <= settings.CLAWBOO_BREAKER_FAILURES
    assert "3 consecutive failed runs" in registry.get_agent("far-bot").state_reason


def test_a_repository_with_no_remote_fails_in_one_line_that_says_what_to_set(
    daphne, tmp_path, settings
):
    """The demo's repository has no `remote`: a worker tried on it logged a traceback
    for each task it took, and the task's feedback said only "RuntimeError: repository
    'shop' has no remote to clone". One line each, saying what to set."""
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    repo = roots / "shop"
    git("clone", "-q", str(bare_remote(tmp_path)), str(repo), cwd=tmp_path)
    settings.CLAWBOO_REPO_ROOTS = [roots]
    repositories.register(team="default", path=str(repo), id="shop")
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": ["true"], "repository": "shop"},
    )
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="no remote", repository="shop", max_attempts=1).task
    worker = start_worker(base, key, tmp_path, "far-bot")
    try:
        wait_for(
            lambda: "no remote to clone" in (store.get_task(task.id).error or ""),
            30,
            lambda: f"the task failed: {store.get_task(task.id).error!r}",
            tmp_path=tmp_path,
        )
    finally:
        worker.kill()
        worker.wait(10)
    error = store.get_task(task.id).error
    assert error.startswith("remote worker: repository 'shop' has no remote to clone: "), error
    assert "PATCH /api/repositories/shop" in error, error
    log = (tmp_path / "worker.log").read_text()
    assert "Traceback" not in log, log
    assert f"task {task.id}: no checkout on this host: repository 'shop'" in log, log


def test_the_workers_log_says_each_task_it_claims_runs_and_hands_on(daphne, tmp_path):
    """Between "connected" and a run's end (minutes, for a real agent) the worker's log
    said nothing: a person watching it could not tell a worker at work from one stuck."""
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={
            "argv": ["sh", "-c", "echo hi > hi.txt"],
            "repo_remote": str(bare_remote(tmp_path)),
        },
    )
    _, key = machines.mint("laptop", ["far-bot"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="Say hi").task
    worker = start_worker(base, key, tmp_path, "far-bot")
    log_file = tmp_path / "worker.log"
    try:
        wait_for(lambda: store.get_task(task.id).status == "done", 30, "done", tmp_path=tmp_path)
        # The worker says "completed" once the server has answered its close, which
        # is after the task is done: wait for the line, not just the status.
        wait_for(
            lambda: f"task {task.id}: completed" in log_file.read_text(),
            10,
            "the completed line",
            tmp_path=tmp_path,
        )
    finally:
        worker.kill()
        worker.wait(10)
    log = log_file.read_text()
    lines = [line.split(" INFO ", 1)[-1] for line in log.splitlines()]
    claimed = lines.index(f"task {task.id}: claimed for far-bot: Say hi")
    cloning = next(i for i, line in enumerate(lines) if line.startswith(f"task {task.id}: cloning"))
    assert claimed < cloning, lines
    running = next(i for i, line in enumerate(lines) if line.startswith(f"task {task.id}: running"))
    assert lines[running].startswith(f"task {task.id}: running far-bot (command) in "), lines
    assert claimed < running < lines.index(f"task {task.id}: completed"), lines


def test_a_worker_given_a_persons_key_says_it_needs_a_machine_token(daphne, tmp_path):
    """The tour's key (`create_agent_token admin`) given to `clawboo worker` answered
    "no --agent given and the token names none", and its holder went looking for an
    --agent to add; it is a person's key, and a host needs a machine token."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    ada = get_user_model().objects.create_user("ada")
    key = Token.objects.create(user=ada).key
    base = daphne(SERVER_ENV)
    worker = start_worker(base, key, tmp_path)
    assert worker.wait(30) == 2
    said = (tmp_path / "worker.log").read_text()
    assert said.endswith(
        "clawboo worker: error: the token is ada's own key, not a machine token: mint this"
        " host one on the server (`clawboo create_machine_token --host H --agent A`)\n"
    ), said
