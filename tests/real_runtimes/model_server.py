"""A scripted model endpoint on 127.0.0.1 that the real agent CLIs talk to.

One stdlib ``ThreadingHTTPServer`` speaks the three wire formats the runtimes use,
streaming as the real providers do:

- Anthropic Messages, ``POST /v1/messages`` (+ ``/v1/messages/count_tokens``): Claude Code;
- OpenAI Responses, ``POST /v1/responses``: Codex;
- OpenAI Chat Completions, ``POST /v1/chat/completions`` and ``GET /v1/models``:
  Hermes and OpenClaw.

The script (shared/runtimes/README.md): while no tool result is in the conversation,
answer with one tool call that writes a file in the working tree -- the offered tool
whose name contains ``write`` and has a path-like and a content-like property
(Claude ``Write``, Hermes ``write_file``, OpenClaw ``write``), else Codex's shell tool
(``exec_command {cmd}``); once a tool result is there, answer with the final text.
A request that offers no tools gets the final text.

When the board's MCP tools are offered (a tool named ``…create_subtask`` and one
named ``…comment``, as each runtime prefixes them), the model first calls
``create_subtask`` (:data:`BOARD_SUBTASK_TITLE`) and then ``comment``
(:data:`BOARD_COMMENT`), one per turn, before writing the file and finishing.

Failures are scripted per test (``server.script = Script(failure="401")``) or picked by
the request itself: the API key :data:`BAD_KEY` is refused with a 401, and a request
whose body contains :data:`HANG_MARKER`, :data:`ERROR_500_MARKER` or
:data:`AUTH_401_MARKER` hangs, fails with a 500, or is refused. Every error is in the
provider's own shape. Each request is logged (``server.requests``).

Run it by hand with ``python -m tests.real_runtimes.model_server [--port N] [--log F]``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "fake-model"
BAD_KEY = "sk-clawboo-bad-key"
HANG_MARKER = "[[model:hang]]"
ERROR_500_MARKER = "[[model:500]]"
AUTH_401_MARKER = "[[model:401]]"
DEFAULT_FILE = "hello.txt"
DEFAULT_CONTENT = "hello from the fake model\n"
DEFAULT_FINAL = "DONE: wrote the file."
BOARD_SUBTASK_TITLE = "Follow-up filed by the scripted model"
BOARD_COMMENT = "Progress from the scripted model: subtask filed, writing the file."

# Where each runtime states its working directory in what it sends (checked against
# the real requests): Claude Code's and Hermes's system prompts, Codex's
# environment context, OpenClaw's workspace line.
_WORKDIR_PATTERNS = (
    re.compile(r"<cwd>([^<\n]+)</cwd>"),
    re.compile(r"Primary working directory: (/[^\s\"\\]+)"),
    re.compile(r"[Ww]orking directory: (/[^\s\"\\]+)"),
    re.compile(r"[Cc]urrent working directory: (/[^\s\"\\]+)"),
    re.compile(r"[Ww]orkspace(?: directory)?: (/[^\s\"\\]+)"),
)
_PATH_PROPS = ("file_path", "path", "filepath", "filename", "file")
_CONTENT_PROPS = ("content", "contents", "text", "data", "body")


@dataclass
class Script:
    """How the server answers. ``failure``: None, ``"401"``, ``"500"`` or ``"hang"``."""

    failure: str | None = None
    # Relative to the working directory the runtime states, or absolute.
    file: str = DEFAULT_FILE
    content: str = DEFAULT_CONTENT
    final_text: str = DEFAULT_FINAL
    # Overrides the working directory read from the request.
    workdir: str | None = None
    # How long a hang lasts at most (the server's stop ends it sooner).
    hang_s: float = 600.0
    # Never finish: every turn calls the write tool again, so the run keeps
    # reporting usage until something stops it (the spend ceiling's test).
    keep_going: bool = False
    # A shell command the model runs through the runtime's shell tool instead of the
    # write (Claude's ``Bash``): what a permission mode may not allow.
    command: str | None = None
    # Call the board's MCP tools first, when they are offered.
    board_calls: bool = True
    # One tool call per turn, in order, instead of the one write: ``write:<file>``
    # (the write tool, or the shell where there is none) or ``command:<shell line>``
    # (the shell tool); then the final text. The trace's tests script with it.
    sequence: list[str] | None = None


@dataclass
class LoggedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # What the server did: "tool_call:<name>", "text", "401", "500", "hang", "404", ...
    reply: str = ""
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
            "reply": self.reply,
            "at": self.at,
        }


class ModelServer:
    """The endpoint; ``start()`` binds a free loopback port, ``stop()`` ends hangs too."""

    def __init__(self, script: Script | None = None, log_file: Path | None = None) -> None:
        self.script = script or Script()
        self.requests: list[LoggedRequest] = []
        self.log_file = log_file
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self, port: int = 0) -> ModelServer:
        handler = type("Handler", (_Handler,), {"model_server": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="model-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """The base URL without ``/v1`` (Anthropic's convention)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url_v1(self) -> str:
        """The base URL with ``/v1`` (OpenAI's convention)."""
        return f"{self.url}/v1"

    # -- what tests read ----------------------------------------------------------

    def model_requests(self) -> list[LoggedRequest]:
        """The requests that asked the model for a turn (not probes or token counts)."""
        paths = ("/v1/messages", "/v1/responses", "/v1/chat/completions")
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path in paths]

    def replies(self) -> list[str]:
        return [r.reply for r in self.model_requests()]

    def next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def record(self, entry: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    def log_to_file(self, entry: LoggedRequest) -> None:
        """Append ``entry`` to the log file once its reply is known."""
        if self.log_file is not None:
            with self._lock, self.log_file.open("a") as log:
                log.write(json.dumps(entry.to_json()) + "\n")

    def wait_hang(self, seconds: float) -> None:
        self._stopping.wait(seconds)


class _Handler(BaseHTTPRequestHandler):
    model_server: ModelServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # requests are logged as LoggedRequest entries instead

    # -- routing ----------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802
        entry = self._entry(None)
        try:
            self._get(entry)
        finally:
            self.model_server.log_to_file(entry)

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else self._read_chunked()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")[:2000]}
        entry = self._entry(body)
        try:
            self._post(entry, body)
        finally:
            self.model_server.log_to_file(entry)

    def _get(self, entry: LoggedRequest) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/v1/models", "/models"):
            entry.reply = "models"
            self._json(200, {"object": "list", "data": [_model_object(MODEL)]})
        elif path.startswith(("/v1/models/", "/models/")):
            entry.reply = "model"
            self._json(200, _model_object(path.rsplit("/", 1)[-1]))
        else:
            entry.reply = "404"
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})

    def _post(self, entry: LoggedRequest, body: Any) -> None:
        path = self.path.split("?", 1)[0]
        routes = {
            "/v1/messages": (_anthropic_turn, "anthropic"),
            "/v1/responses": (_responses_turn, "openai"),
            "/v1/chat/completions": (_chat_turn, "openai"),
            "/responses": (_responses_turn, "openai"),
            "/chat/completions": (_chat_turn, "openai"),
        }
        if path == "/v1/messages/count_tokens":
            entry.reply = "count_tokens"
            self._json(200, {"input_tokens": _estimate_tokens(body)})
            return
        if path not in routes:
            entry.reply = "404"
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        turn, dialect = routes[path]
        if path.endswith("/responses"):
            entry.path = "/v1/responses"
        elif path.endswith("/chat/completions"):
            entry.path = "/v1/chat/completions"
        failure = self._failure(body)
        if failure == "hang":
            entry.reply = "hang"
            self.model_server.wait_hang(self.model_server.script.hang_s)
            self.close_connection = True
            return
        if failure == "401":
            entry.reply = "401"
            self._error(401, dialect)
            return
        if failure == "500":
            entry.reply = "500"
            self._error(500, dialect)
            return
        turn(self, entry, body if isinstance(body, dict) else {})

    def _read_chunked(self) -> bytes:
        if "chunked" not in (self.headers.get("Transfer-Encoding") or ""):
            return b""
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()

    def _entry(self, body: Any) -> LoggedRequest:
        entry = LoggedRequest(
            method=self.command,
            path=self.path.split("?", 1)[0],
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        self.model_server.record(entry)
        return entry

    def _failure(self, body: Any) -> str | None:
        script = self.model_server.script
        if script.failure:
            return script.failure
        if BAD_KEY in (self.headers.get("x-api-key") or "") + (
            self.headers.get("Authorization") or ""
        ):
            return "401"
        text = json.dumps(body) if body is not None else ""
        for marker, failure in (
            (HANG_MARKER, "hang"),
            (ERROR_500_MARKER, "500"),
            (AUTH_401_MARKER, "401"),
        ):
            if marker in text:
                return failure
        return None

    # -- writing ------------------------------------------------------------------

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, dialect: str) -> None:
        request_id = f"req_fake_{self.model_server.next_id():04d}"
        if dialect == "anthropic":
            kind, message = {
                401: ("authentication_error", "invalid x-api-key"),
                500: ("api_error", "Internal server error"),
            }[status]
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": kind, "message": message},
                "request_id": request_id,
            }
        else:
            payload = {
                "error": {
                    401: {
                        "message": "Incorrect API key provided (fake)",
                        "type": "invalid_request_error",
                        "param": None,
                        "code": "invalid_api_key",
                    },
                    500: {
                        "message": "The server had an error while processing your request.",
                        "type": "server_error",
                        "param": None,
                        "code": None,
                    },
                }[status]
            }
        # "x-should-retry: false" keeps SDK-based clients from retrying a scripted 500.
        self._json(status, payload, {"request-id": request_id, "x-should-retry": "false"})

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, data: Any, event: str | None = None) -> None:
        text = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {event}\n" if event else "") + f"data: {text}\n\n"
        self.wfile.write(frame.encode())
        self.wfile.flush()


