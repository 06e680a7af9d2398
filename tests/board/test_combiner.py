"""The claim combiner (board.store.combiner): claims from many processes share one
writer's transactions, and whatever happens to that writer, no claim is lost,
doubled, or left undelivered to its claimer."""

from __future__ import annotations

import fcntl
import os
import pickle
import signal
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections, transaction

from board import store
from board.models import Task
from board.store import claims, combiner
from core import events, storage
from core.models import Event, Team
from tests.board.seed import bulk_tasks
from tests.conftest import read_json_line

pytestmark = pytest.mark.django_db(transaction=True)

# Through the combiner from the first claim on, however few processes claim.
ON = {"CLAWBOO_CLAIM_COMBINER": "1", "CLAWBOO_CLAIM_COMBINER_CROWD": "1"}


@pytest.fixture(autouse=True)
def fresh_combiner(settings: Any) -> Iterator[None]:
    """No combiner of an earlier test is hosted here or connected to."""
    settings.CLAWBOO_CLAIM_COMBINER = True
    settings.CLAWBOO_CLAIM_COMBINER_CROWD = 1
    combiner.reset()
    yield
    combiner.reset()


def claimed_seqs() -> list[int]:
    return list(
        Event.objects.filter(team_id="default").order_by("seq").values_list("seq", flat=True)
    )


def assert_drained_once(results: list[dict[str, Any]], ids: list[str]) -> None:
    claimed = [task_id for r in results for task_id in r["claimed"]]
    assert Counter(claimed).most_common(1)[0][1] == 1  # nobody got a task twice
    assert sorted(claimed) == sorted(ids)  # none lost, none claimed unseen
    assert not Task.objects.filter(status="todo").exists()
    assert set(Task.objects.values_list("attempts", flat=True)) == {1}
    assert Event.objects.filter(kind="claimed").count() == len(ids)
    seqs = claimed_seqs()
    assert seqs == list(range(1, len(seqs) + 1))  # per-team sequence without gaps
    assert Team.objects.get(pk="default").last_event_seq == seqs[-1]


def test_twelve_processes_drain_through_one_writer_in_shared_transactions(default_team, race):
    ids = bulk_tasks(2000)

    results = race([["drain", "--agent", f"w{i}"] for i in range(12)], extra_env=ON)

    assert_drained_once(results, ids)
    assert sum(1 for r in results if r["claimed"]) > 1  # every process claimed for itself
    served = sum(r["served"] for r in results)
    batches = sum(r["batches"] for r in results)
    assert served > 0  # the claims went through a combiner...
    assert served > batches  # ...and shared its transactions
    if connection.vendor == "sqlite":  # ...whose WAL a thread beside them backfilled
        assert sum(r["checkpoints"] for r in results) > 0


def test_a_combiner_killed_mid_drain_loses_and_doubles_no_claim(default_team, run_worker, race):
    ids = bulk_tasks(4000)
    host = run_worker("host", "--report-after", "200", extra_env=ON)
    assert read_json_line(host)["hosting"]
    killer = threading.Thread(
        target=lambda: (read_json_line(host), host.send_signal(signal.SIGKILL)), daemon=True
    )
    killer.start()

    results = race([["drain", "--agent", f"w{i}"] for i in range(6)], extra_env=ON)

    killer.join(5)
    host.wait(5)
    assert host.returncode == -signal.SIGKILL  # it died while the drain went on
    assert_drained_once(results, ids)


def test_the_host_claims_directly_while_nobody_else_is_connected(default_team):
    bulk_tasks(3)
    first = store.claim_next("ada")  # finds no combiner, becomes its host
    assert first is not None
    (host,) = combiner.hosted()
    served = host.served
    second = store.claim_next("ada")
    assert second is not None and second.task.id != first.task.id
    assert host.served == served  # no round trip to its own thread


