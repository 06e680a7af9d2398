from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from core.errors import ValidationFailed
from worktrees import service
from worktrees.handoff import read_handoff, reconstruct_state, validate_handoff, write_handoff

FULL = {
    "handoffFrom": "ada (claude-code)",
    "runtime": "claude-code",
    "timestamp": "2025-01-31T12:00:00Z",
    "completedSubtasks": ["parser handles empty input"],
    "brokenOrUnverified": ["CLI flag untested"],
    "nextBestStep": "wire the flag into main()",
    "whyBlocked": None,
    "commands": {"init": "./init.sh", "verify": "pytest -q", "start": "python -m app"},
    "evidence": {"testResults": "12 passed", "lintResults": "All checks passed!"},
    "warnings": ["do not touch legacy/"],
    "nativeSessionId": "sess-123",
    "roomCursor": 42,
}


def test_a_valid_handoff_round_trips(tmp_path):
    written = write_handoff(tmp_path, FULL)
    assert written == FULL
    assert read_handoff(tmp_path) == FULL
    assert json.loads((tmp_path / "AGENT_HANDOFF.json").read_text()) == FULL


def test_a_human_can_hand_off_and_the_timestamp_defaults_to_now():
    doc = validate_handoff({"handoffFrom": "Grace", "runtime": "human"})
    assert doc["runtime"] == "human"
    assert doc["timestamp"].endswith("+00:00")
    assert doc["completedSubtasks"] == []


@pytest.mark.parametrize(
    ("patch", "field", "says"),
    [
        ({"handoffFrom": None}, "handoff.handoffFrom", "required"),
        ({"handoffFrom": "  "}, "handoff.handoffFrom", "empty"),
        ({"runtime": None}, "handoff.runtime", "required"),
        ({"runtime": "claude code; rm -rf /"}, "handoff.runtime", "executor id"),
        ({"timestamp": "yesterday"}, "handoff.timestamp", "ISO-8601"),
        ({"timestamp": "2025-01-31T12:00:00"}, "handoff.timestamp", "UTC offset"),
        ({"completedSubtasks": "all of it"}, "handoff.completedSubtasks", "list of strings"),
        ({"brokenOrUnverified": ["ok", 3]}, "handoff.brokenOrUnverified[1]", "string"),
        ({"nextBestStep": ["a"]}, "handoff.nextBestStep", "string"),
        ({"whyBlocked": 7}, "handoff.whyBlocked", "string"),
        ({"commands": "make"}, "handoff.commands", "object"),
        ({"commands": {"deploy": "x"}}, "handoff.commands.deploy", "unknown key"),
        ({"evidence": {"testResults": 12}}, "handoff.evidence.testResults", "string"),
        ({"warnings": [None]}, "handoff.warnings[0]", "string"),
        ({"nativeSessionId": 5}, "handoff.nativeSessionId", "string"),
        ({"roomCursor": -1}, "handoff.roomCursor", "non-negative"),
        ({"roomCursor": {"roomId": "r"}}, "handoff.roomCursor.lastSeenSeq", "non-negative"),
        ({"nextStep": "typo"}, "handoff.nextStep", "unknown field"),
        ({"completedSubtasks": ["x" * 20_001]}, "handoff.completedSubtasks[0]", "at most"),
    ],
)
def test_each_invalid_field_is_rejected_with_a_clear_message(tmp_path, patch, field, says):
    with pytest.raises(ValidationFailed) as err:
        write_handoff(tmp_path, {**FULL, **patch})
    assert err.value.field == field
    assert says in err.value.detail
    assert not (tmp_path / "AGENT_HANDOFF.json").exists()


def test_a_handoff_that_is_not_an_object_is_rejected():
    with pytest.raises(ValidationFailed) as err:
        validate_handoff(["not", "an", "object"])
    assert err.value.field == "handoff"


def _progress(path: Path) -> None:
    (path / "task-progress.md").write_text(
        "# Progress\n\n## Done\n- parser\n* lexer\n\n## In progress\n- CLI\n\n"
        "## Blocked\n- waiting on API key\n"
    )
    (path / "init.sh").write_text(
        "#!/bin/sh\nINSTALL_CMD='pip install .'\nVERIFY_CMD='make test'\n"
    )


def test_reconstruct_prefers_the_handoff(tmp_path):
    _progress(tmp_path)
    write_handoff(tmp_path, FULL)
    state = reconstruct_state(tmp_path).as_dict()
    assert state["done"] == ["parser handles empty input"]
    assert state["broken"] == ["CLI flag untested"]
    assert state["next"] == "wire the flag into main()"
    assert state["whyBlocked"] is None
    assert state["warnings"] == ["do not touch legacy/"]
    assert state["lastRuntime"] == "claude-code"
    assert state["nativeSessionId"] == "sess-123"
    assert state["commands"] == {
        "init": "./init.sh",
        "verify": "pytest -q",
        "start": "python -m app",
    }
    assert state["source"] == "handoff"


def test_reconstruct_falls_back_to_the_progress_log(tmp_path):
    _progress(tmp_path)
    state = reconstruct_state(tmp_path)
    assert state.source == "progress"
    assert state.done == ["parser", "lexer"]
    assert state.broken == ["waiting on API key"]
    assert state.whyBlocked == "waiting on API key"
    assert state.next == "CLI"
    assert state.commands == {"init": "./init.sh", "verify": "make test", "start": None}
    assert state.lastRuntime is None