# -- the script: what to answer ----------------------------------------------------


@dataclass
class _ToolCall:
    name: str
    arguments: dict[str, Any]


def _board_calls(tools: list[tuple[str, dict[str, Any]]]) -> list[_ToolCall]:
    """The board's MCP tools to call before the work, when they are offered."""
    names = {
        suffix: next((n for n, _ in tools if n.endswith(suffix)), None)
        for suffix in ("create_subtask", "comment")
    }
    if names["create_subtask"] is None or names["comment"] is None:
        return []
    return [
        _ToolCall(names["create_subtask"], {"title": BOARD_SUBTASK_TITLE}),
        _ToolCall(names["comment"], {"body": BOARD_COMMENT}),
    ]


def _plan(
    server: ModelServer,
    tools: list[tuple[str, dict[str, Any]]],
    body: Any,
    *,
    tool_results: int,
) -> _ToolCall | None:
    """The tool call to make, or None for the final text: the board's calls (if
    offered), then the write, one per turn, counted by the tool results so far."""
    if not tools:
        return None
    board = _board_calls(tools) if server.script.board_calls else []
    if tool_results < len(board):
        return board[tool_results]
    script = server.script
    if script.sequence is not None:
        turn = tool_results - len(board)
        if turn >= len(script.sequence):
            return None
        what, _, value = script.sequence[turn].partition(":")
        if what == "command":
            return _shell_call(tools, value)
        return _write_call(tools, _target_path(script, body, value), script.content)
    if tool_results > len(board) and not script.keep_going:
        return None
    if script.command is not None:
        shell = _shell_call(tools, script.command)
        if shell is not None:
            return shell
    return _write_call(tools, _target_path(script, body), script.content)


