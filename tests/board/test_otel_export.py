"""OpenTelemetry export, received for real: with OTEL_EXPORTER_OTLP_ENDPOINT set, an
OTLP/HTTP receiver on 127.0.0.1 (its requests decoded with the official
``opentelemetry-proto``) gets one trace per task tree -- the task spans, each run's
span under its task, each step's under its run, GenAI attributes where they fit;
with the endpoint unset no provider or exporter is made at all."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from board import store
from board.store import steps as steps_store
from core import otel, registry

trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """An OTLP/HTTP trace receiver: every span it was sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                request = trace_service.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            receiver.spans.extend(scope.spans)
                answer = trace_service.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def named(self) -> dict[str, Any]:
        with self.lock:
            return {span.name: span for span in self.spans}


@pytest.fixture
def receiver(monkeypatch) -> Iterator[Receiver]:
    found = Receiver()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    otel.reset()
    yield found
    otel.reset()
    found.server.shutdown()


def run_task(task_id: str, agent: str, steps: list[dict[str, Any]], *, close: bool) -> int:
    claimed = store.claim(task_id, agent)
    assert claimed.ok, claimed
    run = store.open_execution(task_id, claimed.ticket, runtime="command")
    steps_store.record_steps(run.id, steps)
    if close:
        store.close_execution(run.id, "succeeded", tokens_in=100, tokens_out=5)
    assert not store.complete(task_id, {"summary": "ok"}, ticket=claimed.ticket).declined
    assert store.get_task(task_id).status == "done"
    return run.id


def attrs(span: Any) -> dict[str, Any]:
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = value.string_value or value.int_value or value.bool_value
    return out


def test_one_trace_per_task_tree_with_runs_under_tasks_and_steps_under_runs(receiver):
    registry.create_agent(id="otel-bot", display_name="O", team="default", runtime="command")
    root = store.create_task(title="root", file_mutating=False).task
    child = store.create_task(title="child", parent_task_id=root.id, file_mutating=False).task
    other = store.create_task(title="other tree", file_mutating=False).task
    turn = {"kind": "model_turn", "name": "model", "model": "m-1", "tokens_in": 10, "tokens_out": 2}
    bash = {"kind": "command", "name": "Bash", "status": "error", "detail": "exit code 1"}
    root_run = run_task(root.id, "otel-bot", [turn, bash], close=True)
    child_run = run_task(child.id, "otel-bot", [{"kind": "tool_call", "name": "Read"}], close=False)
    run_task(other.id, "otel-bot", [], close=True)

    expected = {"task root", "task child", "task other tree", "chat m-1", "execute_tool Bash",
                "execute_tool Read"}  # fmt: skip
    deadline = time.monotonic() + 10
    while not expected <= set(receiver.named()):
        otel.flush()
        assert time.monotonic() < deadline, sorted(receiver.named())
        time.sleep(0.05)
    spans = receiver.named()
    runs = [s for s in receiver.spans if s.name == "invoke_agent otel-bot"]
    assert len(runs) == 3
    by_id = {attrs(s)["clawboo.execution.id"]: s for s in runs}

    tree = spans["task root"].trace_id
    assert spans["task child"].trace_id == tree and spans["task other tree"].trace_id != tree
    assert spans["task root"].parent_span_id == b""
    assert spans["task child"].parent_span_id == spans["task root"].span_id
    assert by_id[root_run].parent_span_id == spans["task root"].span_id
    assert by_id[child_run].parent_span_id == spans["task child"].span_id
    assert by_id[child_run].trace_id == tree
    assert spans["chat m-1"].parent_span_id == by_id[root_run].span_id
    assert spans["execute_tool Bash"].parent_span_id == by_id[root_run].span_id
    assert spans["execute_tool Read"].parent_span_id == by_id[child_run].span_id
    # GenAI semantic conventions where they fit; the failing step is an error span.
    assert attrs(spans["chat m-1"])["gen_ai.operation.name"] == "chat"
    assert attrs(spans["chat m-1"])["gen_ai.usage.input_tokens"] == 10
    assert attrs(spans["execute_tool Bash"])["gen_ai.tool.name"] == "Bash"
    assert spans["execute_tool Bash"].status.code == 2  # STATUS_CODE_ERROR
    assert attrs(by_id[root_run])["gen_ai.operation.name"] == "invoke_agent"
    assert attrs(by_id[root_run])["gen_ai.agent.id"] == "otel-bot"


def test_with_no_endpoint_no_exporter_is_made(monkeypatch):
    for name in otel.ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    otel.reset()
    registry.create_agent(id="quiet-bot", display_name="Q", team="default", runtime="command")
    task = store.create_task(title="untraced", file_mutating=False).task
    run_task(task.id, "quiet-bot", [{"kind": "tool_call", "name": "Read"}], close=True)
    assert not otel.enabled()
    assert otel.provider() is None and otel._provider is None


def test_an_endpoint_without_the_sdk_is_said_once_and_the_board_goes_on(monkeypatch, caplog):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    otel.reset()

    def missing() -> None:
        raise ImportError("No module named 'opentelemetry'")

    monkeypatch.setattr(otel, "_make_provider", missing)
    registry.create_agent(id="quiet-bot", display_name="Q", team="default", runtime="command")
    task = store.create_task(title="untraced", file_mutating=False).task
    steps = [{"kind": "tool_call", "name": f"Read {n}"} for n in range(5)]
    run_task(task.id, "quiet-bot", steps, close=True)
    said = [r for r in caplog.records if "SDK is not installed" in r.getMessage()]
    assert len(said) == 1
    assert not [r for r in caplog.records if r.exc_info]  # no traceback per span
    otel.reset()
