"""``clawboo`` for people against a live daphne (issue 46): log in with a password,
file, claim and comment on a task, a worker runs it, review shows its diff, approve
lands it; another team's user is told the API's 404 in one line; ``watch`` prints
each of the task's events within a second. One daphne for the whole story."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command

from core import registry
from executor import merge_queue
from executor.runner import Executor

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
VERIFY = 'python3 -c "import calc; assert calc.multiply(3, 4) == 12"'


class Cli:
    def __init__(self, config: Path) -> None:
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("CLAWBOO_")},
            "XDG_CONFIG_HOME": str(config),
            "PYTHONPATH": str(ROOT),
            "NO_COLOR": "1",
        }
        # Not a Django process: nothing of the server's settings reaches it.
        self.env.pop("DJANGO_SETTINGS_MODULE", None)
        self.env.pop("DATABASE_URL", None)

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clawboo.cli", *args],
            env=self.env,
            cwd=ROOT,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def ok(self, *args: str, stdin: str | None = None) -> str:
        done = self(*args, stdin=stdin)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def watch(self, team: str) -> Watch:
        return Watch(
            subprocess.Popen(
                [sys.executable, "-m", "clawboo.cli", "watch", "--team", team, "--json"],
                env=self.env,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )


class Watch:
    """Every frame ``watch`` prints, with the moment it arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.frames: list[tuple[float, dict]] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()
        threading.Thread(target=self._hello, args=(proc.stderr,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.frames.append((time.monotonic(), json.loads(line)))

    def _hello(self, stream) -> None:
        for line in stream:
            if line.startswith("watching team"):
                self.ready.set()

    def arrival(self, task_id: str, test, after: float, since: float, within: float = 1.0) -> float:
        """Seconds from ``after`` (the action done) until a frame of the task passing
        ``test`` arrived; 0 for one that came before the action's own process had
        exited. Frames from before ``since`` (the action begun) are another's."""
        deadline = time.monotonic() + within + 2
        while time.monotonic() < deadline:
            for at, frame in list(self.frames):
                task = frame.get("task") or {}
                if task.get("id") == task_id and frame.get("type") == "task-change":
                    if test(frame) and at >= since:
                        return max(0.0, at - after)
            time.sleep(0.02)
        raise AssertionError(f"no frame of {task_id} arrived: {self.frames[-5:]}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.mark.timing
def test_a_person_files_claims_reviews_and_lands_a_task_from_the_terminal(
    daphne, tmp_path, settings
):
    settings.CLAWBOO_STATE_DIR = tmp_path / "state"
    settings.CLAWBOO_REPO_ROOTS = []
    call_command("demo", "--dir", str(tmp_path / "demo"))
    # Stored as the server hashes them (the test settings' MD5 is not among its hashers).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    users = get_user_model().objects
    # An operator: staff holding the model permissions (beyond their own teams a
    # staff person's writes need the admin's permission for the same change).
    operator = users.create_user("alice", password="alice-pw-1", is_staff=True)
    operator.user_permissions.set(Permission.objects.all())
    bob = users.create_user("bob", password="bob-pw-1")
    registry.create_team("other", creator=bob)
    base = daphne()
    alice, outsider = Cli(tmp_path / "alice"), Cli(tmp_path / "bob")

    wrong = alice("login", "--server", base, "--username", "alice", "--password-stdin", stdin="x\n")
    assert wrong.returncode == 1
    assert wrong.stderr == "clawboo: 401 unauthenticated: wrong username or password\n"
    said = alice.ok("login", "--server", base, "--username", "alice", "--password-stdin",
                    stdin="alice-pw-1\n")  # fmt: skip
    assert said.startswith(f"logged in to {base} as alice")
    stored = tmp_path / "alice" / "clawboo" / "credentials.json"
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text())["server"] == base

    # A team that is not hers is not an empty board: the list says so, as watch does.
    nosuch = alice("task", "list", "--team", "nosuch")
    assert nosuch.returncode == 1 and "404 not_found" in nosuch.stderr, nosuch.stderr

    # A risky task waits for a person: listed by `approvals`, approved, then denied
    # (which keeps it out of dispatch for good).
    risky = json.loads(alice.ok("task", "create", "Risky", "--team", "demo", "--label", "risk",
                                "--json"))  # fmt: skip
    waiting = alice.ok("approvals", "--team", "demo")
    assert any(line.split()[:2] == [risky["id"], "task"] for line in waiting.splitlines())
    # The revision she read: decided on only while the task is what she saw.
    stale = alice("task", "approve", risky["id"], "--revision", str(risky["revision"] - 1))
    assert stale.returncode == 1 and "409 conflict" in stale.stderr, stale.stderr
    assert alice.ok("task", "approve", risky["id"], "--revision", str(risky["revision"])) == (
        f"approved {risky['id']}: it may start now\n"
    )
    assert alice.ok("task", "deny", risky["id"], "--reason", "not today") == (
        f"denied {risky['id']}\n"
    )
    assert json.loads(alice.ok("task", "show", risky["id"], "--json"))["approval"]["state"] == (
        "denied"
    )

    # The demo's own chain is out of the way: this story's worker has one task to run.
    for task_id in ("demo-divide", "demo-multiply"):
        assert "cancelled" in alice.ok("task", "move", task_id, "cancelled")
    watch = alice.watch("demo")
    try:
        assert watch.ready.wait(15), "watch never said hello"
        since = time.monotonic()
        created = json.loads(
            alice.ok(
                "task",
                "create",
                "Add multiply() to calc.py",
                "--team",
                "demo",
                "--repository",
                "shop",
                "--verify-cmd",
                VERIFY,
                "--json",
            )  # fmt: skip
        )
        task_id = created["id"]
        t = time.monotonic()
        assert watch.arrival(task_id, lambda f: f["task"]["status"] == "todo", t, since) <= 1.0
        listed = alice.ok("task", "list", "--team", "demo", "--status", "todo")
        assert listed.splitlines()[0].split() == ["ID", "STATUS", "PRIORITY", "ASSIGNEE", "TITLE"]
        assert task_id in listed

        since = time.monotonic()
        claimed = alice.ok("task", "claim", task_id, "--agent", "demo-coder")
        assert "in_progress" in claimed and "ticket: " in claimed
        t = time.monotonic()
        assert watch.arrival(task_id, lambda f: f["kind"] == "claimed", t, since) <= 1.0
        since = time.monotonic()
        assert "commented on" in alice.ok("task", "comment", task_id, "keep it small")
        t = time.monotonic()
        assert watch.arrival(task_id, lambda f: f["kind"] == "commented", t, since) <= 1.0

        since = time.monotonic()
        report = Executor("demo-coder").work_once()  # the worker runs the claimed task
        assert report.task_id == task_id and report.verdict == "pass", report
        # Written by another process than the server's: without a shared channel layer
        # (Redis) the server's look at the log's head, woken by the commit, delivers it.
        t = time.monotonic()
        in_review = watch.arrival(
            task_id, lambda f: f["task"]["status"] == "in_review", t, since, 5
        )
        assert in_review <= 1.0

        review = alice.ok("review", task_id)
        assert "verdict pass" in review and "+def multiply(a, b):" in review
        assert " calc.py | +4 -0" in review

        # Another team's user: the API's 404, one line, exit status 1.
        outsider.ok("login", "--server", base, "--username", "bob", "--password-stdin",
                    stdin="bob-pw-1\n")  # fmt: skip
        refused = outsider("task", "approve", task_id)
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr.startswith("clawboo: 404 not_found: ")
        assert refused.stderr.count("\n") == 1

        # The demo's repository lands through its merge queue: approve puts the task
        # in line; the queue's job (run here as the schedule would) lands it.
        queued = alice.ok("task", "approve", task_id)
        assert queued.startswith(f"queued {task_id}: position 1 in the merge queue")
        since = time.monotonic()
        assert merge_queue.drain_all() == 1
        t = time.monotonic()
        assert watch.arrival(task_id, lambda f: f["task"]["status"] == "done", t, since) <= 1.0
    finally:
        watch.stop()
    shown = json.loads(alice.ok("task", "show", task_id, "--json"))
    assert shown["status"] == "done"
    log = subprocess.run(
        ["git", "log", "--format=%s", "main"],
        cwd=tmp_path / "demo" / "shop",
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert log.splitlines()[0] == "Add multiply() to calc.py"


def test_errors_are_one_line_with_a_nonzero_status(tmp_path):
    cli = Cli(tmp_path / "nobody")
    missing = cli("task", "list")
    assert missing.returncode == 1
    assert missing.stderr == "clawboo: not logged in: run `clawboo login --server URL` first\n"
    bad = cli("login", "--server", "ftp://example", "--token", "k")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    down = cli("login", "--server", "http://127.0.0.1:9", "--token", "k")
    assert down.returncode == 1
    assert down.stderr.startswith("clawboo: cannot reach http://127.0.0.1:9: ")
    assert down.stderr.count("\n") == 1


# An agent writes a file whose lines carry terminal escapes: "\x1b[1A\x1b[2K" moves the
# cursor up and erases the line above, so a raw print hides the added line before it.
SLY_SCRIPT = (
    "import pathlib; pathlib.Path('feature.txt').write_text("
    "'ok\\nrm -rf ~\\n\\x1b[1A\\x1b[2K\\x1b]0;owned\\x07 \\u202eevil\\n')"
)


def test_text_from_the_board_reaches_the_terminal_with_its_control_characters_shown(
    daphne, tmp_path, repo
):
    """Titles, comments and diffs are other people's and agents' text: printed raw, an
    escape sequence in them would rewrite the person's terminal -- erase the diff line
    they are about to approve, retitle the window, fake a line. The CLI shows each
    control character as its escape (``\\x1b``) and obeys none; ``--json`` was
    always escaped."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from board import store
    from core import repositories

    repositories.register(team="default", path=str(repo), id="app", verify_cmd="true")
    ada = get_user_model().objects.create_user(username="ada", is_staff=True)
    registry.add_member("default", ada)
    registry.create_agent(
        id="sly",
        display_name="Sly",
        team="default",
        runtime="command",
        settings={"argv": [sys.executable, "-c", SLY_SCRIPT]},
        owner=ada,
    )
    title = "Tidy \x1b[31mup\x1b[0m\r\x1b[2Kall good \x1b]0;owned\x07\u202eevil"
    task = store.create_task(title=title, team="default", repository="app").task
    report = Executor("sly").work_once()
    assert report.task_id == task.id and report.verdict == "pass", report
    base = daphne()
    cli = Cli(tmp_path / "ada")
    cli.ok("login", "--server", base, "--token", Token.objects.create(user=ada).key)

    shown = {
        "list": cli.ok("task", "list", "--team", "default"),
        "show": cli.ok("task", "show", task.id),
        "review": cli.ok("review", task.id),
    }
    for what, out in shown.items():
        assert not set(out) & {"\x1b", "\x07", "\r", "\u202e"}, (what, out)
    assert "Tidy \\x1b[31mup\\x1b[0m\\x0d\\x1b[2Kall good" in shown["show"]
    assert "+rm -rf ~\n+\\x1b[1A\\x1b[2K\\x1b]0;owned\\x07 \\u202eevil\n" in shown["review"]
    # The machine-readable answer is the API's text, unchanged.
    assert json.loads(cli.ok("task", "show", task.id, "--json"))["title"] == title


def test_review_of_a_task_with_no_worktree_says_so_not_none():
    from clawboo.people import review_text

    review = {"workspace": None, "diff": {"files": []}, "verification": None, "cost": {}}
    task = {"id": "t1", "title": "Plan the sprint", "status": "in_progress"}
    text = review_text(review, task, color=False)
    assert "None" not in text
    assert "branch - (no worktree" in text


def test_review_of_a_landed_task_names_the_commit_it_landed_as():
    # After `task approve` the review still read "branch … → main" and nothing more:
    # no word that it had landed, nor as which commit.
    from clawboo.people import review_text

    landing = {"result": "landed", "state": "landed", "commit": "27be7e66ada18bda6809",
               "base_branch": "main", "by": "admin"}  # fmt: skip
    workspace = {"branch": "clawboo/task-t1", "base_branch": "main", "landing": landing}
    review = {"workspace": workspace, "diff": {"files": []}, "verification": None}
    task = {"id": "t1", "title": "Add multiply()", "status": "done"}
    lines = review_text(review, task, color=False).splitlines()
    assert lines[1:3] == [
        "branch clawboo/task-t1 → main",
        "landed as 27be7e66ada1 on main (approved by admin)",
    ]
    # Not landed (queued, or a conflict): no such line.
    workspace["landing"] = {"result": "conflict", "state": "conflict"}
    assert "landed" not in review_text(review, task, color=False)


def test_a_failure_with_no_verify_command_says_so_in_review_and_show():
    # It printed "verdict fail" and nothing else, where the board says "no verify command".
    from clawboo.people import review_text, task_card

    unverified = {"verdict": "fail", "evidence": "(none configured)", "gate": None}
    review = {"workspace": None, "diff": {"files": []}, "verification": unverified}
    task = {"id": "t1", "title": "Say hello", "status": "in_review", "verification": unverified}
    for text in (review_text(review, task, color=False), task_card(task)):
        assert "fail (no verify command: set one on the task" in text, text
    gated = {"verdict": "fail", "gate": {"command": "make test", "exit_code": 2}}
    assert "verdict fail (make test exit 2)" in review_text(
        {**review, "verification": gated}, task, color=False
    )


def test_task_wait_at_a_terminal_says_where_the_task_is_while_it_waits(monkeypatch, capsys):
    import argparse

    from clawboo import people

    statuses = iter(["todo", "todo", "in_progress", "in_progress", "in_review"])

    class Server:
        def call(self, method, path, body=None):
            return {"id": "t1", "title": "Add divide()", "status": next(statuses)}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    monkeypatch.setattr(people.time, "sleep", lambda s: None)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    args = argparse.Namespace(id="t1", status=["in_review"], timeout=300.0, json=False)
    assert people.cmd_task_wait(args) == 0
    out, err = capsys.readouterr()
    # One line per status it passes through, not one per poll; the answer on stdout.
    assert err.splitlines() == [
        "t1 is todo; waiting for in_review (up to 300 s, Ctrl-C to stop)",
        "t1 is in_progress; waiting for in_review (up to 300 s, Ctrl-C to stop)",
    ]
    assert "in_review" in out


def test_logout_says_removed_only_when_there_was_a_login_to_remove(tmp_path, monkeypatch, capsys):
    import argparse

    from clawboo import people

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    stored = tmp_path / "clawboo" / "credentials.json"
    stored.parent.mkdir()
    stored.write_text("{}")
    args = argparse.Namespace(json=False)
    assert people.cmd_logout(args) == 0
    assert capsys.readouterr().out.startswith("logged out (removed ")
    assert not stored.exists()
    assert people.cmd_logout(args) == 0
    assert capsys.readouterr().out.startswith("not logged in")


def test_task_list_says_when_it_shows_only_the_first_page(monkeypatch, capsys):
    import argparse

    from clawboo import people

    pages = {
        "full": {"results": [{"id": "t1", "status": "todo", "title": "One"}], "next": "…"},
        "all": {"results": [{"id": "t1", "status": "todo", "title": "One"}], "next": None},
    }
    which = {"page": "full"}

    class Server:
        def call(self, method, path, body=None):
            return pages[which["page"]]

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(
        team=None, status=None, assignee=None, label=None, limit=1, ready=False, json=False
    )
    assert people.cmd_task_list(args) == 0
    out, err = capsys.readouterr()
    assert "t1" in out and "more tasks than the 1 shown: raise --limit" in err
    which["page"] = "all"
    assert people.cmd_task_list(args) == 0
    assert capsys.readouterr().err == ""


def test_task_list_says_which_tasks_wait_for_a_persons_approval(monkeypatch, capsys):
    # An agent's task read "todo" like any other, and no worker ever took it.
    import argparse

    from clawboo import people

    waiting = {"id": "t1", "status": "todo", "title": "Filed by a bot"}
    rows = [
        {**waiting, "approval": {"state": "required"}},
        {**waiting, "id": "t2", "approval": {"state": "approved"}},
        {**waiting, "id": "t3", "approval": None},
        {**waiting, "id": "t4", "status": "done", "approval": {"state": "denied"}},
    ]

    class Server:
        def call(self, method, path, body=None):
            return {"results": rows, "next": None}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(
        team=None, status=None, assignee=None, label=None, limit=50, ready=False, json=False
    )
    assert people.cmd_task_list(args) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "todo (approval required)" in lines["t1"]
    assert "(approval" not in lines["t2"] + lines["t3"] + lines["t4"]
    args.json = True  # scripts get the API's status, as it is
    assert people.cmd_task_list(args) == 0
    assert [t["status"] for t in json.loads(capsys.readouterr().out)][0] == "todo"


def test_a_task_an_agent_files_says_it_waits_for_approval_as_the_list_does(monkeypatch, capsys):
    # `clawboo task create` with an agent's key printed "todo" where `task list` says
    # "todo (approval required)": one task, two words for its state.
    import argparse

    from clawboo import people

    filed = {"id": "t1", "status": "todo", "title": "Filed by a bot"}

    class Server:
        def call(self, method, path, body=None):
            return {**filed, "approval": {"state": "required"}}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(
        title="Filed by a bot",
        description=None,
        priority=None,
        repository=None,
        label=None,
        verify_cmd=None,
        team=None,
        depends_on=None,
        backlog=False,
        json=False,
    )
    assert people.cmd_task_create(args) == 0
    assert "todo (approval required)" in capsys.readouterr().out


def test_task_move_to_done_of_a_task_in_review_approves_and_lands_it(monkeypatch, capsys):
    # It posted a plain transition: the task said "done" and its change stayed on its
    # branch, where the board's and the console's "done" go through approve.
    import argparse

    from clawboo import people

    calls = []
    landed = {
        "result": "landed",
        "task": {"id": "t1", "status": "done"},
        "base_branch": "main",
        "commit": "53395431d6a8aa",
        "strategy": "squash",
    }

    class Server:
        def call(self, method, path, body=None):
            calls.append((method, path))
            if method == "GET":
                return {"id": "t1", "status": which["status"], "title": "One"}
            return landed if path.endswith("/approve") else {"id": "t1", "status": "done"}

    which = {"status": "in_review"}
    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(id="t1", status="done", agent=None, override=None, json=False)
    assert people.cmd_task_move(args) == 0
    assert calls[-1] == ("POST", "/api/board/tasks/t1/approve")
    assert capsys.readouterr().out == "landed t1 on main as 53395431d6a8 (squash)\n"
    which["status"] = "in_progress"  # nothing to land: the plain move, as before
    assert people.cmd_task_move(args) == 0
    assert calls[-1] == ("POST", "/api/board/tasks/t1/transition")


def test_task_move_into_in_progress_without_an_agent_names_the_option(monkeypatch):
    # The refusal ended "(agent_id)": the API's field, which no option of `move` is.
    import argparse

    from clawboo import people

    class Server:
        def call(self, method, path, body=None):
            if method == "GET":
                return {"id": "t1", "status": "todo", "title": "One"}
            raise people.Failure(
                "clawboo: 409 claim_required: moving task 't1' into in_progress needs a"
                " claim: name the agent who works it (agent_id)"
            )

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(id="t1", status="in_progress", agent=None, override=None, json=False)
    with pytest.raises(people.Failure) as failed:
        people.cmd_task_move(args)
    assert failed.value.line.endswith("(agent_id); here: --agent A")


def test_task_wait_for_a_status_a_done_task_cannot_reach_answers_at_once(monkeypatch):
    # It polled until the timeout (300 s by default) for a task already done.
    import argparse

    from clawboo import people

    polls = []

    class Server:
        def call(self, method, path, body=None):
            polls.append(path)
            return {"id": "t1", "title": "Add multiply()", "status": "done"}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    monkeypatch.setattr(people.time, "sleep", lambda s: None)
    args = argparse.Namespace(id="t1", status=["in_review"], timeout=300.0, json=False)
    with pytest.raises(people.Failure) as failed:
        people.cmd_task_wait(args)
    assert failed.value.line == (
        "clawboo: t1 is done, which a task never leaves: it will not reach in_review"
    )
    assert len(polls) == 1
    args.status = ["done"]  # what it is already: the answer, as before
    assert people.cmd_task_wait(args) == 0


def test_login_with_password_stdin_and_no_username_says_what_is_missing(monkeypatch):
    # The username prompt read the piped password, and the answer was "401 wrong
    # username or password".
    import argparse
    import io

    from clawboo import people

    monkeypatch.setattr(sys, "stdin", io.StringIO("s3cret\n"))
    args = argparse.Namespace(
        server="http://127.0.0.1:9", token=None, username=None, password_stdin=True
    )
    with pytest.raises(people.Failure) as failed:
        people.cmd_login(args)
    assert failed.value.line == (
        "clawboo: --password-stdin needs --username (stdin holds the password)"
    )
    assert failed.value.status == 2
    assert sys.stdin.read() == "s3cret\n"  # nothing was read, nothing was sent


def test_approvals_names_the_tasks_in_review_instead_of_saying_nothing_waits(monkeypatch, capsys):
    # After the tour `clawboo approvals` said "nothing waits for you" with a task in
    # review, the decision the tour had just asked of its reader.
    import argparse

    from clawboo import people

    answers = {
        "/api/approvals": [],
        "approval=waiting": {"results": [], "next": None},
        "status=in_review": {"results": [{"id": "demo-divide"}, {"id": "t\x1b2"}], "next": None},
    }
    asked = []

    class Server:
        def call(self, method, path, body=None):
            asked.append(path)
            return next(a for key, a in answers.items() if key in path)

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(decide=None, team="demo", json=False)
    assert people.cmd_approvals(args) == 0
    assert capsys.readouterr().out == (
        "no task or tool call waits for your approval\n"
        "in review, for a person to decide: demo-divide, t\\x1b2 (`clawboo review ID`)\n"
    )
    assert "/api/board/tasks?team=demo&status=in_review" in asked
    # Nothing in review either: nothing waits.
    answers["status=in_review"] = {"results": [], "next": None}
    assert people.cmd_approvals(args) == 0
    assert capsys.readouterr().out == "nothing waits for you\n"
    # Scripts get the approvals alone, as before.
    asked.clear()
    args.json = True
    assert people.cmd_approvals(args) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert not any("in_review" in path for path in asked)


def test_task_create_says_which_team_the_task_was_filed_in(monkeypatch, capsys):
    # Filed without --team, "Write the changelog" went to the default team, where no
    # agent of the demo works, and the row said nothing of a team.
    import argparse

    from clawboo import people

    class Server:
        def call(self, method, path, body=None):
            return {"id": "t1", "status": "todo", "title": "Write the changelog", "team": "default"}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(
        title="Write the changelog",
        description=None,
        priority=None,
        repository=None,
        label=None,
        verify_cmd=None,
        team=None,
        depends_on=None,
        backlog=False,
        json=False,
    )
    assert people.cmd_task_create(args) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[:3] == ["ID", "TEAM", "STATUS"]
    assert row.split()[:3] == ["t1", "default", "todo"]


def test_task_wait_that_times_out_on_a_blocked_task_says_what_a_person_does(monkeypatch):
    # The tour's wait on a task its agent could not finish ended "… is blocked after
    # 300 s", and nothing said that only a person moves a blocked task on.
    import argparse

    from clawboo import people

    class Server:
        def call(self, method, path, body=None):
            return {"id": "t1", "title": "Add subtract()", "status": "blocked"}

    monkeypatch.setattr(people.Client, "from_login", classmethod(lambda cls: Server()))
    args = argparse.Namespace(id="t1", status=["in_review"], timeout=0.0, json=False)
    with pytest.raises(people.Failure) as failed:
        people.cmd_task_wait(args)
    assert failed.value.line == (
        "clawboo: timeout: t1 is blocked after 0 s; a blocked task waits for a person:"
        " `clawboo task show t1` says why, `clawboo task move t1 todo` tries it again"
    )