_SHELLS = ("Bash", "bash", "shell", "exec_command", "terminal", "exec")


def _shell_call(tools: list[tuple[str, dict[str, Any]]], command: str) -> _ToolCall | None:
    """The runtime's shell tool running ``command``."""
    for name, _schema in tools:
        if name in _SHELLS:
            key = "cmd" if name == "exec_command" else "command"
            return _ToolCall(name, {key: command})
    return None


def _write_call(
    tools: list[tuple[str, dict[str, Any]]], target: str, content: str
) -> _ToolCall | None:
    """The runtime's write tool writing ``content`` to ``target``, else its shell."""
    for name, schema in tools:
        if "write" not in name.lower():
            continue
        props = schema.get("properties") if isinstance(schema, dict) else None
        if not isinstance(props, dict):
            continue
        path_prop = next((p for p in _PATH_PROPS if p in props), None)
        content_prop = next((p for p in _CONTENT_PROPS if p in props), None)
        if path_prop and content_prop:
            return _ToolCall(name, {path_prop: target, content_prop: content})
    command = f"printf '%s' {shlex.quote(content)} > {shlex.quote(target)}"
    for name, _schema in tools:
        if name == "exec_command":
            return _ToolCall(name, {"cmd": command})
    for name, schema in tools:
        if name in ("shell", "local_shell", "bash", "Bash", "exec", "terminal"):
            props = schema.get("properties", {}) if isinstance(schema, dict) else {}
            if isinstance(props.get("command"), dict) and props["command"].get("type") == "array":
                return _ToolCall(name, {"command": ["bash", "-lc", command]})
            return _ToolCall(name, {"command": command})
    return None