def serve_once(path: str, *, run: bool, say_lost: bool = False) -> threading.Thread:
    """A stand-in combiner at ``path`` that takes one request, commits its claim if
    ``run``, and hangs up without answering — or answers that it cannot tell
    whether its batch committed (``say_lost``): the claimer cannot know either way."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def serve() -> None:
        conn, _ = listener.accept()
        hello = pickle.dumps(("hello", None, None))
        conn.sendall(struct.pack("!I", len(hello)) + hello)
        size = struct.unpack("!I", conn.recv(4, socket.MSG_WAITALL))[0]
        _, *fields = pickle.loads(conn.recv(size, socket.MSG_WAITALL))
        prepared = claims._Prepared(*fields)
        if run:
            claims.claim_batch([prepared])
            connections.close_all()
        if say_lost:
            lost = pickle.dumps(("lost", None, None))
            conn.sendall(struct.pack("!I", len(lost)) + lost)
        conn.close()
        listener.close()
        os.unlink(path)

    thread = threading.Thread(target=serve)
    thread.start()
    return thread


@pytest.mark.parametrize("say_lost", [False, True], ids=["hangs-up", "says-lost"])
@pytest.mark.parametrize("committed", [True, False], ids=["committed", "not-run"])
def test_a_lost_answer_still_gives_the_claimer_exactly_its_claim(default_team, committed, say_lost):
    ids = bulk_tasks(3)
    paths = combiner._paths(connection)
    assert paths is not None
    server = serve_once(paths.sock, run=committed, say_lost=say_lost)
    seen: list[Event] = []
    events.subscribe(seen.append)
    try:
        result = store.claim_next("ada")
    finally:
        events.unsubscribe(seen.append)
    server.join(5)

    assert result is not None and result.ok
    assert result.task.id == ids[0]
    assert Task.objects.get(pk=ids[0]).assignee_agent_id == "ada"
    # One claim, whether the stand-in committed it (read back) or not (run directly).
    assert Task.objects.filter(status="in_progress").count() == 1
    assert Event.objects.filter(kind="claimed").count() == 1
    assert [(e.kind, e.task_id) for e in seen] == [("claimed", ids[0])]
    assert result.task.revision == Task.objects.get(pk=ids[0]).revision


def prepared_claim(agent: str) -> Any:
    db = connections["default"]
    return claims._prepare(
        db,
        None,
        lambda: Task.objects.filter(claims.ready_filter()).order_by("created_at", "id"),
        agent,
        None,
        60_000,
        None,
    )


def test_a_request_that_fails_fails_only_itself(default_team):
    ids = bulk_tasks(3)
    broken = prepared_claim("bob")._replace(sql="SELECT no_such_column FROM tasks")

    answers = combiner._run_batch([prepared_claim("ada"), broken, prepared_claim("cy")])

    assert [kind for kind, _ in answers] == ["ok", "error", "ok"]
    assert isinstance(answers[1][1], Exception)
    owners = dict(Task.objects.filter(status="in_progress").values_list("id", "assignee_agent_id"))
    assert owners == {ids[0]: "ada", ids[1]: "cy"}
    assert claimed_seqs() == [1, 2]


class FakeDriverError(Exception):
    def __init__(self, sqlstate: str | None) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("sqlstate", "on_postgresql"),
    [("23505", True), ("42703", True), ("40P01", True), ("08006", False), (None, False)],
)
def test_only_a_certain_rollback_reruns_a_batch_request_by_request(sqlstate, on_postgresql):
    """SQLite rolls a failed batch back in-process; PostgreSQL's outcome is certain
    only when the server said why, and not about the connection."""
    try:
        raise RuntimeError("wrapped") from FakeDriverError(sqlstate)
    except RuntimeError as exc:
        wrapped = exc
    expected = on_postgresql if connection.vendor == "postgresql" else True
    assert combiner._rolled_back(wrapped) is expected


def test_a_batch_is_one_transaction_that_leaves_nothing_when_it_fails(default_team):
    team = "INSERT INTO teams (id, name, last_event_seq, created_at) VALUES (%s, %s, 0, %s)"
    stamp = "2026-01-01 00:00:00"

    with pytest.raises(Exception):  # noqa: B017 - whatever the backend calls it
        storage.fetch_rows_atomically(
            [(team + " RETURNING id", ["t-one", "one", stamp]), ("SELECT nope FROM tasks", [])]
        )
    assert not Team.objects.filter(pk="t-one").exists()

    rows = storage.fetch_rows_atomically(
        [(team + " RETURNING id", ["t-two", "two", stamp]), ("SELECT COUNT(*) FROM teams", [])]
    )
    assert rows[0] == ("t-two",) and rows[1] is not None
    assert Team.objects.filter(pk="t-two").exists()


def test_a_claim_inside_a_callers_transaction_stays_in_it(default_team):
    bulk_tasks(1)

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        assert store.claim_next("ada") is not None
        raise Undo
    assert Task.objects.filter(status="todo").count() == 1  # rolled back with the caller's
    assert not combiner.hosted()  # and no combiner was asked


def test_a_forked_child_neither_hosts_nor_uses_its_parents_connection(default_team):
    bulk_tasks(2)
    assert store.claim_next("ada") is not None  # this process now hosts the combiner
    (host,) = combiner.hosted()
    assert combiner._client.sock is not None

    pid = os.fork()
    if pid == 0:  # the child: report by exit code only
        ok = not combiner.hosted() and combiner._client.sock is None
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert host.thread.is_alive() and combiner.hosted() == [host]
    paths = combiner._paths(connection)
    assert paths is not None
    probe = os.open(paths.lock, os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):  # the parent still holds the role
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)


def test_an_idle_host_gives_its_role_back(default_team, monkeypatch):
    monkeypatch.setattr(combiner, "IDLE_SECONDS", 0.1)
    bulk_tasks(1)
    assert store.claim_next("ada") is not None
    (host,) = combiner.hosted()
    combiner._forget(combiner._client.sock)  # its one claimer hangs up

    host.thread.join(5)

    assert not host.thread.is_alive() and not combiner.hosted()
    if connection.vendor == "sqlite":  # its checkpointer went with it
        assert host.checkpointer is not None and not host.checkpointer.is_alive()
    paths = combiner._paths(connection)
    assert paths is not None and not os.path.exists(paths.sock)
    probe = os.open(paths.lock, os.O_RDWR)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free for the next host
    finally:
        os.close(probe)


def test_claims_go_direct_until_enough_processes_claim_at_once(default_team, settings):
    settings.CLAWBOO_CLAIM_COMBINER_CROWD = 3
    bulk_tasks(3)
    paths = combiner._paths(connection)
    assert paths is not None
    crowd = combiner._crowd(paths.crowd)
    assert crowd is not None
    crowd.map[:] = bytes(len(crowd.map))  # earlier tests' workers claimed here too
    crowd.counted_at = 0  # count afresh
    assert store.claim_next("ada") is not None
    assert not combiner.hosted()  # alone: claimed directly

    # Two more processes claimed just now (their stamps, in their slots).
    now = time.monotonic_ns()
    for pid in (os.getpid() + 1, os.getpid() + 2):
        combiner._CROWD_SLOT.pack_into(
            crowd.map, (pid % combiner._CROWD_SLOTS) * combiner._CROWD_SLOT.size, pid, now
        )
    crowd.counted_at = 0
    assert store.claim_next("ada") is not None
    (host,) = combiner.hosted()
    assert host.served == 1  # three at once: through the combiner

    time.sleep(combiner.CROWD_WINDOW_NS / 1e9 + 0.1)  # the others went quiet
    crowd.counted_at = 0
    assert store.claim_next("ada") is not None
    assert host.served == 1


def test_switched_off_it_is_never_asked(default_team, settings):
    settings.CLAWBOO_CLAIM_COMBINER = False
    bulk_tasks(1)
    assert store.claim_next("ada") is not None
    assert not combiner.hosted()


def test_its_socket_lives_in_a_directory_only_this_user_can_enter(default_team):
    paths = combiner._paths(connection)
    assert paths is not None
    info = os.stat(os.path.dirname(paths.sock))
    assert info.st_uid == os.getuid() and info.st_mode & 0o077 == 0
