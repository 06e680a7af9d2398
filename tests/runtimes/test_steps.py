"""Each runtime's stream read into steps, over the lines the real tools printed
(``fixtures/real``) and the shapes their sources document: the step kinds, names,
statuses, tokens and order an operator reads on the trace."""

from __future__ import annotations

import json
from pathlib import Path

from executor.steps import (
    ClaudeSteps,
    CodexSteps,
    OpenClawSteps,
    Step,
    hermes_steps,
    kind_of_tool,
)

REAL = Path(__file__).parent / "fixtures" / "real"


def _read(reader: ClaudeSteps | CodexSteps, path: Path) -> list[Step]:
    steps: list[Step] = []
    for line in path.read_text().splitlines():
        if line.strip().startswith("{"):
            steps += reader.feed(json.loads(line))
    return steps


def _seen(steps: list[Step]) -> list[tuple[str, str, str]]:
    return [(str(s.kind), s.name, str(s.status)) for s in steps]


def test_claude_codes_write_is_a_file_change_between_two_model_turns_with_their_tokens():
    steps = _read(ClaudeSteps(), REAL / "claude-code" / "run1-write-file.stream.jsonl")
    assert _seen(steps) == [
        ("model_turn", "model", "ok"),
        ("file_change", "Write", "ok"),
        ("model_turn", "model", "ok"),
    ]
    assert steps[0].tokens_in == 12675 and steps[0].model == "claude-opus-5-5"
    assert steps[1].arguments["file_path"].endswith("hello.txt")
    assert steps[1].detail.startswith("File created successfully")


def test_claude_codes_denied_write_is_a_failed_step():
    steps = _read(
        ClaudeSteps(), REAL / "claude-code" / "run4-permission-default-denied.stream.jsonl"
    )
    writes = [s for s in steps if s.name == "Write"]
    assert writes and all(s.failed for s in writes)
    assert "permissions" in writes[0].detail


def test_claude_codes_401_ends_in_an_error_step():
    steps = _read(ClaudeSteps(), REAL / "claude-code" / "run5-auth-401.stream.jsonl")
    assert steps[-1].kind == "error" and steps[-1].failed


def test_codexs_command_is_a_command_step_and_its_turn_a_model_turn():
    steps = _read(CodexSteps(), REAL / "codex" / "run1-write-file.jsonl")
    assert [(s.kind, s.status) for s in steps] == [("command", "ok"), ("model_turn", "ok")]
    assert "hello.txt" in steps[0].arguments["command"]
    assert steps[0].detail.startswith("exit code 0")
    assert steps[1].tokens_in == 21128 and steps[1].tokens_out == 14


def test_codexs_failing_command_file_change_and_mcp_call():
    reader = CodexSteps()
    lines = [
        {"type": "item.started", "item": {"id": "i1", "type": "command_execution"}},
        {"type": "item.completed", "item": {"id": "i1", "type": "command_execution",
         "command": "false", "aggregated_output": "", "exit_code": 1, "status": "failed"}},
        {"type": "item.completed", "item": {"id": "i2", "type": "file_change",
         "changes": [{"path": "a.txt", "kind": "add"}], "status": "completed"}},
        {"type": "item.completed", "item": {"id": "i3", "type": "mcp_tool_call",
         "server": "clawboo", "tool": "comment", "arguments": {"body": "hi"},
         "status": "completed"}},
    ]  # fmt: skip
    steps = [step for line in lines for step in reader.feed(line)]
    assert _seen(steps) == [
        ("command", "false", "error"),
        ("file_change", "a.txt", "ok"),
        ("mcp_call", "clawboo.comment", "ok"),
    ]


def test_codexs_401_is_an_error_step():
    steps = _read(CodexSteps(), REAL / "codex" / "run3-auth-401.jsonl")
    assert steps and steps[-1].kind == "error" and steps[-1].failed


def test_openclaws_tool_item_is_a_step_when_it_ends():
    reader = OpenClawSteps()
    steps: list[Step] = []
    for line in (REAL / "openclaw" / "frames-agent.jsonl").read_text().splitlines():
        frame = json.loads(line)["frame"]
        payload = frame.get("payload") or {}
        if frame.get("event") == "agent":
            steps += reader.feed(payload.get("stream"), payload.get("data") or {})
    assert _seen(steps) == [("file_change", "write", "ok")]
    assert steps[0].duration_ms == 29 and "hello.txt" in steps[0].arguments["title"]


def test_hermes_session_messages_become_turns_and_tool_steps():
    function = {"name": "terminal", "arguments": json.dumps({"command": "false"})}
    call = {"id": "c1", "type": "function", "function": function}
    messages = [
        {"role": "user", "content": "do it", "timestamp": 1.0},
        {"role": "assistant", "tool_calls": json.dumps([call]), "timestamp": 2.0},
        {"role": "tool", "tool_call_id": "c1", "timestamp": 2.5,
         "content": json.dumps({"output": "", "exit_code": 1, "error": None})},
        {"role": "assistant", "content": "done", "timestamp": 3.0},
    ]  # fmt: skip
    steps = hermes_steps(messages)
    assert _seen(steps) == [
        ("model_turn", "model", "ok"),
        ("command", "terminal", "error"),
        ("model_turn", "model", "ok"),
    ]
    assert steps[1].duration_ms == 500 and steps[1].arguments == {"command": "false"}


def test_tool_names_map_to_kinds_by_one_table():
    assert kind_of_tool("Bash") == "command"
    assert kind_of_tool("mcp__clawboo__comment") == "mcp_call"
    assert kind_of_tool("Task") == "subagent"
    assert kind_of_tool("WebFetch") == "tool_call"