def _target_path(script: Script, body: Any, file: str = "") -> str:
    file = file or script.file
    if file.startswith("/"):
        return file
    workdir = script.workdir or _stated_workdir(body)
    return f"{workdir.rstrip('/')}/{file}" if workdir else file


def _stated_workdir(body: Any) -> str | None:
    text = json.dumps(body) if body is not None else ""
    # json.dumps escapes "/" never and "<" never, so the patterns match the raw text.
    for pattern in _WORKDIR_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1).strip()
    return None


def _estimate_tokens(body: Any) -> int:
    return max(1, len(json.dumps(body)) // 4) if body is not None else 1


def _model_object(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 1_700_000_000, "owned_by": "clawboo"}


def _chunks(text: str, size: int = 12) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


# -- Anthropic Messages -------------------------------------------------------------


def _anthropic_turn(handler: _Handler, entry: LoggedRequest, body: dict[str, Any]) -> None:
    server = handler.model_server
    tools = [
        (t.get("name", ""), t.get("input_schema") or {})
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]
    results = sum(
        1
        for message in body.get("messages") or []
        if isinstance(message, dict) and message.get("role") == "user"
        for block in (message.get("content") if isinstance(message.get("content"), list) else [])
        if isinstance(block, dict) and block.get("type") == "tool_result"
    )
    call = _plan(server, tools, body, tool_results=results)
    n = server.next_id()
    model = body.get("model") or MODEL
    usage_in = _estimate_tokens(body)
    if call is not None:
        entry.reply = f"tool_call:{call.name}"
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_fake_{n:04d}",
            "name": call.name,
            "input": call.arguments,
        }
        stop_reason = "tool_use"
    else:
        entry.reply = "text"
        block = {"type": "text", "text": server.script.final_text}
        stop_reason = "end_turn"
    message = {
        "id": f"msg_fake_{n:04d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage_in,
            "output_tokens": 1,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }
    output_tokens = 7
    if not body.get("stream"):
        final = {**message, "content": [block], "stop_reason": stop_reason}
        final["usage"] = {**message["usage"], "output_tokens": output_tokens}
        handler._json(200, final)
        return
    handler.start_sse()
    handler.sse({"type": "message_start", "message": message}, "message_start")
    if block["type"] == "tool_use":
        start = {**block, "input": {}}
        delta_kind, deltas = "input_json_delta", _chunks(json.dumps(call.arguments) if call else "")
        delta_key = "partial_json"
    else:
        start = {"type": "text", "text": ""}
        delta_kind, deltas, delta_key = "text_delta", _chunks(block["text"]), "text"
    handler.sse(
        {"type": "content_block_start", "index": 0, "content_block": start}, "content_block_start"
    )
    for piece in deltas:
        handler.sse(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": delta_kind, delta_key: piece},
            },
            "content_block_delta",
        )
    handler.sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
    handler.sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        "message_delta",
    )
    handler.sse({"type": "message_stop"}, "message_stop")


# -- OpenAI Responses ---------------------------------------------------------------


