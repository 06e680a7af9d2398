"""A remote worker on a host that reaches the server's HTTP port and nothing else.

    root namespace (the server)                          netns (the worker's host)
      daphne  10.213.N.1:PORT  <------------ HTTP + ws ---  clawboo worker --server ...
      qcluster (the intake), the test database            (no route to PostgreSQL/Redis)
      the registered repository, its bare remote  <-- git over the shared file system

A chain of three dependent tasks in a repository with a remote is claimed there,
worked, pushed and submitted; the server fetches each branch, judges it with the
repository's verify command and sends it to review; a person approves through the
API; each lands once, in order, and the landed base goes back to the remote for
the next clone. Runs on the suite's database (SQLite, or PostgreSQL with
``CLAWBOO_TEST_DATABASE_URL``) where network namespaces can be made (root, ip).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token

from board import store
from core import machines, registry, repositories
from core.models import Event
from tests.conftest import ROOT
from tests.fixtures.gitrepos import git, make_repo
from tests.ops.test_multihost import Host, _run, namespaces_work

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

VERIFY = "test -s log.txt"
AGENT_ARGV = ["sh", "-c", 'echo "$CLAWBOO_TASK_TITLE" >> log.txt; echo did it']
# Tried from inside the namespace: none may answer.
CLOSED_PORTS = (5432, 6379)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(method: str, url: str, key: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(  # noqa: S310 - a test server
        url,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


PROBE = """
import socket, sys, urllib.request
host, port = sys.argv[1], int(sys.argv[2])
answers = {}
for where in (host, "127.0.0.1"):
    for p in [int(x) for x in sys.argv[3:]]:
        try:
            socket.create_connection((where, p), timeout=2).close()
            answers[f"{where}:{p}"] = "open"
        except OSError as exc:
            answers[f"{where}:{p}"] = type(exc).__name__
try:
    with urllib.request.urlopen(f"http://{host}:{port}/api/schema/", timeout=5) as r:
        answers["http"] = r.status
except Exception as exc:
    answers["http"] = repr(exc)
