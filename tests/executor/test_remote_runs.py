"""A remote worker's run is reported as it goes, with real processes: ``clawboo
worker`` (a subprocess holding a URL and a machine key) against a real daphne. Its
lines stream to whoever watches the card, its log downloads whole, and its usage is
checked against the run's ceiling by the server, which stops it."""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from board import store
from board.models import CostStatus, ExecutionProcess, TaskComment
from board.store import spend
from core import machines, registry
from tests.executor.test_remote_worker import SERVER_ENV, start_worker, wait_for
from tests.executor.test_spend import STAND_IN, processes_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

LINES = 15
TICKER = (
    "import sys, time\n"
    f"for i in range({LINES}):\n"
    "    print(f'line {i} at {time.time():.3f}', flush=True)\n"
    "    time.sleep(0.2)\n"
)


def person_key() -> str:
    user = get_user_model().objects.create_user(username="ada", password="pw")
    registry.add_member("default", user)
    return Token.objects.create(user=user).key


def get(url: str, key: str) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {key}"})
    with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
        return answer.read()


class LogWatcher:
    """A board socket that asked to watch a task's run (as the open card does),
    keeping every ``log`` frame with the time it arrived."""

    def __init__(self, base: str, key: str, task_id: str) -> None:
        self.url = base.replace("http://", "ws://") + f"/ws/board/?team=default&token={key}"
        self.task_id = task_id
        self.frames: list[tuple[float, dict]] = []
        self.watching = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        assert self.watching.wait(10), "the socket did not open"

    def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed
        from websockets.sync.client import connect

        with connect(self.url, open_timeout=10, proxy=None) as ws:
            assert json.loads(ws.recv(10))["type"] == "hello"
            ws.send(json.dumps({"type": "watch-log", "task": self.task_id}))
            self.watching.set()
            while not self.stop.is_set():
                try:
                    frame = json.loads(ws.recv(0.2))
                except TimeoutError:
                    continue
                except ConnectionClosed:
                    return
                if frame.get("type") == "log":
                    self.frames.append((time.time(), frame))

    def text(self) -> str:
        return "".join(frame.get("text", "") for _, frame in self.frames)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


@pytest.mark.timing
def test_a_remote_runs_lines_stream_to_the_card_as_printed_and_its_log_downloads_whole(
    daphne,
    tmp_path,
):
    registry.create_agent(
        id="ticker",
        display_name="Ticker",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", TICKER]},
    )
    _, machine_key = machines.mint("laptop", ["ticker"])
    key = person_key()
    base = daphne(SERVER_ENV)
    worker = start_worker(base, machine_key, tmp_path, "ticker", extra=("--poll", "120"))
    watcher = None
    try:
        task = store.create_task(title="Tick", file_mutating=False).task
        watcher = LogWatcher(base, key, task.id)
        wait_for(lambda: watcher.frames, 20, "the first line on the socket", tmp_path=tmp_path)
        seen_at, first = watcher.frames[0]
        printed_at = float(first["text"].splitlines()[0].rsplit(" ", 1)[1])
        assert seen_at - printed_at < 1.0, f"first line after {seen_at - printed_at:.2f} s"
        # While it runs, more lines arrive.
        wait_for(lambda: "line 3 at" in watcher.text(), 5, "line 3", tmp_path=tmp_path)
        assert store.get_task(task.id).status == "in_progress", "the run ended before line 3"
        wait_for(
            lambda: store.get_task(task.id).status == "done",
            30,
            lambda: f"the task done: {store.get_task(task.id).error}",
            tmp_path=tmp_path,
        )
        wait_for(lambda: f"line {LINES - 1} at" in watcher.text(), 5, "the last line")
    finally:
        if watcher is not None:
            watcher.close()
        worker.kill()
        worker.wait(10)
    (execution,) = store.list_executions(task.id)
    assert execution.status == "succeeded" and execution.exit_code == 0
    assert execution.cost_status == CostStatus.UNKNOWN  # a command reports no usage
    assert {frame["execution"] for _, frame in watcher.frames} == {execution.id}
    downloaded = get(f"{base}/api/board/tasks/{task.id}/executions/{execution.id}/log", key)
    lines = downloaded.decode().splitlines()
    assert [line.rsplit(" at ", 1)[0] for line in lines] == [f"line {i}" for i in range(LINES)]
    assert downloaded.decode() == watcher.text()


def test_a_remote_run_over_its_ceiling_is_stopped_by_the_server_with_no_process_left(
    daphne,
    tmp_path,
):
    binary = tmp_path / "bin" / "claude"
    binary.parent.mkdir()
    binary.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {str(STAND_IN)!r}\n"
        f"runpy.run_path({str(STAND_IN)!r}, run_name='__main__')\n"
    )
    binary.chmod(0o755)
    # Each turn: 100000 input tokens of claude-opus-5-5 (4 $/M) = 40¢; it runs forever,
    # a turn a second: the worker's stop lands before the next turn even beside three
    # other test processes (at 0.2 s, one more turn was printed once under that load).
    registry.create_agent(
        id="spender",
        display_name="Spender",
        team="default",
        runtime="claude-code",
        settings={
            "binary": str(binary),
            "extra_args": ["--turns", "0", "--input-tokens", "100000", "--every", "1.0"],
            # A mode that never asks for a tool approval: a remote worker refuses
            # one that may (it cannot reach the board's permission prompt yet).
            "permission_mode": "dontAsk",
        },
    )
    # A team cap the stopped run exhausts: the worker claims the task no more after it.
    cap = {"scope": "team", "scope_id": "default", "window": "day", "mode": "cap"}
    budget = spend.create_budget("default", {**cap, "limit_cents": 110})
    _, machine_key = machines.mint("gpu-box", ["spender"])
    base = daphne(SERVER_ENV)
    task = store.create_task(title="spend", file_mutating=False, max_run_cents=100).task
    worker = start_worker(base, machine_key, tmp_path, "spender", extra=("--poll", "120"))
    try:
        closed = lambda: ExecutionProcess.objects.filter(  # noqa: E731
            task_id=task.id, finished_at__isnull=False
        ).exists()
        wait_for(closed, 45, "the run stopped and closed", tmp_path=tmp_path)
        # The worker itself stopped the run: no process is left in its scratch dir,
        # while the worker goes on (waiting out the paused budget).
        scratch = (tmp_path / "worker" / "scratch" / task.id).resolve()
        wait_for(lambda: not processes_in(scratch), 10, "the run's processes gone")
        assert worker.poll() is None
    finally:
        worker.kill()
        worker.wait(10)
    (execution,) = store.list_executions(task.id)
    assert execution.status == "cancelled" and execution.error_class == "budget"
    assert "ceiling of 100¢" in execution.error
    assert execution.cost_status == CostStatus.ESTIMATED
    # Stopped at the first report at or past the ceiling (3 turns, 120¢), give or
    # take a turn printed before the signal landed.
    assert 100 <= execution.cost_cents <= 100 + 40
    assert execution.tokens_in == execution.cost_cents // 40 * 100_000
    assert execution.log  # the run's tail, as a local run keeps it
    finished = store.get_task(task.id)
    assert finished.status == "blocked" and "ceiling of 100¢" in finished.error
    assert finished.cost_cents == execution.cost_cents
    (comment,) = TaskComment.objects.filter(task_id=task.id)
    assert "ceiling of 100¢" in comment.body
    assert spend.get_budget(budget.pk).as_dict(store.now())["status"] == "paused"
    assert "Traceback" not in (tmp_path / "worker.log").read_text()