def _responses_turn(handler: _Handler, entry: LoggedRequest, body: dict[str, Any]) -> None:
    server = handler.model_server
    tools = []
    # Codex offers an MCP server's tools as one "namespace" tool (mcp__<server>) and
    # expects a call to name the namespace and the tool apart.
    namespaced: dict[str, tuple[str, str]] = {}
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("name"):
                    flat = f"{tool.get('name')}__{inner['name']}"
                    namespaced[flat] = (str(tool.get("name")), str(inner["name"]))
                    tools.append((flat, inner.get("parameters") or {}))
        elif isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name") or tool.get("type")
            tools.append((str(name), tool.get("parameters") or {}))
    items = body.get("input") if isinstance(body.get("input"), list) else []
    results = sum(
        1
        for item in items
        if isinstance(item, dict) and str(item.get("type", "")).endswith("_output")
    )
    call = _plan(server, tools, body, tool_results=results)
    n = server.next_id()
    model = body.get("model") or MODEL
    response_id = f"resp_fake_{n:04d}"
    base = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "output": [],
        "status": "in_progress",
    }
    usage_in = _estimate_tokens(body)
    usage = {
        "input_tokens": usage_in,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage_in + 7,
    }
    if call is not None:
        entry.reply = f"tool_call:{call.name}"
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_fake_{n:04d}",
            "call_id": f"call_fake_{n:04d}",
            "name": call.name,
            "arguments": json.dumps(call.arguments),
            "status": "completed",
        }
        if call.name in namespaced:
            item["namespace"], item["name"] = namespaced[call.name]
    else:
        entry.reply = "text"
        item = {
            "type": "message",
            "id": f"msg_fake_{n:04d}",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": server.script.final_text, "annotations": []}
            ],
        }
    completed = {**base, "status": "completed", "output": [item], "usage": usage}
    if body.get("stream") is False:
        handler._json(200, completed)
        return
    handler.start_sse()
    seq = iter(range(10_000))
    handler.sse(
        {"type": "response.created", "response": base, "sequence_number": next(seq)},
        "response.created",
    )
    added = {**item, "status": "in_progress"}
    if item["type"] == "function_call":
        added["arguments"] = ""
    else:
        added["content"] = []
    handler.sse(
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": added,
            "sequence_number": next(seq),
        },
        "response.output_item.added",
    )
    if item["type"] == "message":
        for piece in _chunks(server.script.final_text):
            handler.sse(
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                    "sequence_number": next(seq),
                },
                "response.output_text.delta",
            )
    else:
        handler.sse(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": 0,
                "delta": item["arguments"],
                "sequence_number": next(seq),
            },
            "response.function_call_arguments.delta",
        )
    handler.sse(
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": item,
            "sequence_number": next(seq),
        },
        "response.output_item.done",
    )
    handler.sse(
        {"type": "response.completed", "response": completed, "sequence_number": next(seq)},
        "response.completed",
    )


# -- OpenAI Chat Completions ----------------------------------------------------------


def _chat_turn(handler: _Handler, entry: LoggedRequest, body: dict[str, Any]) -> None:
    server = handler.model_server
    tools = [
        (
            str((t.get("function") or {}).get("name", "")),
            (t.get("function") or {}).get("parameters") or {},
        )
        for t in body.get("tools") or []
        if isinstance(t, dict)
    ]
    results = sum(
        1 for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "tool"
    )
    call = _plan(server, tools, body, tool_results=results)
    n = server.next_id()
    model = body.get("model") or MODEL
    completion_id = f"chatcmpl-fake-{n:04d}"
    created = int(time.time())
    usage_in = _estimate_tokens(body)
    usage = {"prompt_tokens": usage_in, "completion_tokens": 7, "total_tokens": usage_in + 7}
    if call is not None:
        entry.reply = f"tool_call:{call.name}"
        tool_call = {
            "id": f"call_fake_{n:04d}",
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        finish = "tool_calls"
    else:
        entry.reply = "text"
        message = {"role": "assistant", "content": server.script.final_text}
        finish = "stop"
    if not body.get("stream"):
        handler._json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            },
        )
        return

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    handler.start_sse()
    if call is not None:
        arguments = message["tool_calls"][0]["function"]["arguments"]
        handler.sse(
            chunk(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": tool_call["id"],
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ],
                }
            )
        )
        for piece in _chunks(arguments, 40):
            handler.sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
    else:
        handler.sse(chunk({"role": "assistant", "content": ""}))
        for piece in _chunks(server.script.final_text):
            handler.sse(chunk({"content": piece}))
    handler.sse(chunk({}, finish))
    if (body.get("stream_options") or {}).get("include_usage"):
        handler.sse(
            {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
    handler.sse("[DONE]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, help="append each request as a JSON line here")
    parser.add_argument("--failure", choices=["401", "500", "hang"])
    parser.add_argument("--workdir", help="the directory the written file goes in")
    args = parser.parse_args()
    server = ModelServer(Script(failure=args.failure, workdir=args.workdir), log_file=args.log)
    server.start(args.port)
    print(server.port, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
