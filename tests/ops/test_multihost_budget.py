"""Acceptance (issue 32, GOVERNANCE.md §3): a team's ``cap`` budget holds across two
hosts. Both hosts of the multi-host harness (network namespaces, each with daphne
and a worker process, one PostgreSQL and one Redis) drain a team whose runs report
usage; the spend is one figure in the database, so the team stops at its cap
(plus at most one run's ceiling), nothing more is claimed on either host, and the
80 % and 100 % crossings each reach the team's webhook exactly once, whichever
host's write made them.

Why one ceiling bounds the overshoot: a claim the cap covers is admitted only while
its spend plus the headroom of the runs in flight (their ceilings less what they
spent) is under the cap, and the claims of both hosts take turns on the budget's row
(``FOR UPDATE``), so only the run admitted last can pass the cap, by its ceiling --
however many agents run and however large their usage reports
(tests/executor/test_spend_workers.py shows eight agents with reports of half a
ceiling).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Sum
from rest_framework.authtoken.models import Token

from board import store
from board.models import ExecutionProcess, Task
from board.store import spend
from core import registry
from core.models import Event, Heartbeat
from ops import notify
from ops.models import NotificationDelivery
from tests.executor.test_spend import STAND_IN
from tests.ops.conftest import Receiver
from tests.ops.test_multihost import Host, hosts, wait_until  # noqa: F401 - the fixture

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.multihost,
    pytest.mark.timeout(300),
]

CAP = 100
# Each run: 3 turns of 12500 input tokens of claude-opus-5-5 (4 $/M) = 5¢ a turn,
# 15¢ a run, under its 20¢ ceiling: runs succeed until the cap stops them.
CEILING = 20
TURN_CENTS = 5
TASKS = 30
AGENTS_PER_HOST = 2
SETTLE_S = 60  # generous: the machine is shared


def stand_in_claude(tmp_path: Path) -> Path:
    """An executable ``claude`` that is the stand-in (as tests/executor does)."""
    claude = tmp_path / "claude"
    claude.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    claude.chmod(0o755)
    return claude


@pytest.fixture
def hook(hosts: tuple[Host, Host]) -> Iterator[Receiver]:  # noqa: F811 - the imported fixture
    """A webhook receiver in the root namespace that both hosts reach, as another
    machine on their network: listening on host A's gateway, which host B reaches
    through its own (its default route)."""
    host_a, host_b = hosts
    for host in hosts:
        host.run_inside("ip", "route", "add", "default", "via", host.gateway)
    found = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with found.lock:
                found.received.append({"headers": dict(self.headers), "body": body})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host_a.gateway, 0), Handler)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    found.url = f"http://{host_a.gateway}:{server.server_address[1]}/hook"
    yield found
    server.shutdown()
    server.server_close()


def agents_of(host: Host) -> list[str]:
    return [f"{host.name}{n}" for n in range(1, AGENTS_PER_HOST + 1)]


def settled(budget_id: int) -> bool:
    """The cap has paused the team and every run has closed (none holds a task)."""
    return (
        spend.get_budget(budget_id).paused_until is not None
        and not ExecutionProcess.objects.filter(status="running").exists()
        and not Task.objects.filter(status="in_progress").exists()
    )


def test_two_hosts_draining_a_capped_team_stay_within_cap_plus_one_ceiling(
    hosts: tuple[Host, Host],  # noqa: F811 - the imported fixture
    hook: Receiver,
    tmp_path: Path,
) -> None:
    host_a, host_b = hosts
    claude = stand_in_claude(tmp_path)
    for host in hosts:
        for agent in agents_of(host):
            registry.create_agent(
                id=agent,
                display_name=agent,
                team="default",
                runtime="claude-code",
                settings={
                    "binary": str(claude),
                    "extra_args": ["--turns", "3", "--input-tokens", "12500", "--every", "0.4"],
                },
            )
    user = get_user_model().objects.create_user("ada", password="pw")
    registry.add_member("default", user)
    key = Token.objects.create(user=user).key
    registry.create_agent(id="api-b", display_name="B", team="default", runtime="human", owner=user)
    notify.create_channel(
        "default", "spend", "webhook", url=hook.url, reasons=["budget_warning", "budget_exhausted"]
    )
    budget = spend.create_budget(
        "default",
        {
            "scope": "team",
            "scope_id": "default",
            "window": "total",
            "limit_cents": CAP,
            "mode": "cap",
        },
    )
    host_a.daphne()
    host_b.daphne()
    host_a.worker(agents_of(host_a))
    host_b.worker(agents_of(host_b))
    # The work appears once both hosts' workers are up, so both drain it.
    workers = Heartbeat.objects.filter(part="workers")
    wait_until(lambda: workers.count() == 2, SETTLE_S, "both hosts' workers", hosts)
    started = time.monotonic()
    ids = [
        store.create_task(title=f"job {n}", file_mutating=False, max_run_cents=CEILING).task.id
        for n in range(TASKS)
    ]
    wait_until(lambda: settled(budget.pk), SETTLE_S, "the cap to stop the team", hosts)
    settled_s = time.monotonic() - started

    # Capped: neither host's workers (still polling every 100 ms) claim anything more...
    runs = ExecutionProcess.objects.count()
    time.sleep(2)
    assert ExecutionProcess.objects.count() == runs
    assert not Task.objects.filter(status="in_progress").exists()
    left = Task.objects.filter(pk__in=ids, status="todo").count()
    # Each finished run cost 15¢: at most (cap + ceiling) / 15¢ tasks were done.
    assert left >= TASKS - (CAP + CEILING) // (3 * TURN_CENTS)
    # ... and a person's claim through host B's API is refused the same way.
    request = urllib.request.Request(  # noqa: S310
        f"{host_b.base}/api/board/tasks/{ids[-1]}/claim",
        data=json.dumps({"agent_id": "api-b"}).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=15)  # noqa: S310
    assert refused.value.code == 409
    assert json.loads(refused.value.read())["error"] == "budget_paused"

    # The spend: one figure across hosts, within the cap plus one run's ceiling.
    spent = ExecutionProcess.objects.aggregate(total=Sum("cost_cents"))["total"]
    assert CAP <= spent <= CAP + CEILING
    body = spend.get_budget(budget.pk).as_dict(store.now())
    assert (body["spent_cents"], body["status"]) == (spent, "paused")
    by_host = {
        name: ExecutionProcess.objects.filter(agent_id__startswith=name).count()
        for name in ("a", "b")
    }
    assert by_host["a"] > 0 and by_host["b"] > 0, by_host
    assert Task.objects.filter(pk__in=ids, status="done").exists()

    # The crossings: recorded once, delivered once, whichever host crossed them.
    assert Event.objects.filter(kind="budget_warning").count() == 1
    assert Event.objects.filter(kind="budget_exhausted").count() == 1
    wait_until(lambda: len(hook.received) >= 2, 30, "the two notifications", hosts)
    time.sleep(1)  # a duplicate would arrive about now
    reasons = sorted(json.loads(r["body"])["reason"] for r in hook.received)
    assert reasons == ["budget_exhausted", "budget_warning"]
    assert NotificationDelivery.objects.filter(status="delivered").count() == 2
    print(
        f"\n2 hosts spent {spent}¢ of a {CAP}¢ cap (ceiling {CEILING}¢) in {runs}"
        f" runs ({by_host['a']} on A, {by_host['b']} on B), settled in {settled_s:.1f} s;"
        f" {left} of {TASKS} tasks left todo"
    )
