"""``clawboo`` for people, used as a person does: what they trip on says what to do next
in one line, never a traceback; ``--json`` is one JSON document on stdout; usage errors
exit 2 before anything reaches the server. No database: a fake server, or a small
HTTP server that is not Clawboo's."""

from __future__ import annotations

import argparse
import contextlib
import http.server
import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawboo import cli, people

ROOT = Path(__file__).resolve().parents[2]


class Server:
    """The API as the client sees it: answers by path, every call recorded."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, Any]] = []

    def call(self, method: str, path: str, body: Any = None) -> Any:
        self.calls.append((method, path, body))
        return next(answer for key, answer in self.answers.items() if key in path)


@pytest.fixture
def server(monkeypatch) -> Server:
    fake = Server({})
    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: fake))
    return fake


@pytest.mark.parametrize(
    "argv",
    [
        ["task", "show", ""],
        ["task", "list", "--team", ""],
        ["task", "create", "   "],
        ["task", "comment", "t1", ""],
        ["watch", "--team", ""],
        ["review", "t1", "--request-changes", ""],
        ["budget", "resume", ""],
    ],
)
def test_an_empty_argument_is_a_usage_error_before_any_call(argv, server, capsys):
    # `--team ""` listed every team's tasks, `watch --team ""` waited forever, an empty
    # id answered "404 no such path", an empty --request-changes decided nothing, silently.
    with pytest.raises(SystemExit) as stopped:
        people.main(argv)
    assert stopped.value.code == 2
    assert "is empty (an unset shell variable?): give a value" in capsys.readouterr().err
    assert server.calls == []


def test_review_with_both_decisions_is_a_usage_error(server, capsys):
    # `review ID --approve --request-changes X` approved and landed it, dropping the feedback.
    with pytest.raises(SystemExit) as stopped:
        people.main(["review", "t1", "--approve", "--request-changes", "not yet"])
    assert stopped.value.code == 2
    assert "not allowed with argument --approve" in capsys.readouterr().err
    assert server.calls == []


def test_review_json_with_a_decision_is_one_json_document(server, capsys):
    # The review's JSON was followed by "changes requested: …": no JSON a script could read.
    review = {"diff": {"files": []}, "workspace": None}
    sent_back = {"id": "t1", "status": "in_progress"}
    server.answers.update(
        {"/review": review, "/request-changes": sent_back, "/api/board/tasks/t1": {"id": "t1"}}
    )
    assert people.main(["review", "t1", "--json", "--request-changes", "add a test"]) == 0
    assert json.loads(capsys.readouterr().out) == {"review": review, "decision": sent_back}
    assert ("POST", "/api/board/tasks/t1/request-changes", {"feedback": "add a test"}) in (
        server.calls
    )
    assert people.main(["review", "t1", "--json"]) == 0  # no decision: the review, as before
    assert json.loads(capsys.readouterr().out) == review


def test_login_and_logout_json_are_json(tmp_path, monkeypatch, capsys):
    # `--json` was taken and ignored: both printed their sentence.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv("CLAWBOO_SERVER", raising=False)
    monkeypatch.delenv("CLAWBOO_TOKEN", raising=False)
    me = {"principal": "person", "username": "ada", "staff": False, "teams": ["default"]}
    monkeypatch.setattr(people.Client, "call", lambda self, method, path, body=None: me)
    assert (
        people.main(["login", "--json", "--server", "http://127.0.0.1:8000", "--token", "k"]) == 0
    )
    stored = tmp_path / "clawboo" / "credentials.json"
    assert json.loads(capsys.readouterr().out) == {
        "server": "http://127.0.0.1:8000",
        "credentials": str(stored),
        "whoami": me,
    }
    assert people.main(["logout", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": str(stored)}
    assert people.main(["logout", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"removed": None}


def test_login_whose_prompt_meets_a_closed_stdin_says_what_to_give(tmp_path, monkeypatch, capsys):
    # `clawboo login --server URL < /dev/null` (a script, or Ctrl-D at the prompt) ended
    # in an EOFError's traceback, from the username prompt or the password's.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr("getpass.getpass", lambda prompt: sys.stdin.readline() or _eof())
    for argv, missing in (
        (["login", "--server", "http://127.0.0.1:9"], "username"),
        (["login", "--server", "http://127.0.0.1:9", "--username", "ada"], "password"),
    ):
        assert people.main(argv) == 2
        assert capsys.readouterr().err.endswith(
            f"clawboo: login needs a {missing}: give --username U --password-stdin (the"
            " password on stdin), or --token - (a key on stdin)\n"
        )
    assert not (tmp_path / "clawboo" / "credentials.json").exists()


def _eof() -> str:
    raise EOFError


@contextlib.contextmanager
def web_page_server() -> Iterator[str]:
    """A web server that is not Clawboo's: a page at /api/whoami (200), 404 elsewhere."""

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            status = 200 if self.path == "/api/whoami" else 404
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<!doctype html><html><body><h1>Not Found</h1></body></html>")

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_server_url_that_is_not_clawboos_api_says_to_check_the_url():
    # A URL with the board's path, or another port's web server: a 404 printed its HTML
    # as the "detail", a page answered 200 ended in a JSON parser's traceback.
    with web_page_server() as url:
        for path, answered in (("/api/whoami", "a page that is not JSON"), ("/x", "HTTP 404")):
            with pytest.raises(people.Failure) as failed:
                people.Client(url, "k").call("GET", path)
            assert failed.value.line == (
                f"clawboo: {url} answered {answered}, not Clawboo's API: check the URL (the"
                " address `clawboo up` printed, with no path: e.g. http://127.0.0.1:8000)"
            )