print(__import__("json").dumps(answers))
"""


@pytest.fixture
def worker_host(tmp_path: Path):
    why = namespaces_work()
    if why:
        pytest.skip(why)
    tag = os.getpid() % 100000
    octet = 240 + os.getpid() % 10  # away from test_multihost's 16..236
    host = Host(
        name="far",
        netns=f"cbw{tag}",
        address=f"10.213.{octet}.2",
        gateway=f"10.213.{octet}.1",
        logs=tmp_path,
    )
    outside, inside = f"cbw{tag}r", f"cbw{tag}n"
    try:
        _run("ip", "netns", "add", host.netns)
        _run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        _run("ip", "link", "set", inside, "netns", host.netns)
        _run("ip", "addr", "add", f"{host.gateway}/24", "dev", outside)
        _run("ip", "link", "set", outside, "up")
        ns = ("ip", "netns", "exec", host.netns)
        _run(*ns, "ip", "addr", "add", f"{host.address}/24", "dev", inside)
        _run(*ns, "ip", "link", "set", inside, "up")
        _run(*ns, "ip", "link", "set", "lo", "up")
        yield host
    finally:
        host.kill()
        subprocess.run(["ip", "netns", "del", host.netns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", outside], capture_output=True, timeout=30)


def _server_env(database_url: str, tmp_path: Path, gateway: str, roots: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "clawboo.settings",
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "CLAWBOO_STATE_DIR": str(tmp_path / "server-state"),
        "CLAWBOO_REPO_ROOTS": str(roots),
        "ALLOWED_HOSTS": f"{gateway},127.0.0.1,localhost",
        "CLAWBOO_HTTP_RATE_LIMIT": "0",
        "CLAWBOO_Q_WORKERS": "1",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def test_a_chain_worked_on_a_host_without_database_access_is_reviewed_and_landed_in_order(
    worker_host: Host, database_url: str, tmp_path: Path, settings
):
    started = time.monotonic()
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [roots]
    repo = make_repo(roots / "app", files=1)
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    repositories.register(
        team="default", path=str(repo), id="app", remote=str(remote), verify_cmd=VERIFY
    )
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": AGENT_ARGV, "repository": "app"},
    )
    _, machine_key = machines.mint("netns-host", ["far-bot"])
    person = get_user_model().objects.create_superuser("reviewer", password="pw")
    person_key = Token.objects.create(user=person).key

    port = _free_port()
    gateway = worker_host.gateway
    env = _server_env(database_url, tmp_path, gateway, roots)
    base = f"http://{gateway}:{port}"
    server = [
        _start(
            [sys.executable, "-m", "daphne", "-b", gateway, "-p", str(port)]
            + ["clawboo.asgi:application"],
            env,
            tmp_path / "daphne.log",
        ),
        _start([sys.executable, "-m", "clawboo.cli", "qcluster"], env, tmp_path / "qcluster.log"),
    ]
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server[0].poll() is None, _tail(tmp_path / "daphne.log")
            try:
                urllib.request.urlopen(base + "/api/schema/", timeout=2).close()  # noqa: S310
                break
            except OSError:
                assert time.monotonic() < deadline, _tail(tmp_path / "daphne.log")
                time.sleep(0.1)

        # The host reaches the server's HTTP port, and neither PostgreSQL nor Redis.
        probe = subprocess.run(
            ["ip", "netns", "exec", worker_host.netns, sys.executable, "-c", PROBE]
            + [gateway, str(port), *map(str, CLOSED_PORTS)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        answers = json.loads(probe.stdout or "{}")
        assert answers.pop("http") == 200, (answers, probe.stderr)
        assert answers and "open" not in answers.values(), answers
        if connection.vendor == "postgresql":  # it does answer in the root namespace
            pg_port = int(connection.settings_dict.get("PORT") or 5432)
            with socket.create_connection(("127.0.0.1", pg_port), timeout=2):
                pass

        first = store.create_task(title="one", repository="app").task
        second = store.create_task(title="two", repository="app", depends_on=[first.id]).task
        third = store.create_task(title="three", repository="app", depends_on=[second.id]).task
        ids = [first.id, second.id, third.id]

        worker_host.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "CLAWBOO_TEST_DATABASE_URL")
            and not k.startswith("CLAWBOO_TEST_")
        } | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        worker_host.start(
            "worker",
            sys.executable,
            "-m",
            "clawboo.cli",
            "worker",
            "--server",
            base,
            "--token",
            machine_key,
            "--agent",
            "far-bot",
            "--heartbeat",
            "0.5",
            "--poll",
            "2",
            "--cache-dir",
            str(tmp_path / "worker-cache"),
        )

        landed = []
        for task_id in ids:
            deadline = time.monotonic() + 30
            # In review, and the intake's end recorded (its last write, just after).
            while (task := store.get_task(task_id)).output is None or (
                task.status,
                task.output["intake"]["state"],
            ) != ("in_review", "review"):
                assert worker_host.procs["worker"].poll() is None, worker_host.log_tail("worker")
                assert task.status in ("todo", "in_progress", "in_review"), (
                    task.status,
                    task.error,
                )
                assert time.monotonic() < deadline, (
                    f"{task.title} in review: {task.status} {task.output}\n"
                    + worker_host.log_tail("worker")
                    + _tail(tmp_path / "qcluster.log")
                )
                time.sleep(0.1)
            # Judged on the server with the repository's verify command.
            assert task.verdict == "pass", task.verdict_evidence
            assert task.verification_detail["attempts"][-1]["gate"]["command"] == VERIFY
            assert task.output["host"]  # the worker's own report rides along
            status, answer = _http(
                "POST", f"{base}/api/board/tasks/{task_id}/approve", person_key, {}
            )
            assert status == 200, answer
            assert answer["result"] == "landed" and answer["push"]["pushed"], answer
            landed.append(answer["commit"])
    finally:
        worker_host.kill()
        for proc in server:
            _stop_group(proc)  # qcluster's own processes too, not its leader alone

    # The base's history: the seed, then task1, task2, task3, each landed once.
    bodies = git(repo, "log", "--reverse", "--format=%b", "main").splitlines()
    lands = [line for line in bodies if line.startswith("clawboo: land task")]
    assert lands == [f"clawboo: land task {i}" for i in ids], bodies
    assert git(repo, "rev-list", "main").splitlines()[:3] == landed[::-1]
    assert (repo / "log.txt").read_text().splitlines() == ["one", "two", "three"]
    # The remote holds the landed base: the next clone starts from landed work.
    assert git(remote, "rev-parse", "main") == landed[-1]
    for task_id in ids:
        assert store.get_task(task_id).status == "done"
        kinds = list(Event.objects.filter(task_id=task_id).values_list("kind", flat=True))
        assert kinds.count("claimed") == 1 and kinds.count("review_requested") == 1, kinds
    print(f"\nremote chain of 3 reviewed and landed in {time.monotonic() - started:.1f} s")


OUTAGE_S = 30


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """The leader and everything of its group (daphne, qcluster's workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def _serve(argv: list[str], env: dict[str, str], log: Path, base: str) -> subprocess.Popen[bytes]:
    proc = _start(argv, env, log)
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, _tail(log)
        try:
            urllib.request.urlopen(base + "/api/schema/", timeout=2).close()  # noqa: S310
            return proc
        except OSError:
            assert time.monotonic() < deadline, _tail(log)
            time.sleep(0.1)


# What it proves is the worker's own conduct while the HTTP server is gone (one line
# saying so, one saying it reconnected, the next task worked); the server's side of a
# remote run on PostgreSQL (claim, intake, judge, land) is the chain test's, above.
@pytest.mark.backend_independent
def test_a_worker_whose_server_stops_for_30_s_says_so_once_and_works_the_next_task(
    worker_host: Host, database_url: str, tmp_path: Path, settings
):
    roots = (tmp_path / "repos").resolve()
    roots.mkdir()
    settings.CLAWBOO_REPO_ROOTS = [roots]
    repo = make_repo(roots / "app", files=1)
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(remote))
    repositories.register(
        team="default", path=str(repo), id="app", remote=str(remote), verify_cmd=VERIFY
    )
    registry.create_agent(
        id="far-bot",
        display_name="Far",
        team="default",
        runtime="command",
        settings={"argv": AGENT_ARGV, "repository": "app"},
    )
    _, machine_key = machines.mint("netns-host", ["far-bot"])
    person = get_user_model().objects.create_superuser("reviewer", password="pw")
    person_key = Token.objects.create(user=person).key
    port = _free_port()
    gateway = worker_host.gateway
    env = _server_env(database_url, tmp_path, gateway, roots)
    base = f"http://{gateway}:{port}"
    daphne = [sys.executable, "-m", "daphne", "-b", gateway, "-p", str(port)]
    daphne += ["clawboo.asgi:application"]
    server = _serve(daphne, env, tmp_path / "daphne.log", base)
    # The intake's qcluster keeps running: it is the HTTP server that goes away.
    cluster = _start(
        [sys.executable, "-m", "clawboo.cli", "qcluster"], env, tmp_path / "qcluster.log"
    )
    worker_host.env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE") and not k.startswith("CLAWBOO_")
    } | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}

    def landed_within(task_id: str, seconds: float) -> None:
        """Worked there, taken in and judged here, then approved: it lands."""
        deadline = time.monotonic() + seconds
        while (task := store.get_task(task_id)).output is None or (
            task.status,
            task.output.get("intake", {}).get("state"),
        ) != ("in_review", "review"):
            assert worker_host.procs["worker"].poll() is None, worker_host.log_tail("worker")
            assert time.monotonic() < deadline, (
                task.status,
                task.output,
                worker_host.log_tail("worker"),
                _tail(tmp_path / "qcluster.log"),
            )
            time.sleep(0.1)
        status, answer = _http("POST", f"{base}/api/board/tasks/{task_id}/approve", person_key, {})
        assert status == 200 and answer["result"] == "landed", answer
        assert store.get_task(task_id).status == "done"

    try:
        worker_host.start(
            "worker",
            sys.executable,
            "-m",
            "clawboo.cli",
            "worker",
            "--server",
            base,
            "--token",
            machine_key,
            "--agent",
            "far-bot",
            "--heartbeat",
            "0.5",
            "--poll",
            "2",
            "--cache-dir",
            str(tmp_path / "worker-cache"),
        )
        before = store.create_task(title="before the outage", repository="app").task
        landed_within(before.id, 45)

        _stop_group(server)
        stopped = time.monotonic()
        # The outage: the worker stays up the whole time (a poll, not a wait).
        while time.monotonic() - stopped < OUTAGE_S:
            assert worker_host.procs["worker"].poll() is None, worker_host.log_tail("worker")
            time.sleep(0.5)
        after = store.create_task(title="after the outage", repository="app").task
        server = _serve(daphne, env, tmp_path / "daphne.log", base)
        landed_within(after.id, 60)
    finally:
        worker_host.kill()
        _stop_group(server)
        _stop_group(cluster)
    lands = [
        line
        for line in git(repo, "log", "--format=%b", "main").splitlines()
        if line.startswith("clawboo: land task")
    ]
    assert lands == [f"clawboo: land task {after.id}", f"clawboo: land task {before.id}"]

    log = (tmp_path / f"{worker_host.name}-worker.log").read_text(errors="replace")
    assert "Traceback" not in log, log
    assert log.count("server unreachable") == 1, log
    assert log.count("reconnected") == 1, log
    unreachable = next(line for line in log.splitlines() if "server unreachable" in line)
    assert "retrying" in unreachable
