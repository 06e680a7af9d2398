"""The remote worker's side of a run's report, against a scripted HTTP server (no
Django on that side, as on a worker host): its log goes in bounded chunks, one at a
time, and a slow server holds the run's output back rather than letting it pile up;
a chunk whose answer was lost is sent again with the same offset."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from executor import remote
from executor.runtimes.base import UsageSoFar


class Scripted:
    """Records each request's body; ``delay_s`` slows every answer; ``fail_first``
    answers the first log chunk 503 (after taking it, as a lost answer looks)."""

    def __init__(self, delay_s: float = 0.0, fail_first: bool = False) -> None:
        self.delay_s, self.fail_first = delay_s, fail_first
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.log = ""
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer = owner.answer(self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.requests.append((path, body))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(self.delay_s)
            with self.lock:
                if path.endswith("/log"):
                    size = len(self.log.encode())
                    if body["offset"] == size:
                        self.log += "".join(f"{item['line']}\n" for item in body["lines"])
                    if self.fail_first:
                        self.fail_first = False
                        return 503, {"error": "unavailable"}
                    return 200, {"size": len(self.log.encode()), "written": True, "full": False}
                if path.endswith("/usage"):
                    return 200, {"stop": False, "max_run_cents": 100, "rates": {"in": 400}}
                return 200, {"id": 7, "status": "cancelled", "error_class": ""}
        finally:
            with self.lock:
                self.in_flight -= 1

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def scripted():
    made: list[Scripted] = []

    def make(**kwargs: Any) -> Scripted:
        made.append(Scripted(**kwargs))
        return made[-1]

    yield make
    for server in made:
        server.close()


def report_for(server: Scripted) -> remote.RunReport:
    return remote.RunReport(remote.Api(server.base, "key"), "t1", "ticket", 7)


def test_a_slow_server_holds_the_runs_output_back_in_bounded_chunks(scripted, monkeypatch):
    monkeypatch.setattr(remote, "LOG_BUFFER_CHARS", 1000)
    monkeypatch.setattr(remote, "LOG_CHUNK_CHARS", 400)
    server = scripted(delay_s=0.1)
    report = report_for(server)
    started = time.monotonic()
    for i in range(300):  # 300 lines of 10 characters: 3,000, three buffers' worth
        report.output("stdout", f"line {i:04d}")
    held = time.monotonic() - started
    report.close(None, "done")
    chunks = [body for path, body in server.requests if path.endswith("/log")]
    # The printer waited for the server (a pipe that fills), the backlog never grew
    # past its bound, and the log arrived whole, in order, one chunk at a time.
    assert held >= 0.3, f"output was never held back ({held:.2f} s)"
    assert all(sum(len(x["line"]) + 1 for x in c["lines"]) <= 400 for c in chunks)
    assert server.most_in_flight == 1
    assert server.log == "".join(f"line {i:04d}\n" for i in range(300))
    assert report.dropped == 0


def test_a_chunk_whose_answer_was_lost_is_sent_again_and_written_once(scripted):
    server = scripted(fail_first=True)
    report = report_for(server)
    report.output("stdout", "only once")
    report.close(None, "done")
    chunks = [body for path, body in server.requests if path.endswith("/log")]
    assert [c["offset"] for c in chunks] == [0, 0]
    assert server.log == "only once\n"


def test_the_worker_stops_the_run_at_the_report_that_reaches_its_ceiling(scripted):
    server = scripted()
    report = report_for(server)
    stopped = threading.Event()
    report.cancel = stopped.set
    # The first answer gives the ceiling (100¢) and the model's rates (400¢/M in).
    report.usage(UsageSoFar(tokens_in=100_000, model="m"))
    report.send_usage()
    report.usage(UsageSoFar(tokens_in=200_000, model="m"))  # 80¢
    assert not stopped.is_set()
    report.usage(UsageSoFar(tokens_in=250_000, model="m"))  # 100¢: at once, no round trip
    assert stopped.is_set() and "ceiling of 100¢" in (report.stop or "")
    report.close(None, "done")


def test_a_remote_runs_steps_and_its_stall_go_to_the_server_in_the_one_format(scripted):
    from executor.steps import Step

    server = scripted()
    report = report_for(server)
    report.steps([Step("command", "false", "error", {"command": "false"}, "exit code 1")])
    report.stalled(2.5)
    report.close(None, "done")
    sent = {path.rsplit("/", 1)[-1]: body for path, body in server.requests}
    assert sent["steps"]["ticket"] == "ticket"
    [step] = sent["steps"]["steps"]
    assert (step["kind"], step["name"], step["status"], step["detail"]) == (
        "command", "false", "error", "exit code 1",
    )  # fmt: skip
    assert set(step) == {
        "kind", "name", "status", "arguments", "detail", "started_at", "duration_ms",
        "tokens_in", "tokens_out", "cost_millicents", "model",
    }  # fmt: skip
    assert sent["stalled"] == {"ticket": "ticket", "silent_s": 2.5}
