"""The scripted model endpoint itself, over real HTTP: no tool install needed."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.real_runtimes.model_server import BAD_KEY, HANG_MARKER, ModelServer, Script

WORKDIR = "/srv/work"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer(Script(workdir=WORKDIR)) as running:
        yield running


def post(
    server: ModelServer, path: str, body: dict[str, Any], key: str = "sk-ok", timeout: float = 10
) -> tuple[int, str]:
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/json",
            "x-api-key": key,
            "Authorization": f"Bearer {key}",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def sse_data(text: str) -> list[Any]:
    frames = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            frames.append(data if data == "[DONE]" else json.loads(data))
    return frames


ANTHROPIC_TOOLS = [
    {"name": "Bash", "input_schema": {"properties": {"command": {"type": "string"}}}},
    {
        "name": "Write",
        "input_schema": {
            "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}
        },
    },
]


def test_anthropic_it_streams_one_write_tool_call_then_the_final_text(server: ModelServer) -> None:
    first = {
        "model": "m",
        "stream": True,
        "tools": ANTHROPIC_TOOLS,
        "messages": [{"role": "user", "content": "write it"}],
    }
    status, text = post(server, "/v1/messages", first)
    assert status == 200
    frames = sse_data(text)
    assert [f["type"] for f in frames][:2] == ["message_start", "content_block_start"]
    assert frames[1]["content_block"]["name"] == "Write"
    arguments = json.loads(
        "".join(f["delta"]["partial_json"] for f in frames if f["type"] == "content_block_delta")
    )
    assert arguments == {
        "file_path": f"{WORKDIR}/hello.txt",
        "content": "hello from the fake model\n",
    }
    assert frames[-2]["delta"]["stop_reason"] == "tool_use"
    assert frames[-1]["type"] == "message_stop"

    second = {
        **first,
        "messages": first["messages"]
        + [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": arguments}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
            },
        ],
    }
    frames = sse_data(post(server, "/v1/messages", second)[1])
    text_out = "".join(f["delta"]["text"] for f in frames if f["type"] == "content_block_delta")
    assert text_out == "DONE: wrote the file."
    assert server.replies() == ["tool_call:Write", "text"]


def test_anthropic_count_tokens_and_401_in_anthropics_shape(server: ModelServer) -> None:
    status, text = post(server, "/v1/messages/count_tokens", {"messages": []})
    assert status == 200 and json.loads(text)["input_tokens"] >= 1
    status, text = post(server, "/v1/messages", {"messages": []}, key=BAD_KEY)
    assert status == 401
    assert json.loads(text)["error"]["type"] == "authentication_error"


def test_responses_it_calls_exec_command_when_no_write_tool_is_offered(
    server: ModelServer,
) -> None:
    body = {
        "model": "m",
        "stream": True,
        "input": [{"role": "user", "content": "go"}],
        "tools": [
            {
                "type": "function",
                "name": "exec_command",
                "parameters": {"properties": {"cmd": {"type": "string"}}},
            }
        ],
    }
    frames = sse_data(post(server, "/v1/responses", body)[1])
    kinds = [f["type"] for f in frames]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    done = next(f for f in frames if f["type"] == "response.output_item.done")
    assert done["item"]["name"] == "exec_command"
    assert f"{WORKDIR}/hello.txt" in json.loads(done["item"]["arguments"])["cmd"]
    assert frames[-1]["response"]["usage"]["output_tokens"] > 0

    body["input"].append({"type": "function_call_output", "call_id": "c", "output": "ok"})
    frames = sse_data(post(server, "/v1/responses", body)[1])
    done = next(f for f in frames if f["type"] == "response.output_item.done")
    assert done["item"]["content"][0]["text"] == "DONE: wrote the file."


def test_chat_completions_streams_tool_calls_usage_and_done(server: ModelServer) -> None:
    body = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "write_file",
                    "parameters": {
                        "properties": {"path": {"type": "string"}, "content": {"type": "string"}}
                    },
                },
            }
        ],
    }
    frames = sse_data(post(server, "/v1/chat/completions", body)[1])
    assert frames[-1] == "[DONE]"
    assert frames[-2]["usage"]["completion_tokens"] > 0
    calls = [
        c for f in frames[:-2] for ch in f["choices"] for c in ch["delta"].get("tool_calls", [])
    ]
    assert calls[0]["function"]["name"] == "write_file"
    arguments = json.loads("".join(c["function"]["arguments"] for c in calls))
    assert arguments["path"] == f"{WORKDIR}/hello.txt"
    assert frames[-3]["choices"][0]["finish_reason"] == "tool_calls"


def test_models_are_listed(server: ModelServer) -> None:
    with urllib.request.urlopen(server.url_v1 + "/models", timeout=5) as response:
        assert json.load(response)["data"][0]["id"] == "fake-model"


def test_scripted_500_and_a_hang_that_stop_releases(server: ModelServer) -> None:
    server.script = Script(failure="500")
    status, text = post(server, "/v1/chat/completions", {"messages": []})
    assert status == 500 and json.loads(text)["error"]["type"] == "server_error"

    server.script = Script()
    outcome: list[object] = []

    def hang() -> None:
        try:
            outcome.append(
                post(
                    server,
                    "/v1/chat/completions",
                    {"messages": [{"role": "user", "content": HANG_MARKER}]},
                )
            )
        except Exception as exc:  # the connection closes without a response
            outcome.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    deadline = time.monotonic() + 5
    while "hang" not in server.replies() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.replies()[-1] == "hang" and thread.is_alive()
    server.stop()
    thread.join(timeout=5)
    assert not thread.is_alive() and outcome


def test_with_the_board_tools_offered_it_files_a_subtask_and_comments_first(
    server: ModelServer,
) -> None:
    board = [
        {"name": f"mcp__clawboo__{name}", "input_schema": {"properties": {}}}
        for name in ("create_subtask", "comment")
    ]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "work"}]
    names = []
    for turn in range(4):
        body = {"model": "m", "tools": ANTHROPIC_TOOLS + board, "messages": messages}
        status, text = post(server, "/v1/messages", body)
        assert status == 200
        block = json.loads(text)["content"][0]
        names.append(block.get("name") or block["type"])
        if block["type"] == "tool_use":
            messages += [
                {"role": "assistant", "content": [block]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": block["id"]}],
                },
            ]
        if turn == 0:
            assert block["input"] == {"title": "Follow-up filed by the scripted model"}

    assert names == ["mcp__clawboo__create_subtask", "mcp__clawboo__comment", "Write", "text"]