def test_a_server_url_from_the_environment_is_named_as_such_with_the_url_meant(monkeypatch):
    # "--server must be an http(s) URL" of a command given no --server: CLAWBOO_SERVER was.
    monkeypatch.setenv("CLAWBOO_SERVER", "127.0.0.1:8000")
    monkeypatch.setenv("CLAWBOO_TOKEN", "k")
    with pytest.raises(people.Failure) as failed:
        people.Client.from_login()
    assert failed.value.status == 2
    assert failed.value.line == (
        "clawboo: CLAWBOO_SERVER must be an http(s) URL, not '127.0.0.1:8000'"
        " (did you mean 'http://127.0.0.1:8000'?)"
    )


def test_a_command_of_verbs_alone_names_its_verbs(capsys):
    # "the following arguments are required: task_command": argparse's own variable.
    with pytest.raises(SystemExit) as stopped:
        people.main(["agent"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.endswith(
        "clawboo agent: error: give one of list, pause, resume"
        " (`clawboo agent VERB --help` says what it takes)\n"
    )


def test_json_said_before_the_verb_is_taken(server, capsys):
    # `clawboo task --json show t1` answered "task show: unrecognized arguments: --json".
    server.answers["/api/board/tasks/t1"] = {"id": "t1", "status": "todo"}
    assert people.main(["task", "--json", "show", "t1"]) == 0
    assert json.loads(capsys.readouterr().out) == {"id": "t1", "status": "todo"}
    assert cli_main(["--json", "task", "show", "t1"]) == 0
    assert json.loads(capsys.readouterr().out) == {"id": "t1", "status": "todo"}


def cli_main(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    return int(done.value.code or 0)


def test_approvals_decide_refuses_a_decision_it_does_not_know_first(server, capsys):
    # "404 approval 'x' does not exist" of a mistyped decision: its word went unchecked.
    assert people.main(["approvals", "--decide", "ap1", "allow"]) == 2
    assert capsys.readouterr().err == (
        "clawboo: approvals --decide: 'allow' is no decision: give allow_once, allow_always, deny\n"
    )
    assert server.calls == []


def test_watch_with_a_refused_key_says_what_to_do(monkeypatch):
    # "clawboo: 401 unauthenticated" alone, where every other command says how to log in.
    from websockets.exceptions import ConnectionClosed
    from websockets.frames import Close

    monkeypatch.setenv("CLAWBOO_SERVER", "http://127.0.0.1:8000")
    monkeypatch.setenv("CLAWBOO_TOKEN", "revoked")

    @contextlib.contextmanager
    def refused(url: str, **kwargs: Any) -> Iterator[None]:
        raise ConnectionClosed(Close(4401, "unauthenticated"), None)
        yield

    monkeypatch.setattr("websockets.sync.client.connect", refused)
    args = argparse.Namespace(team="demo", task=None, json=False)
    with pytest.raises(people.Failure) as failed:
        people.cmd_watch(args)
    assert failed.value.line == (
        "clawboo: 401 unauthenticated: the key was refused (revoked, or for another server):"
        " CLAWBOO_TOKEN holds it"
    )


def test_watch_of_a_task_of_another_team_names_the_team_to_watch(server):
    # No event of it ever came: the watch waited in silence until Ctrl-C.
    server.answers["/api/board/tasks/demo-divide"] = {"id": "demo-divide", "team": "demo"}
    args = argparse.Namespace(team="default", task="demo-divide", json=False)
    with pytest.raises(people.Failure) as failed:
        people.cmd_watch(args)
    assert failed.value.line == (
        "clawboo: task demo-divide is in team demo, not default:"
        " `clawboo watch --team demo --task demo-divide`"
    )


def test_help_of_a_verb_is_the_verbs_and_help_alone_lists_the_peoples_commands(monkeypatch, capsys):
    # `clawboo help task list` printed `task`'s list of verbs; `clawboo help` Django's
    # commands alone, none of the people's.
    assert cli_main(["help", "task", "list"]) == 0
    assert capsys.readouterr().out.startswith("usage: clawboo task list")
    seen = []
    monkeypatch.setattr(
        "django.core.management.execute_from_command_line", lambda argv: seen.append(argv)
    )
    cli.main(["help"])
    assert "  task list|show|create" in capsys.readouterr().out
    assert seen == [["clawboo", "help"]]  # and Django's list after it


def test_ctrl_c_while_the_command_loads_is_no_traceback():
    # Ctrl-C in the half second the command loads ended in a traceback through the
    # import machinery. Here the interrupt comes as the people's client is imported.
    script = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'clawboo.people':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from clawboo.cli import main\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (130, "")


def test_watch_cut_off_by_the_server_says_to_watch_again_once_it_answers(monkeypatch):
    # `up` stopped under a watch: "clawboo: connection closed (None)".
    from websockets.exceptions import ConnectionClosed

    monkeypatch.setenv("CLAWBOO_SERVER", "http://127.0.0.1:8000")
    monkeypatch.setenv("CLAWBOO_TOKEN", "k")

    @contextlib.contextmanager
    def cut_off(url: str, **kwargs: Any) -> Iterator[None]:
        raise ConnectionClosed(None, None)
        yield

    monkeypatch.setattr("websockets.sync.client.connect", cut_off)
    with pytest.raises(people.Failure) as failed:
        people.cmd_watch(argparse.Namespace(team="demo", task=None, json=False))
    assert failed.value.line == (
        "clawboo: http://127.0.0.1:8000 closed the connection (no close code): the server"
        " stopped or restarted; once `clawboo up` answers, `clawboo watch --team demo` again"
    )


@pytest.mark.parametrize(
    ("detail", "option"),
    [
        ("lease_ms: must be between 1000 and 6393600000 (CLAWBOO_LEASE_MAX_MS)", "--lease-ms"),
        ("body: must be a string and not empty", "TEXT"),
        ("author: no agent 'nope' in the registry", "--as"),
    ],
)
def test_a_refused_field_names_the_option_that_sets_it(detail, option, monkeypatch):
    # "lease_ms: must be between …" named the API's field, which no option is called.
    from executor.rest import ApiError

    class Refusing:
        def call(self, method, path, body=None):
            raise ApiError(400, {"error": "validation_error", "detail": detail})

    client = people.Client("http://127.0.0.1:8000", "k")
    monkeypatch.setattr(client, "api", Refusing())
    with pytest.raises(people.Failure) as failed:
        client.call("POST", "/api/board/tasks/t1/claim", {})
    assert failed.value.line == f"clawboo: 400 validation_error: {detail}; here: {option}"


def test_task_deny_of_a_task_that_waits_for_nothing_says_what_deny_does(server):
    # "409 conflict: task 't1' needs no approval", and nothing of what to do instead.
    server.answers["/api/board/tasks/t1"] = {"id": "t1", "status": "todo", "approval": None}
    args = argparse.Namespace(id="t1", reason=None, revision=None, json=False)
    with pytest.raises(people.Failure) as failed:
        people.cmd_task_deny(args)
    assert failed.value.line == (
        "clawboo: t1 is todo: nothing waits for approval (deny refuses a start waiting for"
        " approval, or sends a task in review back with --reason; to stop it:"
        " `clawboo task move t1 cancelled`)"
    )
    assert [method for method, _, _ in server.calls] == ["GET"]  # nothing was posted
    # A start waiting for approval is denied, as before (the answer by path: the first
    # key the path holds).
    # An approved start may still be denied: the server decides.
    for state in ("required", "approved"):
        waiting = {"id": "t1", "status": "todo", "approval": {"state": state}}
        server.answers = {"/approval": {"id": "t1"}, "/api/board/tasks/t1": waiting}
        assert people.cmd_task_deny(args) == 0
        assert server.calls[-1][:2] == ("POST", "/api/board/tasks/t1/approval")