@pytest.mark.parametrize(
    "content", ["{not json", "[]", '{"handoffFrom": "ada"}', '{"handoffFrom": "a", "runtime": 7}']
)
def test_a_malformed_handoff_counts_as_none(tmp_path, content):
    _progress(tmp_path)
    (tmp_path / "AGENT_HANDOFF.json").write_text(content)
    state = reconstruct_state(tmp_path)
    assert state.source == "progress"
    assert state.done == ["parser", "lexer"]


# What the original Clawboo (TypeScript) writes: its roomCursor is an object.
ORIGINAL = {
    "handoffFrom": "ada (claude-code)",
    "runtime": "claude-code",
    "timestamp": "2025-01-31T12:00:00.000Z",
    "completedSubtasks": ["parser handles empty input"],
    "brokenOrUnverified": [],
    "nextBestStep": "wire the flag into main()",
    "nativeSessionId": "sess-123",
    "roomCursor": {"roomId": "room-7", "lastSeenSeq": 41},
}


def test_a_handoff_from_the_original_clawboo_is_read_with_its_room_cursor(tmp_path):
    (tmp_path / "AGENT_HANDOFF.json").write_text(json.dumps(ORIGINAL))
    doc = read_handoff(tmp_path)
    assert doc is not None
    assert doc["roomCursor"] == {"roomId": "room-7", "lastSeenSeq": 41}
    state = reconstruct_state(tmp_path)
    assert state.source == "handoff" and state.nativeSessionId == "sess-123"
    assert validate_handoff(ORIGINAL)["roomCursor"] == ORIGINAL["roomCursor"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("roomCursor", {"roomId": "r", "lastSeenSeq": "forty-one"}),
        ("roomCursor", {"room": "r"}),
        ("completedSubtasks", "one string, not a list"),
        ("commands", {"init": "./init.sh", "deploy": "make ship"}),
        ("timestamp", "yesterday"),
        ("aFieldFromANewerTool", {"x": 1}),
    ],
)
def test_a_field_of_an_unexpected_shape_costs_that_field_only(tmp_path, field, value):
    (tmp_path / "AGENT_HANDOFF.json").write_text(json.dumps({**ORIGINAL, field: value}))
    doc = read_handoff(tmp_path)
    assert doc is not None
    assert doc["nativeSessionId"] == "sess-123"
    assert doc["nextBestStep"] == "wire the flag into main()"
    if field == "completedSubtasks":
        assert doc["completedSubtasks"] == []
    if field == "roomCursor":
        assert "roomCursor" not in doc
    with pytest.raises(ValidationFailed):  # writing stays strict
        validate_handoff({**ORIGINAL, field: value})


def test_a_bad_handoff_from_is_dropped_and_the_rest_still_resumes(tmp_path):
    (tmp_path / "AGENT_HANDOFF.json").write_text(json.dumps({**ORIGINAL, "handoffFrom": 7}))
    state = reconstruct_state(tmp_path)
    assert state.source == "handoff"
    assert state.lastRuntime == "claude-code" and state.nativeSessionId == "sess-123"


@pytest.mark.django_db
def test_a_fresh_checkout_reconstructs_from_its_scaffold(repo, new_task):
    task = new_task()
    service.provision_task_workspace(task.id, str(repo))
    state = service.workspace_state(task.id)
    assert state["present"] is True
    assert state["resume_state"]["source"] == "progress"
    assert state["resume_state"]["done"] == []
    assert state["resume_state"]["commands"]["init"] == "./init.sh"


@pytest.mark.django_db
def test_the_handoff_command_writes_and_shows(repo, new_task, tmp_path, monkeypatch):
    task = new_task()
    ws = service.provision_task_workspace(task.id, str(repo))
    source = tmp_path / "handoff.json"
    source.write_text(json.dumps({**FULL, "runtime": "codex"}))

    call_command("handoff", "write", task.id, str(source), stdout=io.StringIO())
    assert read_handoff(Path(ws.worktree_path))["runtime"] == "codex"

    monkeypatch.setattr(
        "sys.stdin", io.StringIO(json.dumps({"handoffFrom": "G", "runtime": "human"}))
    )
    call_command("handoff", "write", task.id, "-", stdout=io.StringIO())

    out = io.StringIO()
    call_command("handoff", "show", task.id, stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["handoff"]["runtime"] == "human"
    assert shown["resume_state"]["lastRuntime"] == "human"


@pytest.mark.django_db
def test_the_handoff_command_refuses_bad_json_and_writes_nothing(repo, new_task, tmp_path):
    task = new_task()
    ws = service.provision_task_workspace(task.id, str(repo))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"handoffFrom": "x", "runtime": "a b"}))
    with pytest.raises(CommandError, match="handoff.runtime"):
        call_command("handoff", "write", task.id, str(bad))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("handoff", "write", task.id, str(tmp_path / "broken.json"))
    assert not (Path(ws.worktree_path) / "AGENT_HANDOFF.json").exists()
